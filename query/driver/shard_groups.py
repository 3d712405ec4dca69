"""A query's shards cut into its Spark tasks: a task per core, each over consecutive shards
of about equal size.

A task per core and no more: on 2 cores, four tasks of four shards each ran the seed's
answer in two waves, with 0.1-0.15 s between them (a task's start and its first tree
opened) where two tasks of eight ran straight through. Cutting by the shards' nodes
rather than by their number keeps one big shard from holding up the others' core.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from treestore.storage.tree import ShardState

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["shard_frame", "shard_groups"]


def shard_groups(
    shards: Sequence[int], states: Mapping[int, ShardState], count: int
) -> list[tuple[int, ...]]:
    """``shards`` (in their order) cut into at most ``count`` groups of consecutive shards,
    each about the same number of nodes (a shard counts one more than its nodes, so empty
    shards are spread too); no group is empty.

    >>> states = {s: ShardState(nodes=n) for s, n in enumerate([20, 1, 1, 1, 1, 1, 1, 1])}
    >>> shard_groups(range(8), states, 2)
    [(0,), (1, 2, 3, 4, 5, 6, 7)]
    >>> shard_groups(range(8), {s: ShardState(nodes=5) for s in range(8)}, 2)
    [(0, 1, 2, 3), (4, 5, 6, 7)]
    >>> shard_groups([3, 5, 7], states, 8)
    [(3,), (5,), (7,)]
    """
    shards = list(shards)
    count = max(1, min(count, len(shards)))
    if count == 1:
        return [tuple(shards)] if shards else []
    weights = np.array([states[s].nodes + 1 for s in shards], np.float64)
    ends = np.concatenate([[0.0], np.cumsum(weights)])  # the weight before each shard
    targets = ends[-1] * np.arange(1, count) / count
    after = np.searchsorted(ends, targets)  # each cut at the boundary nearest its share
    nearer = np.where(targets - ends[after - 1] < ends[after] - targets, after - 1, after)
    bounds = [0]
    for cut in nearer.tolist():
        # at least one shard per group, and one left for each group still to come
        least, most = bounds[-1] + 1, len(shards) - (count - len(bounds))
        bounds.append(min(max(cut, least), most))
    bounds.append(len(shards))
    return [tuple(shards[a:b]) for a, b in itertools.pairwise(bounds) if b > a]


def shard_frame(spark: SparkSession, groups: list[tuple[int, ...]]) -> DataFrame:
    """One partition per group, holding its shards' numbers in order (column ``shard``)."""
    from pyspark.sql import functions as F

    per_group = F.array(*[F.array(*[F.lit(s) for s in group]) for group in groups])
    shards = F.element_at(per_group, (F.col("id") + 1).cast("int")).cast("array<int>")
    return spark.range(0, len(groups), 1, len(groups)).select(F.explode(shards).alias("shard"))
