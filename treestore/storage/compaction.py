"""When a tree's runs are merged: the compaction policy, as pure functions of run sizes.

Three moments decide (:class:`~treestore.storage.tree.ShardTree` does the merging):

- after a flush, a load that spilled runs merges them size-tiered, :data:`FAN_IN` of
  a size at a time, to keep its lookups to a few runs and its rewrites to a few per
  entry (:func:`after_flush`);
- at commit, the runs one writer spilled become one, when they fit in memory
  (:func:`own_runs_at_commit`);
- then, with more than :data:`MAX_RUNS` runs, compaction is size-tiered: the longest
  group of newest runs that together are smaller than the run before them is merged
  (small deltas of later loads, without rewriting the big runs of earlier ones), or
  every run when no such group exists (:func:`size_tiered`).

Each returns how many of the newest runs to merge into one (0: none).

>>> size_tiered([900, 500, 400, 30, 20, 10, 5], max_runs=6)
5
>>> size_tiered([10, 20, 30], max_runs=6)
0
"""

from __future__ import annotations

from collections.abc import Sequence

from treestore.storage.page_cache import cache

__all__ = [
    "FAN_IN",
    "MAX_RUNS",
    "after_flush",
    "columnar_merge_limit",
    "own_runs_at_commit",
    "size_tiered",
]

MAX_RUNS = 6
"""More runs than this after a load trigger a compaction (of the newest, smaller runs)."""
FAN_IN = 4
"""Runs a load merges at a time as it spills (:func:`after_flush`)."""
_MERGE_ENTRY_BYTES = 128  # measured: columns, sort indices and copies while merging


def columnar_merge_limit() -> int:
    """Compactions of up to this many entries merge whole runs as columns in memory (fast;
    about the page cache's budget); bigger ones stream entry by entry. A load merges
    the runs it spilled at commit only up to this many entries."""
    return max(100_000, cache().budget // _MERGE_ENTRY_BYTES)


def after_flush(entries: Sequence[int], fan_in: int = FAN_IN) -> int:
    """How many of a writer's newest runs to merge after a flush, given the entries of the
    runs it wrote (oldest first): the longest group of two or more newest runs whose
    oldest holds at most ``1 / (fan_in - 1)`` of the others together.

    Runs of one size are merged ``fan_in`` at a time, and the merged runs ``fan_in`` at a
    time again, so a load writes each entry about ``log(flushes) / log(fan_in)`` times and
    keeps a few runs of each size, whatever its size. Each run left holds more than a
    third of the newer ones together, so their number grows with the log of the load's
    size too.

    >>> after_flush([1, 1, 1]), after_flush([1, 1, 1, 1]), after_flush([16, 4, 4, 4, 4])
    (0, 4, 4)
    >>> after_flush([16, 4, 4, 4, 1, 1, 1, 1])  # the small ones and those they match
    7
    """
    return max(
        (
            n
            for n in range(2, len(entries) + 1)
            if (fan_in - 1) * entries[-n] <= sum(entries[-n + 1 :])
        ),
        default=0,
    )


def own_runs_at_commit(entries: Sequence[int], merge_limit: int) -> int:
    """How many newest runs to merge at commit: the runs this writer spilled (their
    ``entries``), when there are several and together they hold at most ``merge_limit``
    entries (the flushes of one load overlap: reads would merge them every time).

    >>> own_runs_at_commit([300, 300, 100], 1000), own_runs_at_commit([300, 800], 1000)
    (3, 0)
    """
    return len(entries) if len(entries) > 1 and sum(entries) <= merge_limit else 0


def size_tiered(sizes: Sequence[int], max_runs: int = MAX_RUNS) -> int:
    """How many newest runs to merge when a tree has runs of ``sizes`` bytes (oldest
    first): none up to ``max_runs`` runs; beyond, the longest group of two or more newest
    runs smaller together than the run before them, or every run."""
    if len(sizes) <= max_runs:
        return 0
    return max(
        (n for n in range(2, len(sizes)) if sum(sizes[-n:]) < sizes[-n - 1]),
        default=len(sizes),
    )
