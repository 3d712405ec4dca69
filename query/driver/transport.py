"""How a shard task's rows reach the driver: encoded pieces, through Spark or through files.

A piece is encoded as ``(kind, payload)``: :data:`COLUMNS` (one Arrow IPC
record batch), :data:`ROWS` (a msgpack list of rows, so ints stay ints and
nulls stay nulls) or :data:`ERROR` (a treestore error to raise on the driver).

Through Spark, each piece is one row of the task's output. When Spark runs on
the driver's machine (a ``local`` master), the tasks instead write their
pieces as numbered files to a scratch folder (:class:`ShardFiles`) and the
driver reads them shard by shard as they appear (:func:`read_shard_files`):
one Spark job for all shards, nothing big crosses the JVM, and the first rows
are read while later shards still run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import msgpack
import pyarrow as pa

from query.driver.result import Piece
from query.ops.columns import Chunk
from treestore.errors import PositionedError, StoreError, TreestoreError

__all__ = [
    "COLUMNS",
    "ERROR",
    "RESULT_SCHEMA",
    "ROWS",
    "ShardFiles",
    "decode_piece",
    "encode_error",
    "encode_piece",
    "read_shard_files",
    "result_batch",
]

ROWS, ERROR, COLUMNS = 0, 1, 2
RESULT_SCHEMA = "kind tinyint, payload binary"
_COMPRESSED = pa.ipc.IpcWriteOptions(compression="lz4")
"""Column chunks sent through Spark are LZ4-compressed: names compress well, and every
byte crosses the JVM."""
_POLL_SECONDS = (0.001, 0.02)
"""The driver looks for a shard's next file this often (first, at most)."""


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


def _raise_error(payload: bytes) -> None:
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


def encode_piece(output: Chunk | list[Any], compress: bool = True) -> tuple[int, bytes]:
    """A shard's output chunk (columns, or a list of rows) as ``(kind, payload)``."""
    if isinstance(output, list):
        return ROWS, msgpack.packb(output)
    count, columns = output
    if not columns:
        return ROWS, msgpack.packb([()] * count)
    batch = pa.RecordBatch.from_arrays(columns, [f"c{i}" for i in range(len(columns))])
    sink = pa.BufferOutputStream()
    options = _COMPRESSED if compress else None
    with pa.ipc.new_stream(sink, batch.schema, options=options) as writer:
        writer.write_batch(batch)
    return COLUMNS, sink.getvalue().to_pybytes()


def decode_piece(kind: int, payload: bytes) -> Piece:
    """A received ``(kind, payload)`` as a piece of the result (an error is raised)."""
    if kind == ERROR:
        _raise_error(payload)
    if kind == COLUMNS:
        return pa.ipc.open_stream(payload).read_next_batch()
    return list(map(tuple, msgpack.unpackb(payload)))


def result_batch(kind: int, payload: bytes) -> pa.RecordBatch:
    """One row of a task's Spark output."""
    return pa.RecordBatch.from_arrays(
        [pa.array([kind], pa.int8()), pa.array([payload], pa.binary())], ["kind", "payload"]
    )


def _piece_file(folder: str, shard: int, number: int, kind: int) -> str:
    return os.path.join(folder, f"{shard:06d}-{number:08d}.{kind}")


def _done_file(folder: str, shard: int) -> str:
    return os.path.join(folder, f"{shard:06d}.done")


class ShardFiles:
    """A task's side of the file channel: one shard's pieces as numbered files."""

    def __init__(self, folder: str, shard: int) -> None:
        self.folder, self.shard, self.written = folder, shard, 0

    def write(self, kind: int, payload: bytes) -> None:
        """Add the next piece (written whole, then renamed into place)."""
        name = _piece_file(self.folder, self.shard, self.written, kind)
        with open(name + ".tmp", "wb") as out:
            out.write(payload)
        os.rename(name + ".tmp", name)
        self.written += 1

    def finish(self) -> None:
        """Say that the shard has no more pieces."""
        with open(_done_file(self.folder, self.shard), "wb"):
            pass


def _next_piece(folder: str, shard: int, number: int) -> tuple[int, bytes] | None:
    for kind in (COLUMNS, ROWS, ERROR):
        name = _piece_file(folder, shard, number, kind)
        try:
            with open(name, "rb") as source:
                payload = source.read()
        except FileNotFoundError:
            continue
        os.remove(name)
        return kind, payload
    return None


def read_shard_files(
    folder: str, shards: list[int], running: Callable[[], bool]
) -> Iterator[Piece]:
    """The pieces the tasks write to ``folder``, shard by shard in the order given, each as
    soon as it is there. Stops early (without an error) if ``running()`` turns false
    before a shard is done: the caller raises the job's error."""
    for shard in shards:
        number = 0
        wait = _POLL_SECONDS[0]
        while True:
            found = _next_piece(folder, shard, number)
            if found is not None:
                number += 1
                wait = _POLL_SECONDS[0]
                yield decode_piece(*found)
                continue
            if os.path.exists(_done_file(folder, shard)):
                if (found := _next_piece(folder, shard, number)) is None:
                    break  # done, and every piece (written before the mark) read
                number += 1
                yield decode_piece(*found)
                continue
            if not running() and not os.path.exists(_done_file(folder, shard)):
                return
            time.sleep(wait)
            wait = min(wait * 2, _POLL_SECONDS[1])
