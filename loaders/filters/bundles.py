"""Bundle filters: whether a record passes, and the fields it sets on the way.

``field``, ``chain``, ``not``, ``equals``, ``contains``, ``value`` and ``concat``:
each a frozen dataclass (its settings) with ``read`` (from the job file), ``fields``
(the record fields it touches) and ``spark`` (its compiled form).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from loaders.filters.arrow_compiler import ArrowCompiler, ArrowRecord
from loaders.filters.kinds import (
    BundleKind,
    FilterCompiler,
    Settings,
    SymbolicRecord,
    ValueFilter,
    bundle_filter,
    inner_value,
    parse_bundle_filter,
)

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "ChainFilter",
    "ConcatFilter",
    "ConstFilter",
    "ContainsFilter",
    "EqualsFilter",
    "FieldFilter",
    "NotFilter",
]


def _passes(value: Column, null_fail: bool, negate: bool) -> Column:
    from pyspark.sql import functions as F

    if not null_fail:
        return F.lit(not negate)
    return F.when(value.isNull(), F.lit(negate)).otherwise(F.lit(not negate))


@bundle_filter
@dataclass(frozen=True)
class FieldFilter(BundleKind):
    """``field``: filter the value of ``source`` into ``target``."""

    name = "field"
    keys = frozenset({"from", "to", "filter", "nullFail", "not"})

    source: str
    target: str
    filter: ValueFilter | None = None
    null_fail: bool = True
    negate: bool = False

    @classmethod
    def read(cls, settings: Settings) -> FieldFilter:
        source = settings.text("from")
        return cls(
            source,
            settings.text("to", source),
            inner_value(settings),
            settings.flag("nullFail", True),
            settings.flag("not", False),
        )

    def fields(self) -> set[str]:
        return {self.source, self.target}

    def spark(
        self, compiler: FilterCompiler, record: SymbolicRecord
    ) -> tuple[Column, SymbolicRecord]:
        value, is_array = record.get(self.source), self.source in record.arrays
        if self.filter is not None:
            value, is_array = compiler.value(self.filter, value, is_array)
        passes = _passes(value, self.null_fail, self.negate)
        return passes, compiler.assign(record, self.target, value, is_array, self.null_fail)

    def arrow(self, compiler: ArrowCompiler, record: ArrowRecord) -> tuple[np.ndarray, ArrowRecord]:
        value, is_array = record.get(self.source), self.source in record.arrays
        if self.filter is not None:
            value, is_array = compiler.value(self.filter, value, is_array)
        if self.null_fail:
            passes = value.is_valid().to_numpy(zero_copy_only=False) != self.negate
        else:
            passes = np.full(record.size, not self.negate)
        return passes, compiler.assign(record, self.target, value, is_array, self.null_fail)


@bundle_filter
@dataclass(frozen=True)
class ChainFilter(BundleKind):
    """``chain``: filters in order; with ``fail_stop`` the first failure returns ``fail_return``."""

    name = "chain"
    keys = frozenset({"filter", "failStop", "failReturn"})

    filters: tuple[BundleKind, ...]
    fail_stop: bool = True
    fail_return: bool = False

    @classmethod
    def read(cls, settings: Settings) -> ChainFilter:
        return cls(
            tuple(
                parse_bundle_filter(f, (*settings.path, "filter", i), settings.job)
                for i, f in enumerate(settings.items())
            ),
            settings.flag("failStop", True),
            settings.flag("failReturn", False),
        )

    def fields(self) -> set[str]:
        return set().union(*(f.fields() for f in self.filters))

    def spark(
        self, compiler: FilterCompiler, record: SymbolicRecord
    ) -> tuple[Column, SymbolicRecord]:
        from pyspark.sql import functions as F

        every = F.lit(True)
        for inner in self.filters:
            inner_passes, record = inner.spark(compiler, record)
            every = every & inner_passes
        if not self.fail_stop:
            return F.lit(True), record
        return F.when(every, F.lit(True)).otherwise(F.lit(self.fail_return)), record

    def arrow(self, compiler: ArrowCompiler, record: ArrowRecord) -> tuple[np.ndarray, ArrowRecord]:
        every = np.ones(record.size, bool)
        for inner in self.filters:
            inner_passes, record = inner.arrow(compiler, record)
            every &= inner_passes
        if not self.fail_stop:
            return np.ones(record.size, bool), record
        return every | self.fail_return, record


@bundle_filter
@dataclass(frozen=True)
class NotFilter(BundleKind):
    """``not``: with ``field``, passes when the field is null; with ``filter``, negates it."""

    name = "not"
    keys = frozenset({"field", "filter"})

    field: str | None = None
    filter: BundleKind | None = None

    @classmethod
    def read(cls, settings: Settings) -> NotFilter:
        doc = settings.doc
        if ("field" in doc) == ("filter" in doc):
            raise settings.error(
                None, "'not' needs either a 'field' (passes when it is null) or a 'filter'"
            )
        if "field" in doc:
            return cls(field=settings.text("field"))
        path = (*settings.path, "filter")
        return cls(filter=parse_bundle_filter(doc["filter"], path, settings.job))

    def fields(self) -> set[str]:
        if self.field:
            return {self.field}
        return self.filter.fields() if self.filter is not None else set()

    def spark(
        self, compiler: FilterCompiler, record: SymbolicRecord
    ) -> tuple[Column, SymbolicRecord]:
        from pyspark.sql import functions as F

        if self.field is not None:
            return record.get(self.field).isNull(), record
        assert self.filter is not None
        inner_passes, _ = self.filter.spark(compiler, record)
        return ~F.coalesce(inner_passes, F.lit(False)), record


@bundle_filter
@dataclass(frozen=True)
class EqualsFilter(BundleKind):
    """``equals``: the fields ``left`` and ``right`` hold equal values (both null counts)."""

    name = "equals"
    keys = frozenset({"left", "right", "not"})

    left: str
    right: str
    negate: bool = False

    @classmethod
    def read(cls, settings: Settings) -> EqualsFilter:
        return cls(settings.text("left"), settings.text("right"), settings.flag("not", False))

    def fields(self) -> set[str]:
        return {self.left, self.right}

    def spark(
        self, compiler: FilterCompiler, record: SymbolicRecord
    ) -> tuple[Column, SymbolicRecord]:
        left, right = record.get(self.left), record.get(self.right)
        if (self.left in record.arrays) != (self.right in record.arrays):
            left, right = left.cast("string"), right.cast("string")
        same = left.eqNullSafe(right)
        return (~same if self.negate else same), record


@bundle_filter
@dataclass(frozen=True)
class ContainsFilter(BundleKind):
    """``contains``: ``field`` contains one of ``values``, or the value of field ``source``."""

    name = "contains"
    keys = frozenset({"field", "value", "from", "not"})

    field: str
    values: tuple[str, ...] = ()
    source: str | None = None
    negate: bool = False

    @classmethod
    def read(cls, settings: Settings) -> ContainsFilter:
        needles, other = settings.texts("value"), settings.optional_text("from")
        if not needles and other is None:
            raise settings.error(None, "'contains' needs a 'value' list or a 'from' field")
        return cls(settings.text("field"), needles, other, settings.flag("not", False))

    def fields(self) -> set[str]:
        return {self.field} | ({self.source} if self.source else set())

    def spark(
        self, compiler: FilterCompiler, record: SymbolicRecord
    ) -> tuple[Column, SymbolicRecord]:
        from pyspark.sql import functions as F

        needle = [F.lit(v) for v in self.values]
        if self.source is not None:
            needle.append(record.get(self.source))

        def contains(x: Column) -> Column:
            found = x.contains(needle[0])
            for other in needle[1:]:
                found = found | x.contains(other)
            return found

        haystack = record.get(self.field)
        found = F.exists(haystack, contains) if self.field in record.arrays else contains(haystack)
        found = F.coalesce(found, F.lit(False))
        return (~found if self.negate else found), record


@bundle_filter
@dataclass(frozen=True)
class ConstFilter(BundleKind):
    """``value``: set ``target`` to the constant ``value`` (through ``filter``)."""

    name = "value"
    keys = frozenset({"value", "to", "filter", "nullFail"})

    value: str
    target: str
    filter: ValueFilter | None = None
    null_fail: bool = True

    @classmethod
    def read(cls, settings: Settings) -> ConstFilter:
        return cls(
            settings.text("value", empty_ok=True),
            settings.text("to"),
            inner_value(settings),
            settings.flag("nullFail", True),
        )

    def fields(self) -> set[str]:
        return {self.target}

    def spark(
        self, compiler: FilterCompiler, record: SymbolicRecord
    ) -> tuple[Column, SymbolicRecord]:
        from pyspark.sql import functions as F

        value, is_array = F.lit(self.value), False
        if self.filter is not None:
            value, is_array = compiler.value(self.filter, value, is_array)
        passes = _passes(value, self.null_fail, False)
        return passes, compiler.assign(record, self.target, value, is_array, self.null_fail)


@bundle_filter
@dataclass(frozen=True)
class ConcatFilter(BundleKind):
    """``concat``: join the fields ``inputs`` (array elements too) with ``join`` into ``target``."""

    name = "concat"
    keys = frozenset({"in", "out", "join"})

    inputs: tuple[str, ...]
    target: str
    join: str = ""

    @classmethod
    def read(cls, settings: Settings) -> ConcatFilter:
        inputs = settings.texts("in")
        if not inputs:
            raise settings.error("in", "'concat' needs an 'in' list of fields")
        return cls(inputs, settings.text("out"), settings.text("join", "", empty_ok=True))

    def fields(self) -> set[str]:
        return {*self.inputs, self.target}

    def spark(
        self, compiler: FilterCompiler, record: SymbolicRecord
    ) -> tuple[Column, SymbolicRecord]:
        from pyspark.sql import functions as F

        parts = [
            F.coalesce(
                F.array_join(record.get(name), self.join)
                if name in record.arrays
                else record.get(name),
                F.lit(""),
            )
            for name in self.inputs
        ]
        return F.lit(True), record.with_field(self.target, F.concat(*parts), False)
