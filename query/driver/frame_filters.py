"""Filters Spark pushes into the DataFrame source, taken by the path where it can.

An equality (``name = 'US'``, ``name <=> 'US'``) or an ``IN`` list on a column that
shows an element's node names turns that element into a lookup of those names: the
walk reads only those children instead of all of them. Two filters on one column keep
the names both allow. The element must be a plain ``+`` (or a list of names) with no
default, no traps, no ``(skip-limit)`` and not flat (``;``), so the narrowed path gives
exactly the rows the filter keeps; the query must have no rops (after them a column
may hold something else). Every other filter stays with Spark, which applies it to the
rows as usual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from query.syntax.ast import Element, Path

if TYPE_CHECKING:
    from pyspark.sql.datasource import Filter

__all__ = ["NOTHING", "push_filters"]

NOTHING = None
"""What :func:`push_filters` gives as the path when the filters leave no row."""


def push_filters(path: Path, filters: Iterable[Filter]) -> tuple[Path | None, list[Filter]]:
    """``path`` narrowed by the filters it can take, and the filters left to Spark (the
    path is :data:`NOTHING` when no row can pass: two lookups with no name in common)."""
    from pyspark.sql.datasource import EqualNullSafe, EqualTo, In

    columns = path.name_columns()
    wanted: dict[int, list[str]] = {}
    left: list[Filter] = []
    for item in filters:
        names = _names_of(item, (EqualTo, EqualNullSafe), In)
        attribute: tuple[str, ...] = getattr(item, "attribute", ())
        index = columns.get(attribute[0]) if len(attribute) == 1 else None
        if names is None or index is None or not _narrowable(path.elements[index]):
            left.append(item)
            continue
        kept = wanted.get(index)
        wanted[index] = names if kept is None else [n for n in kept if n in names]
    elements = list(path.elements)
    for index, names in wanted.items():
        element = elements[index]
        if element.kind == "names":
            names = [n for n in element.names if n in names]
        if not names:
            return NOTHING, left
        elements[index] = dataclasses.replace(element, kind="names", names=tuple(names))
    return Path(tuple(elements)), left


def _names_of(item: Filter, equalities: tuple[type, ...], member: type) -> list[str] | None:
    """The names a filter keeps (``None``: not a filter on names: not an equality or IN, or
    a value that is not text), in order, each once."""
    if isinstance(item, equalities):
        values = [item.value]  # type: ignore[attr-defined]
    elif isinstance(item, member):
        values = list(item.value)  # type: ignore[attr-defined]
    else:
        return None
    if not values or not all(isinstance(v, str) for v in values):
        return None
    return list(dict.fromkeys(values))


def _narrowable(element: Element) -> bool:
    """Whether a lookup of some of its names gives exactly the element's rows with those
    names."""
    return (
        element.kind in ("all", "names")
        and element.show
        and element.default is None
        and not element.traps
        and not element.skip
        and not element.limit
        and not element.flat
    )
