"""The dedup index orders (hash, key) pairs by a numpy hash sort, by key only where hashes tie."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given
from hypothesis import strategies as st

from treestore.store.dedup_index import ShardIndex, hash_order

_PAIRS = st.lists(st.tuples(st.integers(-2, 2), st.sampled_from(["a", "b", "c", ""])), max_size=40)


@given(_PAIRS)
def test_hash_order_sorts_by_hash_then_key_then_position(pairs: list[tuple[int, str]]) -> None:
    hashes = np.array([h for h, _ in pairs], dtype=np.int64)
    keys = pa.array([k.encode() for _, k in pairs], pa.large_binary())
    table = pa.table({"hash": hashes, "key": keys, "row": np.arange(len(pairs))})
    expected = pc.sort_indices(
        table, [("hash", "ascending"), ("key", "ascending"), ("row", "ascending")]
    )
    assert hash_order(hashes, keys).tolist() == expected.to_pylist()


@given(_PAIRS)
def test_first_of_batch_marks_each_pairs_first_row(pairs: list[tuple[int, str]]) -> None:
    hashes = np.array([h for h, _ in pairs], dtype=np.int64)
    keys = pa.array([k.encode() for _, k in pairs], pa.large_binary())
    seen: set[tuple[int, str]] = set()
    expected = []
    for pair in pairs:
        expected.append(pair not in seen)
        seen.add(pair)
    assert ShardIndex.first_of_batch(hashes, keys).tolist() == expected
