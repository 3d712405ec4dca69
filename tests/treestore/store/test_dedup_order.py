"""The dedup index orders (hash, key) pairs by a numpy hash sort, by key only where hashes tie;
a newer run merged into an older one is ordered as one sort of both."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from treestore.store import dedup_index
from treestore.store.dedup_index import IndexRun, ShardIndex, hash_order, sorted_run

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


def _run(pairs: list[tuple[int, str]]) -> IndexRun:
    table = sorted_run(
        np.array([h for h, _ in pairs], np.int64),
        pa.array([k.encode() for _, k in pairs], pa.large_binary()),
    )
    return IndexRun("", table.column("hash").to_numpy(), table.column("key").combine_chunks())


@settings(deadline=None)
@given(
    st.lists(st.tuples(st.integers(-50, 50), st.text(max_size=6)), unique=True, max_size=200),
    st.integers(0, 200),
)
def test_a_newer_run_merged_into_an_older_is_one_sort_of_both(
    pairs: list[tuple[int, str]], cut: int
) -> None:
    """Inserted in one pass where no hash is in both runs, sorted again where one is: the
    same run either way (distinct pairs, as a load adds them)."""
    older, newer = _run(pairs[:cut]), _run(pairs[cut:])
    merged = dedup_index._merged([older, newer])
    expected = _run(pairs)
    assert merged.hashes.tolist() == expected.hashes.tolist()
    assert merged.keys.to_pylist() == expected.keys.to_pylist()
    assert merged.keys.type == pa.large_binary()
    shared = set(older.hashes.tolist()) & set(newer.hashes.tolist())
    assert (dedup_index._inserted(older, newer) is None) == bool(shared)
