"""A process that may not grow a file past a size: a full disk as a JVM meets it
(``java.io.IOException: File too large``), for a classic session's JVM or a Spark
Connect server's."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

__all__ = ["file_size_limit"]


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


@contextmanager
def file_size_limit(jvm: int, size: int) -> Iterator[None]:
    """The process ``jvm`` (and what it starts meanwhile) may not grow a file past ``size``
    bytes inside the block; afterwards none of them has the limit."""
    unlimited = resource.prlimit(jvm, resource.RLIMIT_FSIZE)
    resource.prlimit(jvm, resource.RLIMIT_FSIZE, (size, unlimited[1]))
    try:
        yield
    finally:
        for pid in _descendants(jvm):  # a Python worker daemon started meanwhile, too
            with suppress(ProcessLookupError):
                resource.prlimit(pid, resource.RLIMIT_FSIZE, unlimited)
