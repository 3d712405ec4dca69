"""Spark expressions that put records on their shards, shared by loads and index rebuilds."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from loaders.job.model import SourceSpec
from loaders.route.columns import SHARD
from treestore.spark import default_parallelism

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "BYTES_PER_TASK",
    "SHARD",
    "load_partitions",
    "partition_by_shard",
    "partition_of",
    "shard_column",
]

_PART = "__part"


def shard_column(frame: DataFrame, source: SourceSpec, shards: int) -> Column:
    """The record's shard: ``pmod(xxhash64(CAST(shard_by AS STRING)), shards)``."""
    from pyspark.sql import functions as F

    if not source.shard_by or shards <= 1:
        return F.lit(0)
    key = F.col(f"`{source.shard_by}`") if source.shard_by in frame.columns else F.lit(None)
    return F.pmod(F.xxhash64(key.cast("string")), F.lit(shards)).cast("int")


@cache
def _partition_keys(spark: SparkSession, shards: int) -> list[int]:
    """For each shard s, a value whose hash partition among ``shards`` partitions is s.

    ``repartition(n, col)`` sends a row to ``pmod(hash(col), n)``; keying rows by
    these values makes partition number == shard number.
    """
    from pyspark.sql import functions as F

    probe = spark.range(0, 64 * shards).select(
        "id", F.pmod(F.hash("id"), F.lit(shards)).alias("partition")
    )
    first: dict[int, int] = {}
    for row in probe.collect():
        first.setdefault(row["partition"], row["id"])
    missing = [s for s in range(shards) if s not in first]
    if missing:  # practically impossible with 64 candidates per shard
        raise RuntimeError(f"no partition key found for shards {missing}")
    return [first[s] for s in range(shards)]


def partition_of(shard: int, partitions: int) -> int:
    """The partition :func:`partition_by_shard` puts ``shard``'s records in, of
    ``partitions`` (at most the shard count)."""
    return shard % partitions


def partition_by_shard(
    spark: SparkSession, frame: DataFrame, shards: int, partitions: int | None = None
) -> DataFrame:
    """``frame`` (with a ``__shard`` column) repartitioned so that each shard's records are
    in one partition: partition number == shard, or, with fewer ``partitions``, shard
    ``s`` in partition ``s % partitions`` (a task then serves several shards)."""
    from pyspark.sql import functions as F

    count = min(shards, partitions or shards)
    keys = _partition_keys(spark, count)
    by_shard = [F.lit(keys[partition_of(s, count)]) for s in range(shards)]
    part = F.element_at(F.array(*by_shard), F.col(SHARD) + 1)
    return frame.withColumn(_PART, part).repartition(count, _PART).drop(_PART)


BYTES_PER_TASK = 32 << 20
"""A load's input bytes per shard task: a smaller load runs fewer tasks than shards."""


def load_partitions(spark: SparkSession, shards: int, input_bytes: int) -> int:
    """How many shard tasks a load of ``input_bytes`` runs: one per shard for a big load;
    for a small one (a follower's micro-batch) one per :data:`BYTES_PER_TASK`, but at least
    as many as Spark runs at once, since each task costs tens of milliseconds to start."""
    wanted = max(default_parallelism(spark), -(-input_bytes // BYTES_PER_TASK))
    return min(shards, wanted)
