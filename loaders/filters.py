"""Compiling job filters to Spark SQL expressions, so record work runs in Spark's engine.

A record is modelled as :class:`SymbolicRecord`: field name -> Column. A bundle
filter compiles to a non-null boolean Column plus the record with the fields
it set; a value filter to a Column of the filtered value.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from loaders.filters_model import (
    BundleFilter,
    ChainFilter,
    EmptyValue,
    FieldFilter,
    NotFilter,
    SplitValue,
    ValueChain,
    ValueFilter,
)

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["SymbolicRecord", "compile_bundle_filter", "compile_value_filter", "java_regex_literal"]


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


def _per_element(column: Column, keep: Column) -> Column:
    from pyspark.sql import functions as F

    return F.filter(F.transform(column, lambda x: F.when(keep(x), x)), lambda x: x.isNotNull())  # type: ignore[operator]


def compile_value_filter(spec: ValueFilter, column: Column, is_array: bool) -> tuple[Column, bool]:
    """Compile a value filter over ``column``; returns the new Column and whether it is an array."""
    from pyspark.sql import functions as F

    if isinstance(spec, SplitValue):
        pattern = java_regex_literal(spec.separator)
        if is_array:
            return F.flatten(F.transform(column, lambda x: F.split(x, pattern, -1))), True
        return F.split(column, pattern, -1), True
    if isinstance(spec, EmptyValue):

        def keep(x: Column) -> Column:
            return (x != "") if spec.negate else (x == "")

        if is_array:
            return _per_element(column, keep), True  # type: ignore[arg-type]
        return F.when(keep(column), column), False
    assert isinstance(spec, ValueChain)
    for inner in spec.filters:
        column, is_array = compile_value_filter(inner, column, is_array)
    return column, is_array


def compile_bundle_filter(
    spec: BundleFilter, record: SymbolicRecord
) -> tuple[Column, SymbolicRecord]:
    """Compile a bundle filter: (passes, record after the filter's field updates)."""
    from pyspark.sql import functions as F

    if isinstance(spec, FieldFilter):
        value, is_array = record.get(spec.source), spec.source in record.arrays
        if spec.filter is not None:
            value, is_array = compile_value_filter(spec.filter, value, is_array)
        passes = value.isNotNull() if spec.null_fail else F.lit(True)
        return passes, record.with_field(spec.target, value, is_array)
    if isinstance(spec, ChainFilter):
        passes = F.lit(True)
        for inner in spec.filters:
            inner_passes, record = compile_bundle_filter(inner, record)
            passes = passes & inner_passes
        return F.coalesce(passes, F.lit(False)), record
    assert isinstance(spec, NotFilter)
    inner_passes, _ = compile_bundle_filter(spec.filter, record)
    return ~F.coalesce(inner_passes, F.lit(False)), record
