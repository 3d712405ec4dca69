"""One query's run: its encoder in a thread of its own, its chunks handed to the event loop
through a bounded buffer, and its stop (limit, timeout, a client gone, the service
stopping) from the event loop's side.

The thread never blocks the event loop, and the event loop never waits on the thread
except through an ``asyncio.Queue``: a slow client holds only its own
:attr:`~shell.serve.options.ServeOptions.buffer_chunks` chunks, and its query waits.
Stopping sets the reason and cancels the query's Spark job at once
(:meth:`~query.driver.result.Rows.cancel`); the thread sees the rows end, writes the
body's ending if the format has one, and closes the rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Literal

from query.driver.result import Rows
from shell.serve.answers import RequestError

__all__ = ["QueryRun", "Slots", "stop_error"]

Kind = Literal["chunk", "end", "error"]
_SLOT_WAIT_SECONDS = 0.1


def stop_error(reason: str, timeout: float | None = None) -> RequestError:
    """The error a query stopped for ``reason`` ends with."""
    if reason == "timeout":
        return RequestError(504, f"The query ran past its timeout of {timeout:g} s: cancelled.")
    if reason == "shutdown":
        return RequestError(503, "The service is stopping: the query was cancelled.")
    return RequestError(499, "The client went away: the query was cancelled.")


class QueryRun:
    """A query's encoder run in a daemon thread, its chunks read with :meth:`next`."""

    def __init__(
        self,
        rows: Rows,
        chunks: Callable[[], Iterator[bytes]],
        buffer_chunks: int,
        timeout: float,
    ) -> None:
        self.rows = rows
        self.timeout = timeout
        self.stop_reason: str | None = None
        self.finished = False
        """Whether the thread is done (its last item is in the queue)."""
        self._chunks = chunks
        self._slots = threading.Semaphore(buffer_chunks)
        self._queue: asyncio.Queue[tuple[Kind, bytes | BaseException | None]] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()

    def start(self) -> None:
        """Start the thread (the rows are first asked for there)."""
        threading.Thread(target=self._produce, daemon=True, name="treestore-serve-query").start()

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
        with contextlib.suppress(Exception):  # a session already stopped
            self.rows.cancel()

    def _put(self, kind: Kind, item: bytes | BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the event loop is gone (shutdown)
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (kind, item))

    def _produce(self) -> None:
        chunks = self._chunks()
        try:
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
                self.rows.close()
            self.finished = True

    async def next(self, wait: float) -> tuple[Kind, bytes | BaseException | None]:
        """The next item: ``("chunk", bytes)``, ``("end", None)`` or ``("error", exc)``;
        raises ``TimeoutError`` after ``wait`` seconds without one."""
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
