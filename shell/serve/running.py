"""One query's run: its encoder in a thread of its own, its chunks handed to the event loop
through a bounded buffer, and its stop (limit, timeout, a client gone, the service
stopping) from the event loop's side.

The thread never blocks the event loop, and the event loop never waits on the thread
except through an ``asyncio.Queue``: a slow client holds only its own
:attr:`~shell.serve.options.ServeOptions.buffer_chunks` chunks, and its query waits.
Stopping sets the reason and cancels the query's Spark job at once
(:meth:`~query.driver.result.Rows.cancel`); the thread sees the rows end, writes the
body's ending if the format has one, and closes the rows.

The thread also plans the query (:class:`Started` is what its ``prepare`` gives), so a
query costs the event loop one hand-over; threads are kept for the next query
(:class:`_Threads`). A query walked on the driver whose whole answer is ready within
:data:`WHOLE_SECONDS` comes back as one ``("whole", body)`` item: the event loop answers
it as a plain response, without a stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from query.driver.result import Rows
from shell.serve.answers import RequestError

__all__ = ["QueryRun", "Slots", "Started", "stop_error"]

Kind = Literal["chunk", "end", "error", "whole"]
_SLOT_WAIT_SECONDS = 0.1
WHOLE_SECONDS = 0.02
"""How long a driver-walked query's chunks are gathered, hoping for the whole answer."""
_IDLE_THREAD_SECONDS = 60.0
"""How long a query thread waits for the next query before it ends."""


@dataclass
class Started:
    """What a query's ``prepare`` gives, in its thread: the rows (to cancel them), the
    chunks of the body, and whether to gather a small answer whole (a driver walk)."""

    rows: Rows
    chunks: Iterator[bytes]
    gather: bool = False


class _Threads:
    """Daemon threads that run queries, each kept for the next one (a thread start costs a
    busy event loop's GIL a hand-over), ended after :data:`_IDLE_THREAD_SECONDS` idle."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job that no submit has claimed yet

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)
        with self._lock:
            if self._idle:
                self._idle -= 1  # an idle thread takes it
                return
        threading.Thread(target=self._work, daemon=True, name="treestore-serve-query").start()

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=_IDLE_THREAD_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # nobody claimed this thread: end it
                        self._idle -= 1
                        return
                continue  # a job was put for this thread just now
            with contextlib.suppress(BaseException):
                job()
            with self._lock:
                self._idle += 1


_THREADS = _Threads()


def stop_error(reason: str, timeout: float | None = None) -> RequestError:
    """The error a query stopped for ``reason`` ends with."""
    if reason == "timeout":
        return RequestError(504, f"The query ran past its timeout of {timeout:g} s: cancelled.")
    if reason == "shutdown":
        return RequestError(503, "The service is stopping: the query was cancelled.")
    return RequestError(499, "The client went away: the query was cancelled.")


class QueryRun:
    """A query run in a daemon thread: ``prepare`` (plan and rows) then its chunks, read
    with :meth:`next`."""

    def __init__(
        self,
        prepare: Callable[[QueryRun], Started],
        buffer_chunks: int,
        timeout: float,
    ) -> None:
        self.rows: Rows | None = None
        """The query's rows, once ``prepare`` made them."""
        self.timeout = timeout
        self.stop_reason: str | None = None
        self.finished = False
        """Whether the thread is done (its last item is in the queue)."""
        self._prepare = prepare
        self._slots = threading.Semaphore(buffer_chunks)
        self._queue: asyncio.Queue[tuple[Kind, bytes | BaseException | None]] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()

    def start(self) -> None:
        """Start the thread (the query is planned and its rows first asked for there)."""
        _THREADS.submit(self._produce)

    def stopped(self) -> BaseException | None:
        """The error to stop with, once :meth:`stop` was called (else ``None``)."""
        return None if self.stop_reason is None else stop_error(self.stop_reason, self.timeout)

    def reported(self, exc: BaseException) -> BaseException:
        """What an error that ended the rows is reported as: the stop's, if stopped."""
        return self.stopped() or exc

    def stop(self, reason: str) -> None:
        """Stop the query for ``reason`` (``timeout``, ``disconnect``, ``shutdown``): its
        Spark job is cancelled now; the thread ends the body. Idempotent."""
        if self.stop_reason is not None or self.finished:
            return
        self.stop_reason = reason
        if self.rows is not None:
            with contextlib.suppress(Exception):  # a session already stopped
                self.rows.cancel()

    def _put(self, kind: Kind, item: bytes | BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the event loop is gone (shutdown)
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (kind, item))

    def _produce(self) -> None:
        chunks: Iterator[bytes] | None = None
        try:
            started = self._prepare(self)
            self.rows, chunks = started.rows, started.chunks
            if self.stop_reason is not None:  # stopped while it was being planned
                with contextlib.suppress(Exception):
                    started.rows.cancel()
            if started.gather and self._gathered(chunks):
                return
            for chunk in chunks:
                while self.stop_reason is None and not self._slots.acquire(
                    timeout=_SLOT_WAIT_SECONDS
                ):
                    pass  # a slow client: wait for it (or for the stop)
                self._put("chunk", chunk)
            self._put("end", None)
        except BaseException as exc:
            self._put("error", self.reported(exc))
        finally:
            with contextlib.suppress(Exception):
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
            with contextlib.suppress(Exception):
                if self.rows is not None:
                    self.rows.close()
            self.finished = True

    def _gathered(self, chunks: Iterator[bytes]) -> bool:
        """Gather ``chunks`` for up to :data:`WHOLE_SECONDS` from the first: if they end,
        put the whole body as one item (True); else put what came as the first chunk and
        let the rest stream (False). An error raised before any chunk propagates."""
        taken: list[bytes] = []
        deadline: float | None = None
        try:
            for chunk in chunks:
                taken.append(chunk)
                deadline = deadline or time.monotonic() + WHOLE_SECONDS
                if time.monotonic() > deadline:
                    break
            else:
                self._put("whole", b"".join(taken))
                return True
        except BaseException as exc:
            if not taken:
                raise
            self._slots.acquire()  # the buffer is empty: one slot is free
            self._put("chunk", b"".join(taken))
            self._put("error", self.reported(exc))
            return True
        self._slots.acquire()  # the buffer is empty: one slot is free
        self._put("chunk", b"".join(taken))
        return False

    async def next(self, wait: float) -> tuple[Kind, bytes | BaseException | None]:
        """The next item: ``("chunk", bytes)``, ``("end", None)``, ``("error", exc)`` or (a
        small answer, first and last) ``("whole", bytes)``; raises ``TimeoutError`` after
        ``wait`` seconds without one."""
        kind, item = await asyncio.wait_for(self._queue.get(), max(wait, 0.0))
        if kind == "chunk":
            self._slots.release()
        return kind, item


class Slots:
    """The running queries' slots and the bounded queue before them."""

    def __init__(self, running: int, waiting: int) -> None:
        self._semaphore = asyncio.Semaphore(running)
        self._max_waiting = waiting
        self.waiting = 0

    def must_wait(self) -> bool:
        """Whether a new query must wait for a slot (``False``: :meth:`acquire` takes one
        at once); a full queue is a 503."""
        if not self._semaphore.locked():
            return False
        if self.waiting >= self._max_waiting:
            raise RequestError(503, "Too many queries at once: try again shortly.")
        return True

    async def acquire(self) -> None:
        """Take a slot (waiting in the queue); a full queue is a 503."""
        self.must_wait()
        await self.wait()

    async def wait(self) -> None:
        """Wait in the queue for a slot and take it (:meth:`must_wait` said there is room)."""
        self.waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self.waiting -= 1

    def release(self) -> None:
        """Give a slot back."""
        self._semaphore.release()
