"""A query's rows as the bytes of a response, in one of the API's formats, as they arrive.

Each encoder is a generator run in the query's own thread (see :mod:`shell.serve.running`):
its first chunk leaves once the first row is here (or the rows ended), so an error before
it still gets its own status; later chunks leave every :data:`FLUSH_BYTES` or
:data:`FLUSH_SECONDS`. An error after the first chunk ends the body as the format says
(``json``, ``jsonl`` and ``arrow`` carry it; ``csv`` and ``tsv`` are cut short).

* ``json``: ``{"columns": [...], "version": N, "rows": [[...], ...], "complete": true}``
* ``jsonl``: a header line, one JSON array per row, then ``{"complete": true, "rows": N}``
* ``csv``, ``tsv``: a header row, then the rows, as ``treestore query`` prints them
* ``arrow``: an Arrow IPC stream, its last batch empty with the outcome in its metadata
"""

from __future__ import annotations

import io
import itertools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.ipc as ipc

from query.driver.result import Rows
from query.ops import Value
from shell.output.formats import column_names, write_rows
from shell.serve.answers import error_document, json_bytes

__all__ = ["FORMATS", "MEDIA_TYPES", "Encoding", "encode_rows"]

MEDIA_TYPES = {
    "json": "application/json",
    "jsonl": "application/x-ndjson",
    "csv": "text/csv; charset=utf-8",
    "tsv": "text/tab-separated-values; charset=utf-8",
    "arrow": "application/vnd.apache.arrow.stream",
}
FORMATS = tuple(MEDIA_TYPES)
FLUSH_BYTES = 65_536
FLUSH_SECONDS = 0.05

Failure = Callable[[BaseException], BaseException]
"""What an error that ends the rows is reported as (a timeout's own error, say)."""


def _not_stopped() -> BaseException | None:
    return None


@dataclass
class Encoding:
    """One response's encoding: the rows, how many to send at most, and what it sent.

    ``stopped`` says (between rows) why the query must stop now, as the error to end the
    body with, or ``None``; ``reported`` is what an error that ends the rows is reported
    as (the stop's own error when the query was stopped and its Spark job failed so).
    """

    rows: Rows
    version: int
    limit: int | None = None
    stopped: Callable[[], BaseException | None] = _not_stopped
    reported: Failure = field(default=lambda exc: exc)
    sent_rows: int = 0
    complete: bool = False


def encode_rows(encoding: Encoding, fmt: str) -> Iterator[bytes]:
    """The response body of ``encoding`` in format ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "arrow":
        return _arrow(encoding)
    return _text_format(encoding, fmt)


def _limited(encoding: Encoding) -> Iterator[tuple[Value, ...]]:
    """The rows up to the limit, raising the stop's error once the query is stopped."""
    rows: Iterator[tuple[Value, ...]] = iter(encoding.rows)
    if encoding.limit is not None:
        rows = itertools.islice(rows, encoding.limit)
    stopped = encoding.stopped
    for row in rows:
        if (reason := stopped()) is not None:
            raise reason
        yield row


def _flushing(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``chunks`` gathered into pieces: the first at once, then by size or time."""
    buffer: list[bytes] = []
    size, last, first = 0, time.monotonic(), True
    for chunk in chunks:
        buffer.append(chunk)
        size += len(chunk)
        now = time.monotonic()
        if first or size >= FLUSH_BYTES or now - last >= FLUSH_SECONDS:
            yield b"".join(buffer)
            buffer, size, last, first = [], 0, now, False
    if buffer:
        yield b"".join(buffer)


def _delimited(fmt: str, rows: Sequence[Sequence[Value]]) -> bytes:
    """Rows as ``treestore query --no-header`` prints them in csv or tsv."""
    out = io.StringIO()
    write_rows(rows, out, fmt, header=False)
    return out.getvalue().encode()


def _text_format(encoding: Encoding, fmt: str) -> Iterator[bytes]:
    return _flushing(_text_pieces(encoding, fmt))


def _text_pieces(encoding: Encoding, fmt: str) -> Iterator[bytes]:
    """The body's pieces; the first holds the head and the first row (the first chunk
    leaves with it, see :func:`_flushing`)."""
    rows = _limited(encoding)
    first = list(itertools.islice(rows, 1))  # errors before any row: raised, a status
    names = column_names(encoding.rows.column_names(), len(first[0]) if first else 0)
    if fmt in ("csv", "tsv"):
        head = _delimited(fmt, [names]) if names else b""
        for row in itertools.chain(first, rows):
            yield head + _delimited(fmt, [row])
            head = b""
            encoding.sent_rows += 1
        if head:  # no row
            yield head
        encoding.complete = True
        return
    described = {"columns": names, "version": encoding.version}
    head = (
        json_bytes(described)[:-1] + b',"rows":['
        if fmt == "json"
        else json_bytes(described) + b"\n"
    )
    ending: dict[str, object] = {}
    try:
        for row in itertools.chain(first, rows):
            if fmt == "json":
                yield head + (b"," if encoding.sent_rows else b"") + json_bytes(list(row))
            else:
                yield head + json_bytes(list(row)) + b"\n"
            head = b""
            encoding.sent_rows += 1
        encoding.complete = True
        ending = {"complete": True, "rows": encoding.sent_rows}
        warnings = [str(w) for w in encoding.rows.warnings()]
        if warnings:
            ending["warnings"] = warnings
    except Exception as exc:
        ending = {"error": error_document(encoding.reported(exc)), "complete": False}
        ending["rows"] = encoding.sent_rows
    if fmt == "json":  # the rows' count is the list's length
        ending.pop("rows", None)
        yield head + b"]," + json_bytes(ending)[1:]
    else:
        yield head + json_bytes(ending) + b"\n"


def _arrow_batches(encoding: Encoding) -> Iterator[pa.RecordBatch]:
    left = encoding.limit
    for batch in encoding.rows.batches():
        if (reason := encoding.stopped()) is not None:
            raise reason
        if left is not None:
            if left <= 0:
                break
            batch = batch.slice(0, left)
            left -= batch.num_rows
        if batch.num_rows:
            yield batch
        if left is not None and left <= 0:
            break


def _fitted(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` in the stream's ``schema`` (the first batch's): a narrower batch gets
    null columns, a number column where the stream has text is cast to text, whole
    numbers to real ones; a column that cannot fit raises."""
    columns = []
    for i, target in enumerate(schema):
        if i >= batch.num_columns:
            columns.append(pa.nulls(batch.num_rows, target.type))
            continue
        column = batch.column(i)
        if column.type != target.type:
            if column.null_count == len(column):
                column = pa.nulls(len(column), target.type)
            elif target.type == pa.string() or (
                target.type == pa.float64() and column.type == pa.int64()
            ):
                column = column.cast(target.type)
            else:
                raise TypeError(
                    f"column {i} changed type mid-stream ({target.type}, then {column.type}):"
                    " ask for format jsonl for rows whose columns change type"
                )
        columns.append(column)
    if batch.num_columns > len(schema):
        raise TypeError(
            f"a row is wider ({batch.num_columns} columns) than the stream's first rows "
            f"({len(schema)}): ask for format jsonl"
        )
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _arrow(encoding: Encoding) -> Iterator[bytes]:
    batches = _arrow_batches(encoding)
    first = next(batches, None)
    if first is None:
        schema = encoding.rows.to_arrow().schema
    else:
        names = encoding.rows.column_names(first.num_columns)
        schema = pa.schema([pa.field(n, c.type) for n, c in zip(names, first.columns, strict=True)])
    sink = io.BytesIO()
    writer = ipc.new_stream(sink, schema)

    def taken() -> bytes:
        data = sink.getvalue()
        sink.seek(0)
        sink.truncate()
        return data

    metadata: dict[str, str] = {}
    try:
        for batch in itertools.chain([first] if first is not None else [], batches):
            writer.write_batch(_fitted(batch, schema))
            encoding.sent_rows += batch.num_rows
            yield taken()
        encoding.complete = True
        warnings = [str(w) for w in encoding.rows.warnings()]
        metadata = {"treestore.complete": "true", "treestore.warnings": json.dumps(warnings)}
    except Exception as exc:
        metadata = {
            "treestore.complete": "false",
            "treestore.error": json.dumps(error_document(encoding.reported(exc))),
        }
    writer.write_batch(_empty(schema), custom_metadata=metadata)
    writer.close()
    yield taken()


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)
