"""The filter registries, what a filter is made of, and the compiler to Spark columns.

A value filter kind (:class:`ValueKind`) declares its name, the job-file keys it
takes, ``read`` (its model: the validated settings, with defaults) and ``spark``
(its form over one text Column). A bundle filter kind (:class:`BundleKind`) is a
frozen dataclass (its model) with ``read``, ``fields`` and ``spark``. The family
modules register their kinds with :func:`value_filter` / :func:`bundle_filter`;
:mod:`loaders.filters.catalogue` loads them all.

A record is modelled as :class:`SymbolicRecord`: field name -> Column. A bundle
filter compiles to a non-null boolean Column plus the record with the fields it
set; a value filter to a Column of the filtered value. Values a filter cannot take
(``mod`` of a word) are collected by :class:`FilterCompiler` as reject conditions:
the load sets such records aside as rejected.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from loaders.job.text import JobText, KeyPath

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column

__all__ = [
    "BUNDLE_FILTERS",
    "VALUE_FILTERS",
    "BundleKind",
    "FieldMapping",
    "FilterCompiler",
    "NoArrowForm",
    "Settings",
    "SymbolicRecord",
    "ValueFilter",
    "ValueKind",
    "bundle_filter",
    "parse_bundle_filter",
    "parse_fields",
    "parse_value_filter",
    "value_filter",
]


class NoArrowForm(Exception):
    """A filter kind without an Arrow form (:mod:`loaders.filters.arrow_compiler`): a job
    that uses it maps its records in Spark."""


class Settings:
    """Typed access to one filter object's keys, with errors pointing into the job file."""

    def __init__(self, doc: Any, path: KeyPath, job: JobText, known: set[str]) -> None:
        if not isinstance(doc, dict):
            raise job.error(path, "a filter must be an object with an 'op'")
        job.check_keys(doc, path, known | {"op"}, f" for op {doc.get('op')!r}")
        self.doc, self.path, self.job = doc, path, job

    def error(self, key: str | None, reason: str) -> Exception:
        """An error at ``key`` (or at the filter when it has no such key)."""
        return self.job.error(
            (*self.path, key) if key is not None and key in self.doc else self.path, reason
        )

    def text(self, key: str, default: str | None = None, empty_ok: bool = False) -> str:
        """A text setting."""
        value = self.doc.get(key, default)
        if not isinstance(value, str) or (not value and not empty_ok):
            raise self.error(key, f"{key!r} must be a {'' if empty_ok else 'non-empty '}string")
        return value

    def optional_text(self, key: str) -> str | None:
        """A text setting that may be missing (then None)."""
        return self.text(key, empty_ok=True) if key in self.doc else None

    def flag(self, key: str, default: bool) -> bool:
        """A true/false setting."""
        value = self.doc.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"{key!r} must be true or false")
        return value

    def whole(self, key: str, default: int, minimum: int | None = None) -> int:
        """A whole-number setting."""
        value = self.doc.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(key, f"{key!r} must be a whole number")
        if minimum is not None and value < minimum:
            raise self.error(key, f"{key!r} must be at least {minimum}")
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        """A text or list-of-texts setting, as a tuple."""
        value = self.doc.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, f"{key!r} must be a string or a list of strings")
        return tuple(value)

    def items(self) -> list[Any]:
        """A chain's ``filter`` list."""
        items = self.doc.get("filter")
        if not isinstance(items, list) or not items:
            raise self.error("filter", "a chain needs a 'filter' list")
        return items

    def regex(self, key: str, pattern: str) -> str:
        """Check that ``pattern`` (the setting ``key``) is a valid regular expression."""
        try:
            re.compile(pattern)
        except re.error as exc:
            raise self.error(key, f"{key!r} is not a valid regular expression ({exc})") from None
        return pattern


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
class FieldMapping:
    """One entry of ``map.fields``: copy ``source`` to ``target`` through ``filter``."""

    source: str
    target: str
    filter: ValueFilter | None = None


class ValueKind:
    """A kind of value filter. ``whole`` kinds take an array whole (split, slice, join);
    the others apply to each element of an array and drop the nulls."""

    name: ClassVar[str]
    keys: ClassVar[frozenset[str]] = frozenset()
    whole: ClassVar[bool] = False

    @staticmethod
    def read(settings: Settings) -> dict[str, Any]:
        """The validated settings (the model), with their defaults."""
        raise NotImplementedError

    @staticmethod
    def spark(spec: ValueFilter, compiler: FilterCompiler) -> Callable[[Column], Column]:
        """The filter over one text value (null in, null out unless the filter says so)."""
        raise NotImplementedError

    @staticmethod
    def spark_whole(spec: ValueFilter, column: Column, is_array: bool) -> tuple[Column, bool]:
        """For ``whole`` kinds: the filter over a value or an array; whether it gives an array."""
        raise NotImplementedError

    @staticmethod
    def arrow(spec: ValueFilter) -> Callable[[pa.Array], pa.Array]:
        """The filter over one Arrow text array, value for value what :meth:`spark` gives
        (:mod:`loaders.filters.arrow_compiler`); kinds without one raise ``NoArrowForm``."""
        raise NoArrowForm(spec.op)

    @staticmethod
    def arrow_whole(spec: ValueFilter, column: pa.Array, is_array: bool) -> tuple[pa.Array, bool]:
        """For ``whole`` kinds: :meth:`spark_whole` over Arrow arrays (or ``NoArrowForm``)."""
        raise NoArrowForm(spec.op)

    @staticmethod
    def gives_array(spec: ValueFilter) -> bool:
        """Whether the filter turns one text into an array (``regex`` without ``replace``)."""
        return False


@dataclass(frozen=True)
class BundleKind:
    """A kind of bundle filter; subclasses are frozen dataclasses holding its settings."""

    name: ClassVar[str]
    keys: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def read(cls, settings: Settings) -> BundleKind:
        """The validated filter (the model)."""
        raise NotImplementedError

    def fields(self) -> set[str]:
        """Every record field the filter reads or writes."""
        raise NotImplementedError

    def spark(
        self, compiler: FilterCompiler, record: SymbolicRecord
    ) -> tuple[Column, SymbolicRecord]:
        """Whether a record passes, and the record after the filter's field updates."""
        raise NotImplementedError

    def arrow(self, compiler: Any, record: Any) -> tuple[Any, Any]:
        """:meth:`spark` over Arrow arrays: with an ``ArrowCompiler``, over an ``ArrowRecord``,
        whether each record passes (numpy booleans) and the record after the filter
        (:mod:`loaders.filters.arrow_compiler`, which imports this module); kinds without
        an Arrow form raise ``NoArrowForm``."""
        raise NoArrowForm(self.name)


VALUE_FILTERS: dict[str, type[ValueKind]] = {}
BUNDLE_FILTERS: dict[str, type[BundleKind]] = {}
V = TypeVar("V", bound=type[ValueKind])
B = TypeVar("B", bound=type[BundleKind])


def value_filter(kind: V) -> V:
    """Register a value filter kind under its name."""
    VALUE_FILTERS[kind.name] = kind
    return kind


def bundle_filter(kind: B) -> B:
    """Register a bundle filter kind under its name."""
    BUNDLE_FILTERS[kind.name] = kind
    return kind


def _unknown(doc: Any, path: KeyPath, job: JobText, what: str, names: list[str]) -> Exception:
    return job.error(
        (*path, "op") if isinstance(doc, dict) and "op" in doc else path,
        f"unknown {what} filter {doc.get('op') if isinstance(doc, dict) else None!r}",
        hint=f"{what.capitalize()} filters: " + ", ".join(names) + ".",
    )


def parse_value_filter(doc: Any, path: KeyPath, job: JobText) -> ValueFilter:
    """Validate one value filter (a list is a chain, as in Hydra)."""
    if isinstance(doc, list):
        doc = {"op": "chain", "filter": doc}
    op = doc.get("op") if isinstance(doc, dict) else None
    kind = VALUE_FILTERS.get(op) if isinstance(op, str) else None
    if kind is None:
        raise _unknown(doc, path, job, "value", list(VALUE_FILTERS))
    settings = Settings(doc, path, job, set(kind.keys) | {"once"})
    options = kind.read(settings)
    inner: tuple[ValueFilter, ...] = ()
    if op == "chain":
        inner = tuple(
            parse_value_filter(f, (*path, "filter", i), job) for i, f in enumerate(settings.items())
        )
    return ValueFilter(
        kind.name, tuple(sorted(options.items())), inner, settings.flag("once", False)
    )


def inner_value(settings: Settings, key: str = "filter") -> ValueFilter | None:
    """The value filter under ``key`` of a bundle filter, if it has one."""
    if key not in settings.doc:
        return None
    return parse_value_filter(settings.doc[key], (*settings.path, key), settings.job)


def parse_bundle_filter(doc: Any, path: KeyPath, job: JobText) -> BundleKind:
    """Validate one bundle filter (``field`` when there is no ``op``; a list is a chain)."""
    if isinstance(doc, list):
        doc = {"op": "chain", "filter": doc}
    if isinstance(doc, dict) and "op" not in doc and "from" in doc:
        doc = {"op": "field", **doc}
    op = doc.get("op") if isinstance(doc, dict) else None
    kind = BUNDLE_FILTERS.get(op) if isinstance(op, str) else None
    if kind is None:
        raise _unknown(doc, path, job, "bundle", list(BUNDLE_FILTERS))
    return kind.read(Settings(doc, path, job, set(kind.keys)))


def parse_fields(doc: Any, path: KeyPath, job: JobText) -> tuple[FieldMapping, ...]:
    """Validate ``map.fields``: names, or ``{from, to, filter}`` objects."""
    if not isinstance(doc, list):
        raise job.error(path, "'fields' must be a list")
    mappings = []
    for i, item in enumerate(doc):
        if isinstance(item, str) and item:
            mappings.append(FieldMapping(item, item))
            continue
        settings = Settings(item, (*path, i), job, {"from", "to", "filter"})
        source = settings.text("from")
        mappings.append(FieldMapping(source, settings.text("to", source), inner_value(settings)))
    return tuple(mappings)


@dataclass(frozen=True)
class SymbolicRecord:
    """A record as Spark Columns; ``arrays`` names the fields that hold arrays."""

    columns: dict[str, Column]
    arrays: frozenset[str] = field(default_factory=frozenset)

    def get(self, name: str) -> Column:
        """The Column of ``name`` (a null string if the record has no such field)."""
        from pyspark.sql import functions as F

        found = self.columns.get(name)
        return found if found is not None else F.lit(None).cast("string")

    def with_field(self, name: str, column: Column, is_array: bool) -> SymbolicRecord:
        """A copy with ``name`` set to ``column``."""
        arrays = self.arrays | {name} if is_array else self.arrays - {name}
        return replace(self, columns={**self.columns, name: column}, arrays=frozenset(arrays))


class FilterCompiler:
    """Compiles filters; ``rejects`` collects (condition, reason) for values they cannot take."""

    def __init__(self) -> None:
        self.rejects: list[tuple[Column, str]] = []
        # Reject tests of the scalar filter being compiled, as functions of its input:
        # resolved against a whole value, or (for arrays) against any element.
        self._reject_tests: list[tuple[Callable[[Column], Column], str]] = []

    def reject_when(self, test: Callable[[Column], Column], reason: str) -> None:
        """A filter's input for which ``test`` holds is rejected with ``reason``."""
        self._reject_tests.append((test, reason))

    def _resolve(self, column: Column, per_element: bool) -> None:
        from pyspark.sql import functions as F

        for test, reason in self._reject_tests:
            self.rejects.append((F.exists(column, test) if per_element else test(column), reason))
        self._reject_tests.clear()

    def value(self, spec: ValueFilter, column: Column, is_array: bool) -> tuple[Column, bool]:
        """Compile a value filter over ``column``: the new Column, and whether it is an array."""
        from pyspark.sql import functions as F

        if spec.op == "chain":
            for inner in spec.filters:
                result, result_array = self.value(inner, column, is_array)
                if spec.get("nullStop"):
                    result = F.when(column.isNotNull(), result)
                column, is_array = result, result_array
            return column, is_array
        kind = VALUE_FILTERS[spec.op]
        if kind.whole:
            return kind.spark_whole(spec, column, is_array)
        if spec.once or not is_array:
            if is_array:  # once: the filter takes the array as text
                column = F.array_join(column, ",")
            result = kind.spark(spec, self)(column)
            self._resolve(column, per_element=False)
            return result, kind.gives_array(spec)
        scalar = kind.spark(spec, self)
        mapped = F.transform(column, lambda x: scalar(x))
        if kind.gives_array(spec):
            mapped = F.flatten(F.filter(mapped, lambda x: x.isNotNull()))
        mapped = F.filter(mapped, lambda x: x.isNotNull())
        self._resolve(column, per_element=True)
        return F.when(F.size(mapped) > 0, mapped), True

    def assign(
        self, record: SymbolicRecord, target: str, value: Column, is_array: bool, null_fail: bool
    ) -> SymbolicRecord:
        """Set ``target``; with ``null_fail`` a null result leaves the field as it was."""
        from pyspark.sql import functions as F

        if null_fail and target in record.columns and (target in record.arrays) == is_array:
            value = F.coalesce(value, record.get(target))
        return record.with_field(target, value, is_array)

    def bundle(self, spec: BundleKind, record: SymbolicRecord) -> tuple[Column, SymbolicRecord]:
        """Compile a bundle filter: (passes, record after the filter's field updates)."""
        return spec.spark(self, record)

    def reject_reason(self) -> Column:
        """The first reason a record is rejected for, or null."""
        from pyspark.sql import functions as F

        if not self.rejects:
            return F.lit(None).cast("string")
        return F.coalesce(*[F.when(cond, F.lit(reason)) for cond, reason in self.rejects])
