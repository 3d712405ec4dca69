"""Stages chained over a stream, at any length: a long chain runs in segments, each in a
thread of its own.

A pipeline of ops is a chain of generators, each pulling from the one before it, and
Python runs one pull through N generators as N nested calls: a chain of a few thousand
ops (``sort;sort;...``) would pass the interpreter's recursion limit. :func:`chain` runs a
chain of up to :data:`SEGMENT_STAGES` stages as it is, and a longer one (or one started
already deep in a stack, as the ops of a ``groupby`` inside a ``groupby``) in segments of
at most :data:`SEGMENT_STAGES` stages, each segment in a thread of its own, so that no
stack holds more than one segment.

The segments hand items over by rendezvous, not through a buffer: a segment computes its
next item only when the next segment asks for it, and the asking thread waits until it
comes. One thread works at a time, every stage sees its items exactly when it would in
one thread (``groupby``'s order depends on how far its ops have read), an error comes out
where it would, and the cost stays linear in the chain's length.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["SEGMENT_STAGES", "chain"]

T = TypeVar("T")

SEGMENT_STAGES = 64
"""The most stages one stack holds (a stage is one op: a generator or two, and what it
calls)."""

_ASK = "ask"
_STOP = "stop"
_ITEM = "item"
_END = "end"
_FAILED = "failed"


def _deep_stack() -> bool:
    """Whether the caller's stack already holds a third of the recursion limit's frames."""
    deep = sys.getrecursionlimit() // 3
    frame, depth = inspect.currentframe(), 0
    while frame is not None and depth <= deep:
        frame, depth = frame.f_back, depth + 1
    return depth > deep


def chain(
    stages: Sequence[Callable[[Iterator[T]], Iterator[T]]], source: Iterable[T]
) -> Iterator[T]:
    """``source`` through every stage in turn (each takes an iterator, returns one), lazily.

    >>> list(chain([lambda s: (x + 1 for x in s)] * 1000, [0, 1]))
    [1000, 1001]
    """
    if len(stages) <= SEGMENT_STAGES and not _deep_stack():
        stream = iter(source)
        for stage in stages:
            stream = stage(stream)
        return stream
    return _relayed(stages, iter(source))


def _relayed(
    stages: Sequence[Callable[[Iterator[T]], Iterator[T]]], source: Iterator[T]
) -> Iterator[T]:
    """The chain run in segments, each in its own thread; closing it stops them all."""
    relays: list[_Relay[T]] = []
    stream = source
    try:
        for start in range(0, len(stages), SEGMENT_STAGES):
            relay = _Relay(stages[start : start + SEGMENT_STAGES], stream)
            relays.append(relay)
            stream = relay
        yield from stream
    finally:
        # the last segment first, so that a segment closing its stages never finds the
        # segment before it gone
        for relay in reversed(relays):
            relay.stop()


class _Stopped(BaseException):
    """Raised in a segment that asks a stopped segment for an item (the chain was closed
    while it worked: nothing reads what it makes any more)."""


class _Relay(Generic[T]):
    """One segment of a chain, run in a thread of its own: an iterator whose every item the
    thread computes when it is asked for."""

    def __init__(
        self, stages: Sequence[Callable[[Iterator[T]], Iterator[T]]], source: Iterator[T]
    ) -> None:
        self._requests: queue.Queue[str] = queue.Queue()
        self._replies: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._asked = False
        self._stopped = False
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run,
            args=(self._serve, stages, source),
            name="treestore-ops-segment",
            daemon=True,
        )
        self._thread.start()

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        if self._stopped:
            raise _Stopped
        self._asked = True
        self._requests.put(_ASK)
        kind, value = self._replies.get()
        self._asked = False
        if kind == _ITEM:
            return value  # type: ignore[no-any-return]
        if kind == _END:
            raise StopIteration
        raise value

    def stop(self) -> None:
        """Close the segment's stages in its thread, and end the thread. Waits for it
        unless it is still working on an item (the chain was interrupted while it waited)."""
        self._stopped = True
        self._requests.put(_STOP)
        if not self._asked:
            self._thread.join()

    def _serve(
        self, stages: Sequence[Callable[[Iterator[T]], Iterator[T]]], source: Iterator[T]
    ) -> None:
        stream: Iterator[T] | None = None
        try:
            while self._requests.get() == _ASK:
                try:
                    if stream is None:
                        stream = source
                        for stage in stages:
                            stream = stage(stream)
                    reply: tuple[str, Any] = (_ITEM, next(stream))
                except StopIteration:
                    reply = (_END, None)
                except BaseException as exc:  # handed to the thread that asked
                    reply = (_FAILED, exc)
                self._replies.put(reply)
        finally:
            close = getattr(stream, "close", None)
            # an error while closing has no one to go to: nothing reads this chain any more
            with contextlib.suppress(BaseException):
                if close is not None:
                    close()
            self._replies.put((_END, None))  # answers an ask that crossed the stop
