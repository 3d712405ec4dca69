"""Hydra filters as data: bundle filters (a record passes or not) and value
filters (a value in, a value or null out), validated from a job file.

Bundle filters: ``field`` (apply a value filter to ``from``, store it in ``to``;
fails on null unless ``nullFail`` is false), ``chain`` (all in order), ``not``.
Value filters: ``split`` (string -> array at ``split``, default ","), ``empty``
(keeps empty values; ``not: true`` keeps non-empty ones), ``chain``. A value
filter given an array applies to each element and drops the nulls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loaders.jobfile import JobText, KeyPath

__all__ = [
    "BundleFilter",
    "ChainFilter",
    "EmptyValue",
    "FieldFilter",
    "FieldMapping",
    "NotFilter",
    "SplitValue",
    "ValueChain",
    "ValueFilter",
    "parse_bundle_filter",
    "parse_fields",
    "parse_value_filter",
]


@dataclass(frozen=True)
class SplitValue:
    """``split``: a string becomes the array of its pieces."""

    separator: str = ","


@dataclass(frozen=True)
class EmptyValue:
    """``empty``: keep empty values (``negate``: keep non-empty ones); others become null."""

    negate: bool = False


@dataclass(frozen=True)
class ValueChain:
    """``chain`` of value filters, applied in order."""

    filters: tuple[ValueFilter, ...]


ValueFilter = SplitValue | EmptyValue | ValueChain


@dataclass(frozen=True)
class FieldFilter:
    """``field``: filter the value of ``source`` into ``target``."""

    source: str
    target: str
    filter: ValueFilter | None = None
    null_fail: bool = True


@dataclass(frozen=True)
class ChainFilter:
    """``chain``: every filter in order; the record passes if all pass."""

    filters: tuple[BundleFilter, ...]


@dataclass(frozen=True)
class NotFilter:
    """``not``: the record passes if the inner filter fails."""

    filter: BundleFilter


BundleFilter = FieldFilter | ChainFilter | NotFilter


@dataclass(frozen=True)
class FieldMapping:
    """One entry of ``map.fields``: copy ``source`` to ``target`` through ``filter``."""

    source: str
    target: str
    filter: ValueFilter | None = None


def _object(doc: Any, path: KeyPath, job: JobText, known: set[str]) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise job.error(path, "a filter must be an object with an 'op'")
    for key in doc:
        if key not in known:
            raise job.error(
                (*path, key),
                f"unknown key {key!r} for op {doc.get('op')!r}",
                hint="Known keys: " + ", ".join(sorted(known)) + ".",
            )
    return doc


def _string(
    doc: dict[str, Any], key: str, path: KeyPath, job: JobText, default: str | None = None
) -> str:
    value = doc.get(key, default)
    if not isinstance(value, str) or not value:
        raise job.error((*path, key) if key in doc else path, f"{key!r} must be a non-empty string")
    return value


def _flag(doc: dict[str, Any], key: str, path: KeyPath, job: JobText, default: bool) -> bool:
    value = doc.get(key, default)
    if not isinstance(value, bool):
        raise job.error((*path, key), f"{key!r} must be true or false")
    return value


def _filter_list(doc: dict[str, Any], path: KeyPath, job: JobText) -> list[Any]:
    items = doc.get("filter")
    if not isinstance(items, list) or not items:
        raise job.error(
            (*path, "filter") if "filter" in doc else path, "a chain needs a 'filter' list"
        )
    return items


_VALUE_OPS = ("split", "empty", "chain")
_BUNDLE_OPS = ("field", "chain", "not")


def parse_value_filter(doc: Any, path: KeyPath, job: JobText) -> ValueFilter:
    """Validate one value filter."""
    op = doc.get("op") if isinstance(doc, dict) else None
    if op == "split":
        body = _object(doc, path, job, {"op", "split"})
        return SplitValue(_string(body, "split", path, job, default=","))
    if op == "empty":
        body = _object(doc, path, job, {"op", "not"})
        return EmptyValue(_flag(body, "not", path, job, False))
    if op == "chain":
        body = _object(doc, path, job, {"op", "filter"})
        items = _filter_list(body, path, job)
        return ValueChain(
            tuple(parse_value_filter(f, (*path, "filter", i), job) for i, f in enumerate(items))
        )
    raise job.error(
        (*path, "op") if isinstance(doc, dict) and "op" in doc else path,
        f"unknown value filter {op!r}",
        hint="Value filters: " + ", ".join(_VALUE_OPS) + ".",
    )


def parse_bundle_filter(doc: Any, path: KeyPath, job: JobText) -> BundleFilter:
    """Validate one bundle filter."""
    op = doc.get("op") if isinstance(doc, dict) else None
    if op == "field":
        body = _object(doc, path, job, {"op", "from", "to", "filter", "nullFail"})
        source = _string(body, "from", path, job)
        inner = (
            parse_value_filter(body["filter"], (*path, "filter"), job) if "filter" in body else None
        )
        return FieldFilter(
            source=source,
            target=_string(body, "to", path, job, default=source),
            filter=inner,
            null_fail=_flag(body, "nullFail", path, job, True),
        )
    if op == "chain":
        body = _object(doc, path, job, {"op", "filter"})
        items = _filter_list(body, path, job)
        return ChainFilter(
            tuple(parse_bundle_filter(f, (*path, "filter", i), job) for i, f in enumerate(items))
        )
    if op == "not":
        body = _object(doc, path, job, {"op", "filter"})
        if "filter" not in body:
            raise job.error(path, "'not' needs a 'filter'")
        return NotFilter(parse_bundle_filter(body["filter"], (*path, "filter"), job))
    raise job.error(
        (*path, "op") if isinstance(doc, dict) and "op" in doc else path,
        f"unknown bundle filter {op!r}",
        hint="Bundle filters: " + ", ".join(_BUNDLE_OPS) + ".",
    )


def parse_fields(doc: Any, path: KeyPath, job: JobText) -> tuple[FieldMapping, ...]:
    """Validate ``map.fields``: names, or ``{from, to, filter}`` objects."""
    if not isinstance(doc, list):
        raise job.error(path, "'fields' must be a list")
    mappings = []
    for i, item in enumerate(doc):
        if isinstance(item, str) and item:
            mappings.append(FieldMapping(item, item))
            continue
        body = _object(item, (*path, i), job, {"from", "to", "filter"})
        source = _string(body, "from", (*path, i), job)
        inner = (
            parse_value_filter(body["filter"], (*path, i, "filter"), job)
            if "filter" in body
            else None
        )
        mappings.append(
            FieldMapping(source, _string(body, "to", (*path, i), job, default=source), inner)
        )
    return tuple(mappings)
