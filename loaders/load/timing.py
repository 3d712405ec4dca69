"""Where a load's time goes, by name: the driver's phases and each shard task's work.

One :class:`Timer` for both: a lap adds the seconds since the previous mark to a name
(so a name met several times accumulates), :meth:`Timer.phase` times a block, and
:meth:`Timer.waiting` books the time spent waiting for each input batch apart from
the time spent on it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

__all__ = ["Timer"]

T = TypeVar("T")


class Timer:
    """Seconds by name (rounded to milliseconds), in the order the names first came.

    >>> timer = Timer("input")
    >>> with timer.phase("prepare"):
    ...     pass
    >>> list(timer.seconds)
    ['input', 'prepare']
    """

    def __init__(self, *names: str) -> None:
        self.started = time.time()
        self.seconds: dict[str, float] = dict.fromkeys(names, 0.0)
        self.cpu_seconds: dict[str, float] = dict.fromkeys(names, 0.0)
        """The process's CPU seconds by the same names (its threads' and kernels' too)."""
        self.mark = time.perf_counter()
        self.cpu_mark = time.process_time()
        self._shared: dict[str, float] = {}  # the seconds given out by since_last_share
        self._cpu_shared: dict[str, float] = {}

    def lap(self, name: str) -> None:
        """Add the time since the previous mark to ``name``; mark now."""
        now, cpu = time.perf_counter(), time.process_time()
        self.seconds[name] = round(self.seconds.get(name, 0.0) + now - self.mark, 3)
        self.cpu_seconds[name] = round(self.cpu_seconds.get(name, 0.0) + cpu - self.cpu_mark, 3)
        self.mark, self.cpu_mark = now, cpu

    def since_last_share(self) -> dict[str, float]:
        """The seconds by name added since the previous call (all of them, the first time):
        shares of one clock that sum to its whole.

        >>> timer = Timer()
        >>> timer.seconds = {"records": 2.0, "write": 0.5}
        >>> first = timer.since_last_share()
        >>> timer.seconds = {"records": 2.0, "write": 0.75}
        >>> first, timer.since_last_share()
        ({'records': 2.0, 'write': 0.5}, {'records': 0.0, 'write': 0.25})
        """
        share = _difference(self.seconds, self._shared)
        self._shared = dict(self.seconds)
        return share

    def cpu_since_last_share(self) -> dict[str, float]:
        """As :meth:`since_last_share`, for the CPU seconds."""
        share = _difference(self.cpu_seconds, self._cpu_shared)
        self._cpu_shared = dict(self.cpu_seconds)
        return share

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block under ``name``."""
        self.mark, self.cpu_mark = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.lap(name)

    def waiting(
        self, items: Iterable[T], work: str = "records", wait: str = "input"
    ) -> Iterator[T]:
        """Yield ``items``, booking the time to get each under ``wait`` and the time the
        caller spends on it under ``work``."""
        iterator = iter(items)
        while True:
            self.lap(work)
            item = next(iterator, None)
            self.lap(wait)
            if item is None:
                return
            yield item


def _difference(now: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {name: round(value - before.get(name, 0.0), 3) for name, value in now.items()}
