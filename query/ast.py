"""The typed syntax tree of a query path, with a canonical printer.

``str(parse_path(text))`` is the canonical text of a path, and parsing it again
gives an equal tree (positions are not part of equality).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Bound", "Element", "Path", "Property", "quote_name"]

_BARE_NAME = re.compile(r'[^/:,+*"()\[\]|!@%$~;{}\s][^/:,"()\[\];{}\s]*\Z')
_PROPERTY_WORDS = frozenset({"hits", "nodes"})


def quote_name(name: str) -> str:
    """``name`` as a path writes it: bare when it can be, else a JSON string."""
    if _BARE_NAME.match(name) and name not in _PROPERTY_WORDS:
        return name
    return json.dumps(name, ensure_ascii=False)


@dataclass(frozen=True)
class Bound:
    """One bound on a property: ``>n``, ``<n`` or ``=n``."""

    op: Literal[">", "<", "="]
    value: int

    def admits(self, number: int) -> bool:
        """Whether ``number`` satisfies this bound."""
        if self.op == ">":
            return number > self.value
        if self.op == "<":
            return number < self.value
        return number == self.value

    def __str__(self) -> str:
        return f"{self.op}{self.value}"


@dataclass(frozen=True)
class Property:
    """A node property (``hits`` or ``nodes``), shown as a column when ``show``.

    Several bounds on one property are AND-ed: ``hits>1<10`` is a range.
    """

    name: Literal["hits", "nodes"]
    show: bool = False
    bounds: tuple[Bound, ...] = ()

    def __str__(self) -> str:
        return ("+" if self.show else "") + self.name + "".join(map(str, self.bounds))


@dataclass(frozen=True)
class Element:
    """One step of a path.

    ``kind`` is ``"all"`` (every child, ``+`` or ``*``) or ``"names"`` (the
    listed children, looked up in the given order); ``show`` puts the node's
    name in a column (``+``).
    """

    kind: Literal["all", "names"]
    names: tuple[str, ...] = ()
    show: bool = False
    properties: tuple[Property, ...] = ()
    line: int = field(default=1, compare=False)
    column: int = field(default=1, compare=False)

    def __str__(self) -> str:
        if self.kind == "all":
            text = "+" if self.show else "*"
        else:
            text = ("+" if self.show else "") + ",".join(map(quote_name, self.names))
        if self.properties:
            text += ":" + ",".join(map(str, self.properties))
        return text


@dataclass(frozen=True)
class Path:
    """A whole path: its elements, applied from the tree's internal root."""

    elements: tuple[Element, ...]

    def __str__(self) -> str:
        return "/".join(map(str, self.elements))
