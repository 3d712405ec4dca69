"""The map's filters over Arrow arrays: the load's Arrow path (:mod:`loaders.route.arrow_map`).

:class:`ArrowCompiler` mirrors :class:`~loaders.filters.kinds.FilterCompiler`: it runs a
filter over a batch of records held as Arrow arrays (:class:`ArrowRecord`) and gives,
value for value, what the filter's Spark form gives (the filter cases of the tests run
through both). A kind has an Arrow form when it defines ``arrow`` (value filters: over
one text array; ``arrow_whole`` for kinds that take an array whole) or, for bundle
filters, ``arrow``; a kind without one raises :class:`NoArrowForm`, and a job using it
maps its records in Spark. Whether a job's filters all have Arrow forms is found by
running them over an empty batch on the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from loaders.filters.kinds import VALUE_FILTERS, NoArrowForm, ValueFilter

if TYPE_CHECKING:
    from loaders.filters.kinds import BundleKind

__all__ = ["ArrowCompiler", "ArrowRecord", "NoArrowForm", "joined", "lists_of", "split_lists"]

TEXT = pa.string()
TEXTS = pa.list_(pa.string())


@dataclass(frozen=True)
class ArrowRecord:
    """A batch of records as Arrow arrays of ``size`` rows; ``arrays`` names the fields
    that hold lists (of text), as :class:`~loaders.filters.kinds.SymbolicRecord` does."""

    columns: dict[str, pa.Array]
    size: int
    arrays: frozenset[str] = field(default_factory=frozenset)

    def get(self, name: str) -> pa.Array:
        """The array of ``name`` (nulls of text if the record has no such field)."""
        found = self.columns.get(name)
        return found if found is not None else pa.nulls(self.size, TEXT)

    def with_field(self, name: str, array: pa.Array, is_array: bool) -> ArrowRecord:
        """A copy with ``name`` set to ``array``."""
        arrays = self.arrays | {name} if is_array else self.arrays - {name}
        return replace(self, columns={**self.columns, name: array}, arrays=frozenset(arrays))


def lists_of(
    values: pa.Array, parents: np.ndarray, size: int, null_where: np.ndarray | None = None
) -> pa.Array:
    """Lists of ``size`` rows from ``values`` and each value's row (``parents``, ascending):
    null where ``null_where`` is true (default: where a row has no value)."""
    counts = np.bincount(parents, minlength=size) if len(parents) else np.zeros(size, np.int64)
    offsets = np.zeros(size + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    mask = counts == 0 if null_where is None else null_where
    return pa.ListArray.from_arrays(
        pa.array(offsets), values.cast(TEXT), mask=pa.array(mask, pa.bool_())
    )


def joined(lists: pa.Array, separator: str) -> pa.Array:
    """Each list's texts joined by ``separator``, its nulls skipped (Spark's ``array_join``):
    null for a null list, empty text for a list of none."""
    values = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy()
    kept = values.is_valid().to_numpy(zero_copy_only=False)
    dense = lists_of(values.filter(pa.array(kept)), parents[kept], len(lists), ~_valid(lists))
    return pc.binary_join(dense, separator)


def split_lists(
    texts: pa.Array, separator: str, parents: np.ndarray, size: int, null_where: np.ndarray
) -> pa.Array:
    """The texts split at ``separator`` (every piece kept, empty ones too), the pieces of each
    text joined into the list of its row (``parents``: each text's row, ascending), null
    where ``null_where`` is true."""
    pieces = pc.split_pattern(texts, separator)
    lengths = pc.fill_null(pc.list_value_length(pieces), 0).to_numpy(zero_copy_only=False)
    rows = np.repeat(parents, lengths)
    flat = pc.list_flatten(pieces)
    kept = ~null_where[rows]
    return lists_of(flat.filter(pa.array(kept)), rows[kept], size, null_where)


def _valid(array: pa.Array) -> np.ndarray:
    return array.is_valid().to_numpy(zero_copy_only=False)


class ArrowCompiler:
    """Runs filters over :class:`ArrowRecord` batches (see the module's docstring)."""

    def value(self, spec: ValueFilter, column: pa.Array, is_array: bool) -> tuple[pa.Array, bool]:
        """A value filter over ``column``: the new array, and whether it holds lists."""
        if spec.op == "chain":
            for inner in spec.filters:
                result, result_array = self.value(inner, column, is_array)
                if spec.get("nullStop"):
                    result = pc.if_else(
                        column.is_valid(), result, pa.nulls(len(result), result.type)
                    )
                column, is_array = result, result_array
            return column, is_array
        kind = VALUE_FILTERS[spec.op]
        if kind.whole:
            return kind.arrow_whole(spec, column, is_array)
        scalar = kind.arrow(spec)
        if spec.once or not is_array:
            if is_array:  # once: the filter takes the list as text (Spark's array_join)
                column = joined(column, ",")
            return scalar(column), kind.gives_array(spec)
        if kind.gives_array(spec):
            raise NoArrowForm(spec.op)
        values = pc.list_flatten(column)
        parents = pc.list_parent_indices(column).to_numpy()
        mapped = scalar(values)
        kept = mapped.is_valid().to_numpy(zero_copy_only=False)
        return lists_of(mapped.filter(pa.array(kept)), parents[kept], len(column)), True

    def bundle(self, spec: BundleKind, record: ArrowRecord) -> tuple[np.ndarray, ArrowRecord]:
        """A bundle filter: (whether each record passes, as numpy booleans; the record after
        the filter's field updates)."""
        return spec.arrow(self, record)

    def assign(
        self, record: ArrowRecord, target: str, value: pa.Array, is_array: bool, null_fail: bool
    ) -> ArrowRecord:
        """Set ``target``; with ``null_fail`` a null result leaves the field as it was."""
        if null_fail and target in record.columns and (target in record.arrays) == is_array:
            value = pc.coalesce(value, record.get(target))
        return record.with_field(target, value, is_array)
