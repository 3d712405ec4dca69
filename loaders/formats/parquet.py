"""Parquet files: the fields asked for, batch by batch; the row number stands for the line."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from loaders.formats.read_spec import ReadSpec, RecordOutput
from loaders.formats.values import as_field, decoded
from treestore.filesystems import input_file

__all__ = ["read_parquet"]


def read_parquet(spec: ReadSpec, path: str, out: RecordOutput) -> Iterator[pa.RecordBatch]:
    """The records of the Parquet file at ``path`` (its row numbers as lines)."""
    import pyarrow.parquet as pq

    with input_file(path) as source, pq.ParquetFile(source) as parquet:
        present = [name for name in spec.fields if name in parquet.schema_arrow.names]
        row = 1
        for batch in parquet.iter_batches(batch_size=65536, columns=present):
            size = batch.num_rows
            reasons: list[str | None] = [None] * size
            columns = {}
            for name in present:
                checked = _text_checked(batch.column(name), name, reasons)
                columns[name] = as_field(checked, name in spec.list_fields)
            lines = np.arange(row, row + size, dtype=np.int64)
            row += size
            rejects = (
                pa.array(reasons, pa.string())
                if any(reason is not None for reason in reasons)
                else pa.nulls(size, pa.string())
            )
            yield out.good(columns, lines, rejects)


def _text_checked(column: pa.Array, name: str, reasons: list[str | None]) -> pa.Array:
    """A string column as it is when it is UTF-8 (Parquet writers do not all check); else
    its bad cells null, each rejecting its row (``reasons``)."""
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return column
    try:
        column.validate(full=True)
    except pa.ArrowInvalid:
        return decoded(column.cast(pa.large_binary()), name, reasons)
    return column
