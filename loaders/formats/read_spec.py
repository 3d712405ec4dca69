"""What a reader is asked for (:class:`ReadSpec`) and the batches it gives (:class:`RecordOutput`).

Each output row carries ``__file`` (the file's number in the load; its path travels
once, not per row), ``__line`` (the physical line, or the row number in a Parquet
file) and ``__reject``: null for a good record, else why the record was set aside
(then ``__text`` holds the raw line).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

__all__ = ["FILE_COLUMN", "LINE", "REJECT", "TEXT", "ReadSpec", "RecordOutput", "UnreadableInput"]

FILE_COLUMN, LINE, REJECT, TEXT = "__file", "__line", "__reject", "__text"
"""Columns of every read row: file number, line number, why rejected, rejected line's text."""


class UnreadableInput(ValueError):
    """A file a reader cannot read at all (a header that is not text, a parse error), with
    where (``line 1``, ``byte 1234``) in its message; the caller names the file."""


@dataclass(frozen=True)
class ReadSpec:
    """How to read one source's files: format, header/columns and the fields to keep."""

    format: str
    header: bool
    columns: tuple[str, ...]
    fields: tuple[str, ...]
    list_fields: frozenset[str] = frozenset()

    def schema(self) -> pa.Schema:
        """The Arrow schema of the rows the readers yield."""
        types = [
            pa.list_(pa.string()) if name in self.list_fields else pa.string()
            for name in self.fields
        ]
        return pa.schema(
            [
                *(pa.field(n, t) for n, t in zip(self.fields, types, strict=True)),
                pa.field(FILE_COLUMN, pa.int32()),
                pa.field(LINE, pa.int64()),
                pa.field(REJECT, pa.string()),
                pa.field(TEXT, pa.string()),
            ]
        )

    def spark_schema(self) -> str:
        """The same schema as a Spark DDL string."""
        parts = [
            f"`{n}` {'array<string>' if n in self.list_fields else 'string'}" for n in self.fields
        ]
        parts += [f"{FILE_COLUMN} int", f"{LINE} long", f"{REJECT} string", f"{TEXT} string"]
        return ", ".join(parts)


class RecordOutput:
    """Builds the output batches of one file, and remembers the last line it gave (so a
    failure further on can say where the reader was)."""

    def __init__(self, spec: ReadSpec, number: int) -> None:
        self.spec, self.number = spec, number
        self.schema = spec.schema()
        self.last_line = 0

    def good(
        self, columns: dict[str, pa.Array], lines: np.ndarray, rejects: pa.Array
    ) -> pa.RecordBatch:
        """Records read: their fields (a missing one is null), lines and reject reasons."""
        size = len(lines)
        arrays = []
        for name, field_type in zip(self.spec.fields, self.schema, strict=False):
            found = columns.get(name)
            arrays.append(found if found is not None else pa.nulls(size, field_type.type))
        arrays += [
            pa.array(np.full(size, self.number, dtype=np.int32)),
            pa.array(lines, pa.int64()),
            rejects,
            pa.nulls(size, pa.string()),
        ]
        if size:
            self.last_line = max(self.last_line, int(lines[-1]))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def bad(self, rows: list[tuple[int, str, str]]) -> pa.RecordBatch:
        """Rows set aside while parsing: (line, reason, raw text)."""
        size = len(rows)
        arrays = [pa.nulls(size, f.type) for f in list(self.schema)[: len(self.spec.fields)]]
        if size:
            self.last_line = max(self.last_line, max(r[0] for r in rows))
        arrays += [
            pa.array(np.full(size, self.number, dtype=np.int32)),
            pa.array([r[0] for r in rows], pa.int64()),
            pa.array([r[1] for r in rows], pa.string()),
            pa.array([r[2] for r in rows], pa.string()),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
