"""A query's result: rows as Python tuples, or Arrow batches as they arrive.

Rows reach the driver in *pieces*: an Arrow record batch (typed columns, from
a scan that ran on columns) or a list of row tuples. Iterating gives tuples;
:meth:`Rows.batches` gives Arrow batches without making a Python object per
value where the shards sent Arrow, which is the fast way to consume a big scan.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias

import pyarrow as pa

from query.driver.parquet_out import ROWS_PER_PART, ParquetWritten, parquet_target, write_parquet
from query.driver.plan import QueryPlan
from query.ops import Value
from query.ops.columns import (
    ARROW_TYPES,
    Chunk,
    ColumnType,
    plain_columns,
    result_arrow_type,
    rows_of,
    run_on_columns,
)
from query.ops.compiler import OpsPipeline
from treestore.errors import OpError, StoreError

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Piece", "Rows"]

Piece: TypeAlias = "pa.RecordBatch | list[tuple[Value, ...]]"
"""What the driver receives at a time: typed columns, or rows."""
ARROW_BATCH_ROWS = 65536
"""Rows the driver turns into one Arrow batch when the rows came as tuples (row ops,
driver ops): bigger than a shard's pieces, fewer batches for a reader of Arrow."""


def _piece_rows(piece: Piece) -> Iterator[tuple[Value, ...]]:
    if isinstance(piece, pa.RecordBatch):
        return zip(*(c.to_pylist() for c in plain_columns(piece.columns)), strict=True)
    return iter(piece)


def _plain_batch(columns: list[pa.Array]) -> pa.RecordBatch:
    """Columns (coded or not, see :mod:`query.ops.columns`) as a batch of plain ones."""
    names = [f"c{i}" for i in range(len(columns))]
    return pa.RecordBatch.from_arrays(plain_columns(columns), names)


def _rows_of(pieces: Iterator[Piece]) -> Iterator[tuple[Value, ...]]:
    """The pieces' rows (no Python frame per row: a loop over rows runs in C)."""
    return itertools.chain.from_iterable(map(_piece_rows, pieces))


def _column_of(values: Sequence[Value]) -> pa.Array:
    """Python values as one typed column: int64 when all are whole numbers, float64 when
    all are numbers, else text."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pa.array(values, pa.int64())
    if present and all(isinstance(v, int | float) for v in present):
        return pa.array(values, pa.float64())
    return pa.array([None if v is None else str(v) for v in values], pa.string())


def _batch_of(rows: Sequence[tuple[Value, ...]]) -> pa.RecordBatch:
    width = max((len(r) for r in rows), default=0)
    columns = [_column_of([r[i] if i < len(r) else None for r in rows]) for i in range(width)]
    return pa.RecordBatch.from_arrays(columns, [f"c{i}" for i in range(width)])


def _chunk_of(piece: Piece, types: list[ColumnType]) -> Chunk:
    """A piece as a column chunk typed ``types``: rows from a driver-side walk are typed
    as the columns the shards would have sent (a text column's values as text; a value
    a whole-number column cannot hold refuses the query, as it would be a bug)."""
    if isinstance(piece, pa.RecordBatch):
        return piece.num_rows, list(piece.columns)
    columns = []
    for i, kind in enumerate(types):
        values = [row[i] if i < len(row) else None for row in piece]
        if kind == "str":
            values = [None if v is None else str(v) for v in values]
        try:
            columns.append(pa.array(values, ARROW_TYPES[kind]))
        except (pa.ArrowException, TypeError, OverflowError) as exc:
            raise OpError(
                f"column {i} is typed {kind} but holds a value that is not ({exc})"
            ) from exc
    return len(piece), columns


def _unified(parts: list[pa.Array]) -> pa.ChunkedArray:
    """One column from the batches' pieces of it, typed as :func:`_column_of` would."""
    types = {part.type for part in parts if part.null_count < len(part)}
    if types and types <= {pa.int64()}:
        target = pa.int64()
    elif types and types <= {pa.int64(), pa.float64()}:
        target = pa.float64()
    elif types <= {pa.string()}:
        target = pa.string()
    else:
        return pa.chunked_array([_column_of(part.to_pylist()) for part in parts], pa.string())
    return pa.chunked_array([part.cast(target) for part in parts], target)


class Rows:
    """The lazy result of a query: iterate it for tuples, or convert it whole.

    Nothing runs until the rows are first asked for; rows then arrive as the
    shards' tasks send them. A ``Rows`` can be read once, as tuples or as
    batches. :meth:`close` (or leaving a ``with`` block, or dropping it)
    before the end cancels the Spark job still running.
    """

    def __init__(
        self,
        produce: Callable[[], Iterator[Piece]],
        plan: QueryPlan,
        to_frame: Callable[[SparkSession, QueryPlan], DataFrame] | None = None,
    ) -> None:
        self._produce = produce
        self._to_frame = to_frame
        self.plan = plan
        """The query's plan (see :mod:`query.driver.plan`); ``print(rows.plan)`` says it."""
        self._driver = plan.ops.pipeline
        self._source: Iterator[Piece] | None = None
        self._iterator: Iterator[tuple[Value, ...]] | None = None
        self._cancel_job: Callable[[], None] | None = None
        self.cancelled = False
        """Whether :meth:`cancel` was called."""

    @property
    def labels(self) -> tuple[str, ...] | None:
        """The names of the columns the path and ops make (``None``: not known ahead)."""
        return self.plan.labels

    @property
    def types(self) -> Mapping[str, str]:
        """Arrow type names of the path's columns, by column name (an empty result's schema)."""
        return self.plan.types

    def _pieces(self) -> Iterator[Piece]:
        if self._source is None:
            self._source = self._produce()
        return self._source

    def _column_stage(self) -> tuple[Iterator[Chunk] | None, OpsPipeline]:
        """The chunks the driver ops' leading column ops give (``None`` when none run on
        columns, as the plan says), and the ops left to run on rows."""
        split = self.plan.ops
        if split.input_types is None or not split.on_columns:
            return None, self._driver
        types = list(split.input_types)
        pieces = (_chunk_of(p, types) for p in self._pieces())
        chunks = run_on_columns(split.on_columns, pieces, plain_output=True)  # read as plain
        return chunks, split.on_rows

    def _rows(self) -> Iterator[tuple[Value, ...]]:
        if self._iterator is None:
            chunks, rest = self._column_stage()
            if chunks is not None:
                rows: Iterator[tuple[Value, ...]] = rest.run(rows_of(chunks))
            else:
                rows = _rows_of(self._pieces())
                rows = self._driver.run(rows) if self._driver else rows
            self._iterator = self._stopping(rows)
        return self._iterator

    def _stopping(self, rows: Iterator[tuple[Value, ...]]) -> Iterator[tuple[Value, ...]]:
        """``rows``; once they end, the shards' pieces are closed at once: driver ops that
        end early (``limit``) cancel the Spark job then, not when the result is dropped."""
        try:
            yield from rows
        finally:
            close = getattr(self._source, "close", None)
            if close is not None:
                close()

    def __iter__(self) -> Iterator[tuple[Value, ...]]:
        return self._rows()

    def __next__(self) -> tuple[Value, ...]:
        return next(self._rows())

    def __enter__(self) -> Rows:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop: cancel the query's Spark job if it is still running."""
        for stream in (self._iterator, self._source):
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def cancel(self) -> None:
        """Cancel the query from another thread (a server whose client went away): its
        Spark job, if one runs, is cancelled now, and the thread reading the rows sees
        them end with an error (that thread then closes them). Unlike :meth:`close`, safe
        while another thread is reading."""
        self.cancelled = True
        cancel_job = self._cancel_job
        if cancel_job is not None:
            cancel_job()

    def on_cancel(self, cancel_job: Callable[[], None]) -> None:
        """What :meth:`cancel` does to the query's Spark job (the runner says, once the
        job started; called at once if the rows were cancelled before)."""
        self._cancel_job = cancel_job
        if self.cancelled:
            cancel_job()

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The remaining rows as Arrow record batches, as they arrive.

        Columns the shards computed as columns keep their types (names are
        ``string``, hits and node counts ``int64``); rows from row ops or
        driver ops are typed per batch as :meth:`to_arrow` describes, except when the
        driver's ops all ran on columns: their batches keep the columns' types (a column
        of nulls is typed null). A batch may be narrower than the widest row: short rows.
        """
        if self._driver and self._iterator is None:
            chunks, rest = self._column_stage()
            if chunks is not None and not rest:
                yield from self._stopping_batches(chunks)
                return
            if chunks is not None:
                self._iterator = self._stopping(rest.run(rows_of(chunks)))
        if self._driver or self._iterator is not None:
            while rows := list(itertools.islice(self, ARROW_BATCH_ROWS)):
                yield _batch_of(rows)
            return
        for piece in self._pieces():
            yield (
                _plain_batch(piece.columns)
                if isinstance(piece, pa.RecordBatch)
                else _batch_of(piece)
            )

    def _stopping_batches(self, chunks: Iterator[Chunk]) -> Iterator[pa.RecordBatch]:
        """The chunks as record batches; the shards' pieces closed once they end."""
        self._iterator = iter(())  # read once: the rows are these batches
        try:
            for count, columns in chunks:
                if count:
                    yield _plain_batch(columns)
        finally:
            close = getattr(self._source, "close", None)
            if close is not None:
                close()

    def warnings(self) -> list[OpError]:
        """The ops' warnings so far, each once with its column (an :class:`OpError`): an
        argument Hydra reads leniently (``sort=0:x``), and once rows ran, a column past
        a row's width. Rops that ran in Spark tasks report only the first kind."""
        return self.plan.rops.pipeline.warnings() + self._driver.warnings()

    def column_names(self, width: int | None = None) -> list[str]:
        """The names of the first ``width`` columns (default: as many as the path and ops
        name): the path's names (``name``, ``hits``, a ``{label}``...) as the ops keep
        them, and ``cN`` for a column without a name (one an op appended, or every column
        after an op such as ``pivot`` whose columns cannot be named ahead)."""
        labels = self.labels or ()
        count = len(labels) if width is None else width
        return [labels[i] if i < len(labels) else f"c{i}" for i in range(count)]

    def to_list(self) -> list[tuple[Value, ...]]:
        """Every remaining row, as a list of tuples."""
        return list(self)

    def to_arrow(self) -> pa.Table:
        """The rows as an Arrow table, its columns named as :meth:`column_names` says.

        A column whose values are all whole numbers is ``int64``, all numbers
        ``float64``, otherwise ``string`` (numbers written as text); short rows
        leave nulls.
        """
        batches = [b for b in self.batches() if b.num_rows]
        width = max((b.num_columns for b in batches), default=0)
        columns = [
            _unified([b.column(i) if i < b.num_columns else pa.nulls(b.num_rows) for b in batches])
            for i in range(width)
        ]
        if not batches:
            return self._empty_table()
        return pa.table(columns, names=self.column_names(width))

    def _empty_table(self) -> pa.Table:
        """No rows: the columns the path and ops name, typed as the path makes them
        (``string`` names, ``int64`` hits and node counts; ``string`` otherwise)."""
        names = self.column_names()
        types = [pa.type_for_alias(self.types.get(name, "string")) for name in names]
        return pa.table([pa.array([], t) for t in types], names=names)

    def to_spark(self, spark: SparkSession) -> DataFrame:
        """The same rows as a Spark DataFrame on ``spark`` (a classic or a Spark Connect
        session), read by the ``treestore`` DataFrame source in Spark's tasks at this
        query's version: the path and rops run there, so a query with driver-side ops is
        refused (the DataFrame's own operations take their place). Columns are named as
        :meth:`column_names` says and typed as the source's schema says (see
        :mod:`query.driver.frame_schema`). Nothing is read here."""
        if self._to_frame is None:
            raise StoreError("these rows come from no store: there is no DataFrame to read")
        return self._to_frame(spark, self.plan)

    def to_parquet(
        self,
        path: str | os.PathLike[str],
        *,
        overwrite: bool = False,
        rows_per_part: int = ROWS_PER_PART,
    ) -> ParquetWritten:
        """Write the remaining rows as Parquet, with the schema :meth:`to_arrow` gives (the
        column names of :meth:`column_names`; without a row, the path's columns and types);
        returns what was written: rows, columns and the files.

        ``path`` (a local path, or a location URI opened as a store's is, with the driver's
        AWS settings: ``s3://``, ``hdfs://``, ``file://``) names **one file** when it ends
        in ``.parquet`` (``out.parquet``); otherwise, or when it ends in ``/`` or is an
        existing folder, **a folder of part files** (``s3://bucket/results/``: files
        ``part-00000.parquet``, ..., at most ``rows_per_part`` rows each). A file already
        there, or part files already in the folder, are replaced only with
        ``overwrite=True``. What is in the way (those without ``overwrite``, a place under
        a file or inside the store's folder) raises
        :class:`~treestore.errors.OutputError` before the query runs.

        Files are written under hidden temporary names and renamed into place once the
        last row is written (on an object store each part appears whole when its upload
        completes): a write that fails or is cancelled leaves nothing under the final
        names and removes its temporary files (see :mod:`query.driver.parquet_out`); the
        query's Spark job is cancelled then.

        Memory: when the batches' types are known before any row (``plan.piece_types`` is
        set: the path and rops run on columns, and every driver op, if any, runs on
        columns too), the rows are written as they arrive, a row group at a time (at most
        262,144 rows or 32 MiB held), cast to the types the plan gives (a whole-number
        column is ``int64`` even when it holds only nulls, which :meth:`to_arrow` would
        make ``string``). When the types come from the values (rops or driver ops on
        rows, attachments), the result is first built whole by :meth:`to_arrow` (held in
        memory), then written.
        """
        target = parquet_target(path, overwrite=overwrite)
        if self.plan.location is not None:
            target.check_outside(self.plan.location)
        types = self.plan.ops.output_types() if self.plan.piece_types is not None else None
        try:
            if types is None:
                table = self.to_arrow()
                return write_parquet(
                    target, table.to_batches(), table.schema, rows_per_part=rows_per_part
                )
            names = self.column_names(len(types))
            schema = pa.schema(
                (name, result_arrow_type(kind)) for name, kind in zip(names, types, strict=True)
            )
            return write_parquet(
                target,
                self.batches(),
                schema,
                empty=self._empty_table,
                rows_per_part=rows_per_part,
            )
        finally:
            self.close()

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame (see :meth:`to_arrow` for the column types)."""
        return self.to_arrow().to_pandas()
