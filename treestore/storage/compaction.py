"""When a tree's runs are merged: the compaction policy, as pure functions of run sizes.

Three moments decide (:class:`~treestore.storage.tree.ShardTree` does the merging):

- after a flush, a big load that spilled many runs merges them, to keep its lookups to
  a few runs (:func:`after_flush`);
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

from treestore.storage.runs import cache

__all__ = [
    "MAX_RUNS",
    "after_flush",
    "columnar_merge_limit",
    "own_runs_at_commit",
    "size_tiered",
]

MAX_RUNS = 6
"""More runs than this after a load trigger a compaction (of the newest, smaller runs)."""
_MERGE_ENTRY_BYTES = 128  # measured: columns, sort indices and copies while merging


def columnar_merge_limit() -> int:
    """Compactions of up to this many entries merge whole runs as columns in memory (fast;
    about the page cache's budget); bigger ones stream entry by entry. A load merges
    the runs it spilled at commit only up to this many entries."""
    return max(100_000, cache().budget // _MERGE_ENTRY_BYTES)


def after_flush(runs: int, has_base: bool, max_runs: int = MAX_RUNS) -> int:
    """How many newest runs to merge after a flush left ``runs`` runs: all but the base run
    (the oldest, when the tree had runs before this writer: ``has_base``) once there are
    more than twice ``max_runs``.

    >>> after_flush(13, has_base=True), after_flush(13, has_base=False), after_flush(12, True)
    (12, 13, 0)
    """
    if runs <= 2 * max_runs:
        return 0
    return runs - 1 if has_base else runs


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
