"""How a query's tasks send their rows to the driver: a socket the driver listens on.

One Spark job runs every shard of a query; its tasks connect to a TCP server the
driver opens at ``spark.driver.host`` (the address executors already use to reach
the driver, on any cluster manager) and send their shards' pieces as frames. The
driver hands the pieces out in shard order as they arrive, so the first rows are
read while later tasks still run; nothing goes through a folder or the JVM.

A frame is ``shard, number, kind, length`` then ``length`` bytes of payload; a
shard ends with a frame of kind :data:`DONE` whose number is its piece count. A
connection starts with the channel's random token, so only this query's tasks are
heard. Spark may run a task twice (a retry, a speculative copy): pieces are
numbered per shard and computed from one immutable version, so the first copy of
each ``(shard, number)`` is kept and any repeat dropped.

On a secured Spark session the channel speaks TLS with a key made for the query
(:mod:`query.driver.channel_tls`): the tasks trust only that query's certificate, which
they receive with the task.

A reader that wants no more rows (a limit met, a client gone) calls
:meth:`RowChannel.stop_senders`: the driver half-closes each connection (and each one
that comes later), a task sees it before its next piece (:meth:`TaskSender.stopped`) and
ends without an error, so Spark keeps its Python worker (a cancelled task's worker is
killed, and the next query's tasks would pay a new worker's start and cold caches).

Pieces of shards the reader has not reached yet wait in memory up to
:data:`MEMORY_BUDGET` bytes, then in a temporary file on the driver, so a task is
never blocked by a reader that is still on an earlier shard.
"""

from __future__ import annotations

import contextlib
import secrets
import select
import socket
import ssl
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import IO, Protocol

from query.driver.channel_tls import ChannelKeys, client_context
from query.driver.result import Piece
from query.driver.transport import Payload, decode_piece
from treestore.errors import StoreError

__all__ = ["ARRIVAL_SECONDS", "DONE", "MEMORY_BUDGET", "JobState", "RowChannel", "TaskSender"]

DONE = 3
_HEADER = struct.Struct("!iiBI")
_JOINED_PAYLOAD = 1 << 16
"""A payload under this many bytes is sent joined to its header (one call)."""
_TOKEN_BYTES = 16
MEMORY_BUDGET = 256 << 20
"""Bytes of waiting pieces kept in memory before they go to a temporary file."""
ARRIVAL_SECONDS = 60
"""How long rows may still be on their way after the Spark job has succeeded."""
_WAIT_SECONDS = 0.2
_HANDSHAKE_SECONDS = 60
_FAILED = object()


class JobState(Protocol):
    """What the channel needs to know of the Spark job: whether it runs, how it failed."""

    error: BaseException | None

    def running(self) -> bool:
        """Whether the Spark job is still running."""
        ...


def _read_exactly(connection: socket.socket, size: int) -> bytearray | None:
    """``size`` bytes from ``connection``, or None if it closes first (read straight
    into one buffer: a piece can be tens of MB)."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    done = 0
    while done < size:
        got = connection.recv_into(view[done:], size - done)
        if not got:
            return None
        done += got
    return buffer


class _Waiting:
    """Pieces received but not read yet: in memory, then spilled to a temporary file."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.in_memory = 0
        self.pieces: dict[tuple[int, int], tuple[int, bytes | bytearray | tuple[int, int]]] = {}
        self.spill: IO[bytes] | None = None

    def put(self, shard: int, number: int, kind: int, payload: bytes | bytearray) -> None:
        if (shard, number) in self.pieces:
            return
        if self.in_memory + len(payload) <= self.budget:
            self.in_memory += len(payload)
            self.pieces[shard, number] = (kind, payload)
            return
        if self.spill is None:
            self.spill = tempfile.TemporaryFile(prefix="treestore-query-")  # noqa: SIM115
        offset = self.spill.seek(0, 2)
        self.spill.write(payload)
        self.pieces[shard, number] = (kind, (offset, len(payload)))

    def take(self, shard: int, number: int) -> tuple[int, bytes | bytearray] | None:
        found = self.pieces.pop((shard, number), None)
        if found is None:
            return None
        kind, where = found
        if isinstance(where, bytes | bytearray):
            self.in_memory -= len(where)
            return kind, where
        assert self.spill is not None
        offset, length = where
        self.spill.seek(offset)
        return kind, self.spill.read(length)

    def discard(self) -> None:
        self.pieces.clear()
        if self.spill is not None:
            self.spill.close()


class RowChannel:
    """The driver's side: listens, receives every task's frames, yields pieces in order."""

    def __init__(
        self,
        host: str,
        bind: str | None = None,
        budget: int = MEMORY_BUDGET,
        tls: bool = False,
    ) -> None:
        self.token = secrets.token_bytes(_TOKEN_BYTES)
        keys = ChannelKeys.new() if tls else None
        self.certificate = keys.certificate if keys is not None else None
        """The query's certificate (PEM) when the channel speaks TLS, else ``None``."""
        self._tls = keys.server_context() if keys is not None else None
        try:
            self._server = socket.create_server((bind or host, 0), backlog=64)
        except OSError as exc:
            raise StoreError(
                f"Cannot listen for the query's rows on {bind or host} ({exc}): set "
                "spark.driver.host (or spark.driver.bindAddress) to an address of this machine."
            ) from exc
        self.address = (host, int(self._server.getsockname()[1]))
        self._changed = threading.Condition()
        self._waiting = _Waiting(budget)
        self._done: dict[int, int] = {}  # shard -> its piece count
        self._connections: list[socket.socket] = []
        self._closed = False
        self.stopping = False
        """Whether :meth:`stop_senders` was called: the rows will not all come."""
        threading.Thread(target=self._accept, daemon=True, name="treestore-rows").start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return  # closed
            with self._changed:
                if self._closed:
                    connection.close()
                    return
                self._connections.append(connection)
            threading.Thread(
                target=self._receive, args=(connection,), daemon=True, name="treestore-rows"
            ).start()

    def _receive(self, connection: socket.socket) -> None:
        if self._tls is not None:
            try:  # a client that does not speak TLS with this query's key is dropped
                connection.settimeout(_HANDSHAKE_SECONDS)
                connection = self._tls.wrap_socket(connection, server_side=True)
                connection.settimeout(None)
            except (OSError, ssl.SSLError):
                connection.close()
                return
            with self._changed:
                self._connections.append(connection)
        with contextlib.suppress(OSError), connection:
            if _read_exactly(connection, _TOKEN_BYTES) != self.token:
                return
            if self.stopping:
                _half_close(connection)
            while header := _read_exactly(connection, _HEADER.size):
                shard, number, kind, length = _HEADER.unpack(header)
                payload = _read_exactly(connection, length) if length else b""
                if payload is None:
                    return
                with self._changed:
                    if self._closed:
                        return
                    if self.stopping:
                        continue  # a task that has not seen the stop yet: dropped
                    if kind == DONE:
                        self._done.setdefault(shard, number)
                    else:
                        self._waiting.put(shard, number, kind, payload)
                    self._changed.notify_all()

    def pieces(self, shards: list[int], job: JobState) -> Iterator[Piece]:
        """The pieces of ``shards``, shard by shard in that order, each as soon as it is here.

        Returns early (without an error) if the Spark job fails before every shard is done:
        the caller then raises the job's error. Once the job has succeeded every frame is
        on its way; a shard still incomplete :data:`ARRIVAL_SECONDS` later is an error.
        """
        for shard in shards:
            number = 0
            while True:
                with self._changed:
                    found = self._next(shard, number, job)
                if found is None:
                    break  # the shard is done and every piece was read
                if found is _FAILED:
                    return
                number += 1
                yield decode_piece(*found)  # type: ignore[misc]

    def _next(self, shard: int, number: int, job: JobState) -> object:
        """Under the lock: piece ``number`` of ``shard`` as ``(kind, payload)``, None when
        the shard is done, or :data:`_FAILED` when the job failed first."""
        succeeded_at = None
        while True:
            if self.stopping:
                return _FAILED
            found = self._waiting.take(shard, number)
            if found is not None:
                return found
            if self._done.get(shard) == number:
                return None
            if not job.running():
                if job.error is not None:
                    return _FAILED
                succeeded_at = succeeded_at or time.monotonic()
                if time.monotonic() - succeeded_at > ARRIVAL_SECONDS:
                    raise StoreError(
                        f"The query's Spark job ended but shard {shard}'s rows did not all "
                        f"arrive within {ARRIVAL_SECONDS} s."
                    )
            self._changed.wait(_WAIT_SECONDS)

    def stop_senders(self) -> None:
        """Tell the tasks to send nothing more (each ends without an error at its next
        piece; one that connects later is told at once); the reader's :meth:`pieces`
        returns. The channel keeps listening until :meth:`close`."""
        with self._changed:
            if self.stopping or self._closed:
                return
            self.stopping = True
            connections = list(self._connections)
            self._waiting.discard()
            self._changed.notify_all()
        for connection in connections:
            _half_close(connection)

    def close(self) -> None:
        """Stop listening and drop every connection (tasks still sending then fail)."""
        with self._changed:
            self._closed = True
            connections, self._connections = self._connections, []
            self._waiting.discard()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._server.close()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()


def _half_close(connection: socket.socket) -> None:
    """Close the driver's way of ``connection`` (TCP only, under TLS too: the task sees
    its end of the stream, and the driver still reads what the task sends meanwhile)."""
    with contextlib.suppress(OSError):
        socket.socket.shutdown(connection, socket.SHUT_WR)


class TaskSender:
    """A task's side: one connection to the driver's :class:`RowChannel` (over TLS,
    trusting only ``certificate``, when the channel has one)."""

    def __init__(
        self, address: tuple[str, int], token: bytes, certificate: bytes | None = None
    ) -> None:
        try:
            self._socket = socket.create_connection(address, timeout=120)
            if certificate is not None:
                self._socket = client_context(certificate).wrap_socket(self._socket)
        except ssl.SSLError as exc:
            raise StoreError(
                f"A query task reached {address[0]}:{address[1]} but could not set up TLS with "
                f"the query's own certificate ({exc}): another process answers at that address."
            ) from exc
        except OSError as exc:
            raise StoreError(
                f"A query task cannot reach the driver at {address[0]}:{address[1]} ({exc}): "
                "executors must reach spark.driver.host."
            ) from exc
        self._socket.sendall(token)
        self._numbers: dict[int, int] = {}

    def stopped(self) -> bool:
        """Whether the driver wants no more rows: it closed its way of the connection
        (it never sends anything else)."""
        try:
            readable, _, _ = select.select([self._socket], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def send(self, shard: int, kind: int, payload: Payload) -> None:
        """Send ``shard``'s next piece (a big one after its header, not copied behind it)."""
        number = self._numbers.get(shard, 0)
        header = _HEADER.pack(shard, number, kind, len(payload))
        if len(payload) < _JOINED_PAYLOAD:
            self._socket.sendall(header + memoryview(payload))
        else:
            self._socket.sendall(header)
            self._socket.sendall(payload)
        self._numbers[shard] = number + 1

    def finish(self, shard: int) -> None:
        """Say that ``shard`` has no more pieces."""
        self._socket.sendall(_HEADER.pack(shard, self._numbers.get(shard, 0), DONE, 0))

    def close(self) -> None:
        """Close the connection."""
        self._socket.close()
