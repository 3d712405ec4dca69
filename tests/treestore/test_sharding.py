"""Shards and key hashes computed in Python (compiled, over Arrow arrays) are Spark's own:
``pmod(xxhash64(key), shards)`` and ``xxhash64(key)``, for any text, empty and null."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treestore import native
from treestore.native import shards_of
from treestore.sharding import HASH_SEED, shard_of

TEXTS = st.lists(st.one_of(st.none(), st.text(max_size=80)), max_size=60)


@settings(deadline=None)
@given(TEXTS, st.integers(1, 40))
def test_shards_of_an_array_are_shard_of_each_key(keys: list[str | None], shards: int) -> None:
    assert shards_of(pa.array(keys, pa.string()), shards).tolist() == [
        shard_of(k, shards) for k in keys
    ]


def test_large_strings_and_slices_hash_as_their_values() -> None:
    keys = pa.array(["a", "bb", None, "c" * 100, "ü😀"], pa.large_string())
    assert shards_of(keys.slice(1), 7).tolist() == [shard_of(k, 7) for k in keys.to_pylist()[1:]]


@pytest.mark.spark
def test_they_are_sparks_hashes(spark: Any) -> None:
    from pyspark.sql import functions as F

    keys = ["", "a", "12345", "u408803", "ü€😀", "x" * 31, "y" * 32, "z" * 33, "w" * 200, None]
    keys += [f"{i}-{'é' * (i % 40)}" for i in range(300)]
    frame = spark.createDataFrame([(i, k) for i, k in enumerate(keys)], "i int, k string")
    rows = frame.select(
        "i", F.xxhash64("k").alias("h"), F.pmod(F.xxhash64("k"), F.lit(13)).alias("s")
    ).collect()
    spark_rows = sorted((r["i"], r["h"], r["s"]) for r in rows)
    array = pa.array(keys, pa.string())
    hashes, shards = native.xxhash64(array, HASH_SEED), shards_of(array, 13)
    assert [(h, s) for _, h, s in spark_rows] == list(
        zip(hashes.tolist(), shards.tolist(), strict=True)
    )
