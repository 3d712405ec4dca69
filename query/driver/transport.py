"""How a shard task's rows are encoded for the driver: pieces of ``(kind, payload)``.

A piece is :data:`COLUMNS` (one Arrow IPC record batch), :data:`ROWS` (a msgpack
list of rows, so ints stay ints and nulls stay nulls) or :data:`ERROR` (a
treestore error to raise on the driver). :mod:`query.driver.channel` carries them.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgpack
import pyarrow as pa

from query.driver.result import Piece
from query.ops.columns import Chunk
from treestore.errors import PositionedError, StoreError, TreestoreError

__all__ = [
    "COLUMNS",
    "ERROR",
    "ROWS",
    "Payload",
    "as_piece",
    "decode_piece",
    "encode_error",
    "encode_piece",
]

ROWS, ERROR, COLUMNS = 0, 1, 2
Payload: TypeAlias = bytes | pa.Buffer
"""A piece's encoded bytes: column chunks stay in the Arrow buffer they were written to
(copying a 40 MB piece into ``bytes`` took 25 ms, and as much again to put a header
before it)."""
_COMPRESSED = pa.ipc.IpcWriteOptions(compression="lz4")
"""Column chunks sent from another machine are LZ4-compressed: names compress well."""


def encode_error(exc: TreestoreError) -> bytes:
    """A treestore error as a payload: :func:`decode_piece` raises it again, as the same
    class of :mod:`treestore.errors` with the same message (and position, if it has one)."""
    if isinstance(exc, PositionedError):
        fields = {
            "reason": exc.reason,
            "text": exc.text,
            "line": exc.line,
            "column": exc.column,
            "source": exc.source,
            "hint": exc.hint,
        }
        return msgpack.packb({"type": type(exc).__name__, "positioned": fields})
    return msgpack.packb({"type": type(exc).__name__, "message": str(exc)})


def _error_classes() -> dict[str, type[TreestoreError]]:
    """Every class of the exception tree, by name."""
    found: dict[str, type[TreestoreError]] = {}
    todo: list[type[TreestoreError]] = [TreestoreError]
    while todo:
        kind = todo.pop()
        found[kind.__name__] = kind
        todo.extend(kind.__subclasses__())
    return found


def _raise_error(payload: Payload | bytearray) -> None:
    error = msgpack.unpackb(payload)
    kind = _error_classes().get(error["type"], StoreError)  # unknown: still a store error
    positioned = error.get("positioned")
    if positioned is not None and issubclass(kind, PositionedError):
        raise kind(
            positioned["reason"],
            positioned["text"],
            positioned["line"],
            positioned["column"],
            source=positioned["source"],
            hint=positioned["hint"],
        )
    raise kind(error.get("message") or (positioned and positioned["reason"]) or "")


def as_piece(output: Chunk | list[Any]) -> Piece:
    """A shard's output chunk as the piece :func:`decode_piece` would give for it, without
    encoding it (a shard read where its rows are wanted)."""
    if isinstance(output, list):
        return list(map(tuple, output))
    count, columns = output
    if not columns:
        return [()] * count
    return pa.RecordBatch.from_arrays(columns, [f"c{i}" for i in range(len(columns))])


def encode_piece(output: Chunk | list[Any], compress: bool = True) -> tuple[int, Payload]:
    """A shard's output chunk (columns, or a list of rows) as ``(kind, payload)``: columns
    written once into a buffer of their size (measured first: a growing buffer copies
    itself as it grows)."""
    if isinstance(output, list):
        return ROWS, msgpack.packb(output)
    count, columns = output
    if not columns:
        return ROWS, msgpack.packb([()] * count)
    batch = pa.RecordBatch.from_arrays(columns, [f"c{i}" for i in range(len(columns))])
    options = _COMPRESSED if compress else None
    if compress:  # the size is known only once compressed
        sink = pa.BufferOutputStream()
        _write_batch(sink, batch, options)
        return COLUMNS, sink.getvalue()
    size = pa.MockOutputStream()
    _write_batch(size, batch, options)
    payload = pa.allocate_buffer(size.size())
    _write_batch(pa.FixedSizeBufferWriter(payload), batch, options)
    return COLUMNS, payload


def _write_batch(sink: Any, batch: pa.RecordBatch, options: pa.ipc.IpcWriteOptions | None) -> None:
    with pa.ipc.new_stream(sink, batch.schema, options=options) as writer:
        writer.write_batch(batch)


def decode_piece(kind: int, payload: Payload | bytearray) -> Piece:
    """A received ``(kind, payload)`` as a piece of the result (an error is raised)."""
    if kind == ERROR:
        _raise_error(payload)
    if kind == COLUMNS:
        return pa.ipc.open_stream(payload).read_next_batch()
    return list(map(tuple, msgpack.unpackb(payload)))
