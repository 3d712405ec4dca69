"""Compiling job filters to Spark SQL expressions, so record work runs in Spark's engine.

A record is modelled as :class:`SymbolicRecord`: field name -> Column. A bundle
filter compiles to a non-null boolean Column plus the record with the fields
it set; a value filter to a Column of the filtered value. Values a filter
cannot take (``mod`` of a word) are collected by :class:`FilterCompiler` as
reject conditions: the load sets such records aside as rejected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from loaders.job.filter_model import (
    BundleFilter,
    ChainFilter,
    ConcatFilter,
    ConstFilter,
    ContainsFilter,
    EqualsFilter,
    FieldFilter,
    NotFilter,
    ValueFilter,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Column

__all__ = ["FilterCompiler", "SymbolicRecord", "java_regex_literal"]

_WHOLE_VALUE_OPS = ("split", "slice", "join", "chain")


def java_regex_literal(text: str) -> str:
    """A Java regex matching ``text`` literally (non-alphanumerics backslash-escaped).

    >>> java_regex_literal("a.b|c")
    'a\\\\.b\\\\|c'
    """
    return "".join(c if c.isalnum() else "\\" + c for c in text)


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


def _java_hash_code(x: Column) -> Column:
    """Java's ``String.hashCode`` (UTF-16 units; exact for text in the Basic Multilingual Plane)."""
    from pyspark.sql import functions as F

    folded = F.aggregate(
        F.split(x, "", -1),
        F.lit(0).cast("long"),
        lambda acc, ch: (acc * 31 + F.ascii(ch)) % F.lit(1 << 32),
    )
    return F.when(folded >= 1 << 31, folded - (1 << 32)).otherwise(folded)


def _slice_bounds(size: Column, start: int, stop: int) -> tuple[Column, Column]:
    """1-based start and length of ``[start:stop]`` (Python rules; ``stop`` -1 = the end)."""
    from pyspark.sql import functions as F

    low = F.lit(start) if start >= 0 else F.greatest(size + start, F.lit(0))
    high = size if stop == -1 else (F.least(F.lit(stop), size) if stop >= 0 else size + stop)
    return F.least(low, size) + 1, F.greatest(high - low, F.lit(0))


class FilterCompiler:
    """Compiles filters; ``rejects`` collects (condition, reason) for values they cannot take."""

    def __init__(self) -> None:
        self.rejects: list[tuple[Column, str]] = []
        # Reject tests of the scalar filter being compiled, as functions of its input:
        # resolved against a whole value, or (for arrays) against any element.
        self._pending: list[tuple[Callable[[Column], Column], str]] = []

    def _resolve(self, column: Column, per_element: bool) -> None:
        from pyspark.sql import functions as F

        for test, reason in self._pending:
            self.rejects.append((F.exists(column, test) if per_element else test(column), reason))
        self._pending.clear()

    # -- value filters -----------------------------------------------------

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
        if spec.op in _WHOLE_VALUE_OPS or spec.once or not is_array:
            return self._whole(spec, column, is_array)
        scalar = self._scalar(spec)
        mapped = F.transform(column, lambda x: scalar(x))
        if spec.op == "regex" and spec.get("replace") is None:
            mapped = F.flatten(F.filter(mapped, lambda x: x.isNotNull()))
        mapped = F.filter(mapped, lambda x: x.isNotNull())
        self._resolve(column, per_element=True)
        return F.when(F.size(mapped) > 0, mapped), True

    def _whole(self, spec: ValueFilter, column: Column, is_array: bool) -> tuple[Column, bool]:
        from pyspark.sql import functions as F

        if spec.op == "split":
            width = spec.get("fixedLength")
            if width > 0:
                pattern = F.lit(f"(?s).{{1,{width}}}")

                def split(x: Column) -> Column:
                    return F.regexp_extract_all(x, pattern, 0)
            else:
                separator = java_regex_literal(spec.get("split"))

                def split(x: Column) -> Column:
                    return F.split(x, separator, -1)

            if is_array:
                return F.flatten(F.transform(column, split)), True
            return F.when(column != "", split(column)), True
        if spec.op == "slice":
            size = F.size(column) if is_array else F.length(column)
            start, length = _slice_bounds(size, spec.get("from"), spec.get("to"))
            if is_array:
                return F.slice(column, start, length), True
            return column.substr(start, length), False
        if spec.op == "join":
            return (F.array_join(column, spec.get("join")) if is_array else column), False
        if is_array:  # once: the filter takes the array as text
            column = F.array_join(column, ",")
        result = self._scalar(spec)(column)
        self._resolve(column, per_element=False)
        return result, spec.op == "regex" and spec.get("replace") is None

    def _scalar(self, spec: ValueFilter) -> Callable[[Column], Column]:
        """The filter applied to one text value (null in, null out unless the filter says so)."""
        from pyspark.sql import functions as F

        op = spec.op
        if op == "empty":
            return (
                (lambda x: F.when(x != "", x))
                if spec.get("not")
                else (lambda x: F.when(x == "", x))
            )
        if op == "case":

            def case(x: Column) -> Column:
                if spec.get("lower"):
                    x = F.lower(x)
                return F.upper(x) if spec.get("upper") else x

            return case
        if op == "default":
            return lambda x: F.when(x.isNull() | (x == ""), F.lit(spec.get("value"))).otherwise(x)
        if op == "hash":
            kind = spec.get("type")

            def hashed(x: Column) -> Column:
                if kind == 4:
                    return F.sha1(x)
                number = (
                    _java_hash_code(x)
                    if kind == 0
                    else F.conv(F.substring(F.sha1(x), 1, 16), 16, -10).cast("long")
                )
                return (F.abs(number) if spec.get("abs") else number).cast("string")

            return hashed
        if op == "mod":
            divisor = spec.get("mod")

            def not_whole(x: Column) -> Column:
                return x.isNotNull() & x.try_cast("long").isNull()

            def mod(x: Column) -> Column:
                number = x.try_cast("long")
                self._pending.append((not_whole, "mod: a value is not a whole number"))
                return ((F.abs(number) if spec.get("abs") else number) % divisor).cast("string")

            return mod
        if op == "pad":
            left, right = spec.get("left"), spec.get("right")

            def pad(x: Column) -> Column:
                x = F.coalesce(x, F.lit(""))
                if left:
                    x = F.when(
                        F.length(x) < len(left),
                        F.concat(F.lit(left).substr(F.length(x) + 1, F.lit(len(left))), x),
                    ).otherwise(x)
                if right:
                    x = F.when(
                        F.length(x) < len(right),
                        F.concat(x, F.lit(right).substr(F.length(x) + 1, F.lit(len(right)))),
                    ).otherwise(x)
                return x

            return pad
        if op == "regex":
            pattern, replacement = spec.get("pattern"), spec.get("replace")
            if replacement is not None:
                return lambda x: F.regexp_replace(x, pattern, replacement)
            groups = re.compile(pattern).groups

            def regex(x: Column) -> Column:
                if groups == 0:
                    return F.when(x.isNotNull(), F.array().cast("array<string>"))
                found = [F.regexp_extract_all(x, F.lit(pattern), g) for g in range(1, groups + 1)]
                if groups == 1:
                    return found[0]
                indexes = F.sequence(F.lit(0), F.greatest(F.size(found[0]) - 1, F.lit(0)))
                picked = F.flatten(
                    F.transform(indexes, lambda i: F.array(*[F.get(g, i) for g in found]))
                )
                return F.when(F.size(found[0]) > 0, picked).otherwise(found[0])

            return regex
        if op == "replace":
            find, replacement = spec.get("find"), spec.get("replace")
            if spec.get("regex"):
                return lambda x: F.regexp_replace(x, find, replacement)
            return lambda x: F.replace(x, F.lit(find), F.lit(replacement))
        assert op in ("require", "exclude"), op

        def match(x: Column) -> Column:
            probe = F.lower(x) if spec.get("toLower") else x
            tests = [probe.isin(list(spec.get("value")))] if spec.get("value") else []
            tests += [probe.contains(part) for part in spec.get("contains")]
            tests += [probe.rlike(f"^(?:{p})$") for p in spec.get("match")]
            tests += [probe.rlike(p) for p in spec.get("find")]
            passes = tests[0]
            for test in tests[1:]:
                passes = passes | test
            passes = F.coalesce(passes, F.lit(False))
            return F.when(passes if op == "require" else ~passes, x)

        return match

    # -- bundle filters ----------------------------------------------------

    def _assign(
        self, record: SymbolicRecord, target: str, value: Column, is_array: bool, null_fail: bool
    ) -> SymbolicRecord:
        """Set ``target``; with ``null_fail`` a null result leaves the field as it was."""
        from pyspark.sql import functions as F

        if null_fail and target in record.columns and (target in record.arrays) == is_array:
            value = F.coalesce(value, record.get(target))
        return record.with_field(target, value, is_array)

    def bundle(self, spec: BundleFilter, record: SymbolicRecord) -> tuple[Column, SymbolicRecord]:
        """Compile a bundle filter: (passes, record after the filter's field updates)."""
        from pyspark.sql import functions as F

        if isinstance(spec, FieldFilter | ConstFilter):
            if isinstance(spec, FieldFilter):
                value, is_array = record.get(spec.source), spec.source in record.arrays
                negate = spec.negate
            else:
                value, is_array, negate = F.lit(spec.value), False, False
            if spec.filter is not None:
                value, is_array = self.value(spec.filter, value, is_array)
            passes = (
                F.when(value.isNull(), F.lit(negate)).otherwise(F.lit(not negate))
                if spec.null_fail
                else F.lit(not negate)
            )
            return passes, self._assign(record, spec.target, value, is_array, spec.null_fail)
        if isinstance(spec, ChainFilter):
            every = F.lit(True)
            for inner in spec.filters:
                inner_passes, record = self.bundle(inner, record)
                every = every & inner_passes
            if not spec.fail_stop:
                return F.lit(True), record
            return F.when(every, F.lit(True)).otherwise(F.lit(spec.fail_return)), record
        if isinstance(spec, NotFilter):
            if spec.field is not None:
                return record.get(spec.field).isNull(), record
            assert spec.filter is not None
            inner_passes, _ = self.bundle(spec.filter, record)
            return ~F.coalesce(inner_passes, F.lit(False)), record
        if isinstance(spec, EqualsFilter):
            left, right = record.get(spec.left), record.get(spec.right)
            if (spec.left in record.arrays) != (spec.right in record.arrays):
                left, right = left.cast("string"), right.cast("string")
            same = left.eqNullSafe(right)
            return (~same if spec.negate else same), record
        if isinstance(spec, ContainsFilter):
            needle = [F.lit(v) for v in spec.values]
            if spec.source is not None:
                needle.append(record.get(spec.source))

            def contains(x: Column) -> Column:
                found = x.contains(needle[0])
                for other in needle[1:]:
                    found = found | x.contains(other)
                return found

            haystack = record.get(spec.field)
            found = (
                F.exists(haystack, contains) if spec.field in record.arrays else contains(haystack)
            )
            found = F.coalesce(found, F.lit(False))
            return (~found if spec.negate else found), record
        assert isinstance(spec, ConcatFilter)
        parts = [
            F.coalesce(
                F.array_join(record.get(name), spec.join)
                if name in record.arrays
                else record.get(name),
                F.lit(""),
            )
            for name in spec.inputs
        ]
        return F.lit(True), record.with_field(spec.target, F.concat(*parts), False)

    def reject_reason(self) -> Column:
        """The first reason a record is rejected for, or null."""
        from pyspark.sql import functions as F

        if not self.rejects:
            return F.lit(None).cast("string")
        return F.coalesce(*[F.when(cond, F.lit(reason)) for cond, reason in self.rejects])
