"""Hydra filters as data, validated from a job file.

Bundle filters decide whether a record passes (and may set fields); value
filters turn a value into another value or null. Names and options follow
Hydra's (``hydra-filters``); the README's job-format section lists each one.
A value filter given an array applies to each element and drops the nulls (an
array left empty becomes null), unless the filter has ``once: true`` or works
on whole arrays by nature (``split``, ``slice``, ``join``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loaders.job.text import JobText, KeyPath

__all__ = [
    "BundleFilter",
    "ChainFilter",
    "ConcatFilter",
    "ConstFilter",
    "ContainsFilter",
    "EqualsFilter",
    "FieldFilter",
    "FieldMapping",
    "NotFilter",
    "ValueFilter",
    "parse_bundle_filter",
    "parse_fields",
    "parse_value_filter",
]


@dataclass(frozen=True)
class ValueFilter:
    """A value filter: ``op`` and its settings (``options``, sorted name/value pairs)."""

    op: str
    options: tuple[tuple[str, Any], ...] = ()
    filters: tuple[ValueFilter, ...] = ()  # the inner filters of a chain
    once: bool = False  # give an array to the filter whole

    def get(self, name: str) -> Any:
        """The setting ``name`` (validated, so always present)."""
        return dict(self.options)[name]


@dataclass(frozen=True)
class FieldFilter:
    """``field``: filter the value of ``source`` into ``target``."""

    source: str
    target: str
    filter: ValueFilter | None = None
    null_fail: bool = True
    negate: bool = False


@dataclass(frozen=True)
class ChainFilter:
    """``chain``: filters in order; with ``fail_stop`` the first failure returns ``fail_return``."""

    filters: tuple[BundleFilter, ...]
    fail_stop: bool = True
    fail_return: bool = False


@dataclass(frozen=True)
class NotFilter:
    """``not``: with ``field``, passes when the field is null; with ``filter``, negates it."""

    field: str | None = None
    filter: BundleFilter | None = None


@dataclass(frozen=True)
class EqualsFilter:
    """``equals``: the fields ``left`` and ``right`` hold equal values (both null counts)."""

    left: str
    right: str
    negate: bool = False


@dataclass(frozen=True)
class ContainsFilter:
    """``contains``: ``field`` contains one of ``values``, or the value of field ``source``."""

    field: str
    values: tuple[str, ...] = ()
    source: str | None = None
    negate: bool = False


@dataclass(frozen=True)
class ConstFilter:
    """``value``: set ``target`` to the constant ``value`` (through ``filter``)."""

    value: str
    target: str
    filter: ValueFilter | None = None
    null_fail: bool = True


@dataclass(frozen=True)
class ConcatFilter:
    """``concat``: join the fields ``inputs`` (array elements too) with ``join`` into ``target``."""

    inputs: tuple[str, ...]
    target: str
    join: str = ""


BundleFilter = (
    FieldFilter
    | ChainFilter
    | NotFilter
    | EqualsFilter
    | ContainsFilter
    | ConstFilter
    | ConcatFilter
)


@dataclass(frozen=True)
class FieldMapping:
    """One entry of ``map.fields``: copy ``source`` to ``target`` through ``filter``."""

    source: str
    target: str
    filter: ValueFilter | None = None


class _Reader:
    """Typed access to one filter object's keys, with errors pointing into the job file."""

    def __init__(self, doc: Any, path: KeyPath, job: JobText, known: set[str]) -> None:
        if not isinstance(doc, dict):
            raise job.error(path, "a filter must be an object with an 'op'")
        job.check_keys(doc, path, known | {"op"}, f" for op {doc.get('op')!r}")
        self.doc, self.path, self.job = doc, path, job

    def error(self, key: str | None, reason: str) -> Exception:
        return self.job.error(
            (*self.path, key) if key is not None and key in self.doc else self.path, reason
        )

    def text(self, key: str, default: str | None = None, empty_ok: bool = False) -> str:
        value = self.doc.get(key, default)
        if not isinstance(value, str) or (not value and not empty_ok):
            raise self.error(key, f"{key!r} must be a {'' if empty_ok else 'non-empty '}string")
        return value

    def optional_text(self, key: str) -> str | None:
        return self.text(key, empty_ok=True) if key in self.doc else None

    def flag(self, key: str, default: bool) -> bool:
        value = self.doc.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"{key!r} must be true or false")
        return value

    def whole(self, key: str, default: int, minimum: int | None = None) -> int:
        value = self.doc.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(key, f"{key!r} must be a whole number")
        if minimum is not None and value < minimum:
            raise self.error(key, f"{key!r} must be at least {minimum}")
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        value = self.doc.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, f"{key!r} must be a string or a list of strings")
        return tuple(value)

    def items(self) -> list[Any]:
        items = self.doc.get("filter")
        if not isinstance(items, list) or not items:
            raise self.error("filter", "a chain needs a 'filter' list")
        return items


_HASH_TYPES = {0: "Java String.hashCode", 3: "the first 8 bytes of SHA-1", 4: "SHA-1 as hex"}
_MATCH_KEYS = {"value", "contains", "match", "find", "toLower"}
_VALUE_KEYS: dict[str, set[str]] = {
    "split": {"split", "fixedLength"},
    "empty": {"not"},
    "case": {"lower", "upper"},
    "default": {"value"},
    "hash": {"type", "abs"},
    "mod": {"mod", "abs"},
    "pad": {"left", "right"},
    "slice": {"from", "to"},
    "regex": {"pattern", "replace"},
    "replace": {"find", "replace", "regex"},
    "join": {"join"},
    "require": _MATCH_KEYS,
    "exclude": _MATCH_KEYS,
    "chain": {"filter", "nullStop"},
}


def _check_regex(reader: _Reader, key: str, pattern: str) -> None:
    import re

    try:
        re.compile(pattern)
    except re.error as exc:
        raise reader.error(key, f"{key!r} is not a valid regular expression ({exc})") from None


def _value_options(op: str, r: _Reader) -> dict[str, Any]:
    """The validated settings of value filter ``op``."""
    if op == "split":
        return {"split": r.text("split", ","), "fixedLength": r.whole("fixedLength", -1)}
    if op == "empty":
        return {"not": r.flag("not", False)}
    if op == "case":
        return {"lower": r.flag("lower", False), "upper": r.flag("upper", False)}
    if op == "default":
        return {"value": r.text("value", empty_ok=True)}
    if op == "hash":
        kind = r.whole("type", 0)
        if kind not in _HASH_TYPES:
            raise r.error(
                "type",
                f"hash type {kind} is not available; use "
                + ", ".join(f"{k} ({v})" for k, v in _HASH_TYPES.items()),
            )
        return {"type": kind, "abs": r.flag("abs", False)}
    if op == "mod":
        return {"mod": r.whole("mod", 1, minimum=1), "abs": r.flag("abs", True)}
    if op == "pad":
        return {"left": r.text("left", "", empty_ok=True), "right": r.text("right", "", True)}
    if op == "slice":
        return {"from": r.whole("from", 0), "to": r.whole("to", -1)}
    if op == "regex":
        pattern = r.text("pattern")
        _check_regex(r, "pattern", pattern)
        return {"pattern": pattern, "replace": r.optional_text("replace")}
    if op == "replace":
        find, regex = r.text("find"), r.flag("regex", False)
        if regex:
            _check_regex(r, "find", find)
        return {"find": find, "replace": r.text("replace", "", True), "regex": regex}
    if op == "join":
        return {"join": r.text("join", ",", empty_ok=True)}
    if op in ("require", "exclude"):
        sets = {k: r.texts(k) for k in ("value", "contains", "match", "find")}
        for key in ("match", "find"):
            for pattern in sets[key]:
                _check_regex(r, key, pattern)
        if not any(sets.values()):
            raise r.error(None, f"{op!r} needs one of 'value', 'contains', 'match' or 'find'")
        return {**sets, "toLower": r.flag("toLower", False)}
    return {"nullStop": r.flag("nullStop", True)}


def parse_value_filter(doc: Any, path: KeyPath, job: JobText) -> ValueFilter:
    """Validate one value filter (a list is a chain, as in Hydra)."""
    if isinstance(doc, list):
        doc = {"op": "chain", "filter": doc}
    op = doc.get("op") if isinstance(doc, dict) else None
    if op not in _VALUE_KEYS:
        raise job.error(
            (*path, "op") if isinstance(doc, dict) and "op" in doc else path,
            f"unknown value filter {op!r}",
            hint="Value filters: " + ", ".join(_VALUE_KEYS) + ".",
        )
    reader = _Reader(doc, path, job, _VALUE_KEYS[op] | {"once"})
    options = _value_options(op, reader)
    inner: tuple[ValueFilter, ...] = ()
    if op == "chain":
        inner = tuple(
            parse_value_filter(f, (*path, "filter", i), job) for i, f in enumerate(reader.items())
        )
    return ValueFilter(op, tuple(sorted(options.items())), inner, reader.flag("once", False))


def _inner_value(reader: _Reader, key: str = "filter") -> ValueFilter | None:
    if key not in reader.doc:
        return None
    return parse_value_filter(reader.doc[key], (*reader.path, key), reader.job)


_BUNDLE_OPS = ("field", "chain", "not", "equals", "contains", "value", "concat")


def parse_bundle_filter(doc: Any, path: KeyPath, job: JobText) -> BundleFilter:
    """Validate one bundle filter (``field`` when there is no ``op``; a list is a chain)."""
    if isinstance(doc, list):
        doc = {"op": "chain", "filter": doc}
    if isinstance(doc, dict) and "op" not in doc and "from" in doc:
        doc = {"op": "field", **doc}
    op = doc.get("op") if isinstance(doc, dict) else None
    if op == "field":
        r = _Reader(doc, path, job, {"from", "to", "filter", "nullFail", "not"})
        source = r.text("from")
        return FieldFilter(
            source,
            r.text("to", source),
            _inner_value(r),
            r.flag("nullFail", True),
            r.flag("not", False),
        )
    if op == "chain":
        r = _Reader(doc, path, job, {"filter", "failStop", "failReturn"})
        return ChainFilter(
            tuple(
                parse_bundle_filter(f, (*path, "filter", i), job) for i, f in enumerate(r.items())
            ),
            r.flag("failStop", True),
            r.flag("failReturn", False),
        )
    if op == "not":
        r = _Reader(doc, path, job, {"field", "filter"})
        if ("field" in doc) == ("filter" in doc):
            raise r.error(
                None, "'not' needs either a 'field' (passes when it is null) or a 'filter'"
            )
        if "field" in doc:
            return NotFilter(field=r.text("field"))
        return NotFilter(filter=parse_bundle_filter(doc["filter"], (*path, "filter"), job))
    if op == "equals":
        r = _Reader(doc, path, job, {"left", "right", "not"})
        return EqualsFilter(r.text("left"), r.text("right"), r.flag("not", False))
    if op == "contains":
        r = _Reader(doc, path, job, {"field", "value", "from", "not"})
        needles, other = r.texts("value"), r.optional_text("from")
        if not needles and other is None:
            raise r.error(None, "'contains' needs a 'value' list or a 'from' field")
        return ContainsFilter(r.text("field"), needles, other, r.flag("not", False))
    if op == "value":
        r = _Reader(doc, path, job, {"value", "to", "filter", "nullFail"})
        return ConstFilter(
            r.text("value", empty_ok=True), r.text("to"), _inner_value(r), r.flag("nullFail", True)
        )
    if op == "concat":
        r = _Reader(doc, path, job, {"in", "out", "join"})
        inputs = r.texts("in")
        if not inputs:
            raise r.error("in", "'concat' needs an 'in' list of fields")
        return ConcatFilter(inputs, r.text("out"), r.text("join", "", empty_ok=True))
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
        r = _Reader(item, (*path, i), job, {"from", "to", "filter"})
        source = r.text("from")
        mappings.append(FieldMapping(source, r.text("to", source), _inner_value(r)))
    return tuple(mappings)


def fields_named(spec: BundleFilter | ValueFilter | None) -> set[str]:
    """Every record field a filter reads or writes (to know which input fields to read)."""
    if spec is None or isinstance(spec, ValueFilter):
        return set()
    if isinstance(spec, FieldFilter):
        return {spec.source, spec.target}
    if isinstance(spec, ChainFilter):
        return set().union(*(fields_named(f) for f in spec.filters))
    if isinstance(spec, NotFilter):
        return {spec.field} if spec.field else fields_named(spec.filter)
    if isinstance(spec, EqualsFilter):
        return {spec.left, spec.right}
    if isinstance(spec, ContainsFilter):
        return {spec.field} | ({spec.source} if spec.source else set())
    if isinstance(spec, ConstFilter):
        return {spec.target}
    return {*spec.inputs, spec.target}
