"""The paged shard tree, run against both page stores (memory and disk)."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import treestore.storage.tree as tree_module
from treestore.errors import CorruptPageError
from treestore.storage import page_cache, runs
from treestore.storage.entries import ChildColumns, insertion_points
from treestore.storage.keyfilter import KeyHashes
from treestore.storage.memtable import Memtable
from treestore.storage.pagestore import FilePageStore, MemoryPageStore, PageStore
from treestore.storage.tree import ANY_AGE, Handle, Handles, ShardTree, build_tree

NAMES = ["b", "a", "\uff61", "\U0001f600", "B", "é", "aa", "a\x00"]


@pytest.fixture(params=["memory", "disk"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> PageStore:
    """Every tree test runs against the in-memory and the on-disk page store."""
    return MemoryPageStore() if request.param == "memory" else FilePageStore(tmp_path / "store")


@pytest.fixture
def fresh_cache() -> Iterator[page_cache.PageCache]:
    yield page_cache.reset_cache(64 * 1024 * 1024)
    page_cache.reset_cache(256 * 1024 * 1024)


def _names(tree: ShardTree, *path: str) -> list[str]:
    node = tree.root
    for name in path:
        found = tree.child(node, name)
        assert found is not None
        node = found
    return [child.name for child in tree.children(node)]


def test_children_come_in_utf8_byte_order(store: PageStore) -> None:
    tree = build_tree(store, [["root", n] for n in NAMES])
    names = _names(tree, "root")
    assert names == sorted(NAMES, key=lambda n: n.encode("utf-8"))
    # U+FF61 sorts before U+1F600 in UTF-8 (and code points), after it in UTF-16.
    assert names.index("\uff61") < names.index("\U0001f600")


def test_hits_child_counts_and_lookups(store: PageStore) -> None:
    tree = build_tree(store, [["root", "x", "1"], ["root", "x", "2"], ["root", "y"]])
    root = tree.child(tree.root, "root")
    assert root is not None and (root.hits, root.child_count) == (3, 2)
    x = tree.child(root, "x")
    assert x is not None and (x.hits, x.child_count) == (2, 2)
    assert tree.child(root, "z") is None
    assert tree.root.child_count == 1
    assert [(p, n.hits) for p, n in tree.walk()] == [
        (("root",), 3),
        (("root", "x"), 2),
        (("root", "x", "1"), 1),
        (("root", "x", "2"), 1),
        (("root", "y"), 1),
    ]


def test_update_only_visits_existing_nodes(store: PageStore) -> None:
    tree = ShardTree(store)
    root = tree.visit(tree.root_handle, "root")
    assert root is not None
    assert tree.visit(root, "missing", create=False) is None
    assert tree.visit(root, "there") is not None
    assert tree.visit(root, "there", create=False) is not None
    again = ShardTree(store, tree.commit())
    assert [(n.name, n.hits) for n in again.children(again.child(again.root, "root"))] == [
        ("there", 2)
    ]  # type: ignore[arg-type]


def test_later_loads_add_runs_that_merge(store: PageStore) -> None:
    first = build_tree(store, [["root", "u1", "a"], ["root", "u2", "a"]])
    second = ShardTree(store, first.state)
    for path in (["root", "u1", "a"], ["root", "u1", "b"], ["root", "u3"]):
        handle = second.root_handle
        for name in path:
            handle = second.visit(handle, name)  # type: ignore[assignment]
    state = second.commit()
    assert len(state.runs) == 2 and state.runs[0] == first.state.runs[0]  # the base run is shared
    assert state.nodes == 7
    merged = ShardTree(store, state)
    expected = [
        (("root",), 5),
        (("root", "u1"), 3),
        (("root", "u1", "a"), 2),
        (("root", "u1", "b"), 1),
        (("root", "u2"), 1),
        (("root", "u2", "a"), 1),
        (("root", "u3"), 1),
    ]
    assert [(p, n.hits) for p, n in merged.walk()] == expected
    assert merged.child(merged.root, "root").child_count == 3  # type: ignore[union-attr]
    merged.compact()
    assert len(merged.readers) == 1
    assert [(p, n.hits) for p, n in merged.walk()] == expected


def test_many_runs_trigger_compaction(store: PageStore) -> None:
    state = build_tree(store, [["root", "0"]]).state
    for i in range(1, 12):
        tree = ShardTree(store, state)
        tree.visit(tree.visit(tree.root_handle, "root"), str(i))  # type: ignore[arg-type]
        state = tree.commit()
        assert len(state.runs) <= tree_module.MAX_RUNS
    assert _names(ShardTree(store, state), "root") == sorted(str(i) for i in range(12))


def test_a_loads_flushes_become_one_run_at_commit(store: PageStore) -> None:
    tree = ShardTree(store)
    tree.memtable_limit = 300  # a load that spills into several runs
    for i in range(1495):
        handle = tree.visit(tree.root_handle, f"n{i % 700:05d}")
        assert handle is not None
        tree.update_data(handle, lambda data, i=i: data.update(last=i))
    assert len(tree.stats.runs_written) > 2  # spilled (and merged as it went)
    state = tree.commit()
    assert len(state.runs) == 1
    merged = ShardTree(store, state)
    nodes = list(merged.children(merged.root))
    assert [n.name for n in nodes] == [f"n{i:05d}" for i in range(700)]
    assert sum(n.hits for n in nodes) == 1495
    assert merged.root.child_count == 700
    assert all(n.data == {"last": max(range(int(n.name[1:]), 1495, 700))} for n in nodes)


def test_compaction_merges_small_new_runs_not_big_old_ones(store: PageStore) -> None:
    state = None
    for load in range(5):  # five big loads, one run each
        tree = ShardTree(store, state)
        for i in range(299 * load, 299 * (load + 1)):
            tree.visit(tree.root_handle, f"n{i:05d}")
        state = tree.commit()
    assert state is not None
    big = state.runs
    assert len(big) == 5
    for i in range(4):  # small loads add small deltas; the sixth run and on are merged
        small = ShardTree(store, state)
        small.visit(small.root_handle, f"n{i:05d}")
        state = small.commit()
    assert state.runs[:5] == big and len(state.runs) == 6  # the big runs were not rewritten
    final = ShardTree(store, state)
    assert sum(n.hits for n in final.children(final.root)) == 1499


def test_pages_split_at_their_size_and_reads_touch_only_needed_pages(
    store: PageStore, fresh_cache: page_cache.PageCache
) -> None:
    names = [f"n{i:04d}" for i in range(500)]
    tree = build_tree(store, [["root", n] for n in names], page_bytes=256)
    reader = tree.readers[0]
    assert len(reader.pages) > 20
    # every boundary: the last entry of a page and the first of the next are found
    root = tree.child(tree.root, "root")
    assert root is not None
    for info in reader.pages:
        for key in (info.first, info.last):
            if key[0] == root.id:
                assert tree.child(root, key[1]) is not None
    assert _names(tree, "root") == names
    fresh_cache.clear()
    assert tree.child(root, "n0321") is not None
    assert fresh_cache.misses == 1  # one page read for one child
    fresh_cache.clear()
    ranged = [n.name for n in tree.children(root, "n0100", "n0110")]
    assert ranged == names[100:110]
    assert fresh_cache.misses <= 2
    fresh_cache.clear()
    prefixed = [n.name for n in tree.children(root, "n049", "n04:")]
    assert prefixed == names[490:500]
    assert fresh_cache.misses <= 2


def _flip_byte(store: PageStore, name: str, offset: int) -> None:
    data = bytearray(store.read(name))
    data[offset] ^= 0x55
    store.write(name, bytes(data))


def test_a_flipped_byte_is_detected_with_file_shard_and_page(
    store: PageStore, fresh_cache: page_cache.PageCache
) -> None:
    tree = build_tree(store, [["root", f"n{i:04d}"] for i in range(300)], shard=5, page_bytes=512)
    run = tree.state.runs[0]
    third_page = tree.readers[0].pages[2]
    _flip_byte(store, f"{run}.pages", third_page.offset + 3)
    fresh_cache.clear()
    reread = ShardTree(store, tree.state, shard=5)
    with pytest.raises(CorruptPageError) as caught:
        list(reread.walk())
    message = str(caught.value)
    assert "Shard 5" in message and "page 2" in message and f"{run}.pages" in message
    for whole_read in (reread.all_columns, lambda: reread.readers[0].all_columns(True)):
        with pytest.raises(CorruptPageError, match="page 2"):  # a scan's whole-run read too
            whole_read()
    _flip_byte(store, f"{run}.index", 10)
    with pytest.raises(CorruptPageError, match="index"):
        ShardTree(store, tree.state, shard=5)


def test_memory_stays_within_the_cache_on_a_shard_ten_times_bigger(store: PageStore) -> None:
    paths = [["root", f"user{i:06d}", "A", str(i % 7)] for i in range(20000)]
    tree = build_tree(store, paths, page_bytes=4096)
    cache = page_cache.reset_cache(256 * 1024)
    try:
        decoded_size = sum(r.size_bytes for r in tree.readers) * 8
        assert decoded_size > 10 * cache.budget
        cache.clear()
        assert sum(1 for _ in tree.walk()) == 60001
        assert 0 < cache.peak_bytes <= cache.budget
    finally:
        page_cache.reset_cache(256 * 1024 * 1024)


def test_updating_a_tree_bigger_than_the_cache_stays_within_it(store: PageStore) -> None:
    cache = page_cache.reset_cache(256 * 1024)
    try:
        paths = [["root", f"user{i:06d}", "A", str(i % 7)] for i in range(6000)]
        tree = build_tree(store, paths, page_bytes=2048)  # many memtable flushes and merges
        assert sum(r.size_bytes for r in tree.readers) * 8 > 2 * cache.budget
        assert 0 < cache.peak_bytes <= cache.budget
        updated = ShardTree(store, tree.state)
        for i in range(0, 6000, 3):
            updated.visit(updated.visit(updated.root_handle, "root"), f"user{i:06d}")  # type: ignore[arg-type]
        state = updated.commit()
        final = ShardTree(store, state)
        root = final.child(final.root, "root")
        assert root is not None and root.hits == 8000 and root.child_count == 6000
        assert final.child(root, "user000003").hits == 2  # type: ignore[union-attr]
        assert final.child(root, "user000004").hits == 1  # type: ignore[union-attr]
        assert cache.peak_bytes <= cache.budget
    finally:
        page_cache.reset_cache(256 * 1024 * 1024)


_NAME = st.sampled_from(["a", "b", "c", "d", "\u00e9", "ab"])


@given(
    st.lists(st.tuples(_NAME, _NAME), max_size=30),
    st.lists(st.tuples(_NAME, _NAME), max_size=10),
    st.lists(st.tuples(_NAME, _NAME, st.integers(1, 3)), max_size=40),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_visit_many_is_visit_one_by_one(
    base: list[tuple[str, str]],
    earlier: list[tuple[str, str]],
    batch: list[tuple[str, str, int]],
    create: bool,
    once: bool,
    floor_now: bool,
) -> None:
    """Bulk visits (stored nodes found as columns) give what single visits give."""
    store = MemoryPageStore()
    state = build_tree(store, [list(path) for path in base], page_bytes=128).state
    trees = []
    for _ in range(2):
        tree = ShardTree(store, state, page_bytes=128)
        for top, name in earlier:  # some nodes in the memtable before the batch
            handle = tree.visit(tree.root_handle, top)
            assert handle is not None
            tree.visit(handle, name)
        trees.append(tree)
    created_before = trees[0].next_id if floor_now else ANY_AGE
    pairs = list({(top, name): hits for top, name, hits in batch}.items())
    results = []
    for number, tree in enumerate(trees):
        parents = []
        for (top, _name), _hits in pairs:
            handle = tree.visit(tree.root_handle, top)
            assert handle is not None
            parents.append(handle)
        names = [name for (_top, name), _hits in pairs]
        hits = [h for _key, h in pairs]
        results.append(
            _visits(tree, number == 0, parents, names, hits, create, once, created_before)
        )
    assert results[0] == results[1]
    assert _memtable_entries(trees[0]) == _memtable_entries(trees[1])
    assert (trees[0].next_id, trees[0].stats) == (trees[1].next_id, trees[1].stats)


def _visits(
    tree: ShardTree,
    bulk: bool,
    parents: list[Handle],
    names: list[str],
    hits: list[int],
    create: bool,
    once: bool,
    created_before: int = ANY_AGE,
) -> list[Handle | None]:
    """The children ``names[i]`` of ``parents[i]`` visited in one bulk call or one by one."""
    if not bulk:
        return [
            tree.visit(p, n, create, h, once, created_before)
            for p, n, h in zip(parents, names, hits, strict=True)
        ]
    ids = tree.visit_many(
        Handles.of(parents), np.arange(len(parents)), names, create, np.array(hits), once,
        created_before,
    )  # fmt: skip
    keys = [(p[0], n) for p, n in zip(parents, names, strict=True)]
    return [(i, k) if i >= 0 else None for i, k in zip(ids.tolist(), keys, strict=True)]


def _memtable_entries(tree: ShardTree) -> list[tuple[object, ...]]:
    columns = tree.memtable.columns()
    return list(
        zip(
            columns.parents.tolist(),
            columns.names.to_pylist(),
            columns.ids.tolist(),
            columns.hits.tolist(),
            columns.counts.tolist(),
            strict=True,
        )
    )


@given(
    lengths=st.lists(st.integers(1, 5000), max_size=60),
    block_bytes=st.integers(1, 20_000),
)
def test_blocks_of_pages_fill_to_their_size_and_cover_every_page_once(
    lengths: list[int], block_bytes: int
) -> None:
    bounds = list(runs.block_bounds(np.array(lengths, dtype=np.int64), block_bytes))
    assert [i for start, stop in bounds for i in range(start, stop)] == list(range(len(lengths)))
    for n, (start, stop) in enumerate(bounds):
        assert stop > start
        assert sum(lengths[start : stop - 1]) < block_bytes  # no page past a full block
        if n < len(bounds) - 1:
            assert sum(lengths[start:stop]) >= block_bytes  # only the last one may be short


def test_a_run_read_in_blocks_gives_every_entry_once(store: PageStore) -> None:
    tree = ShardTree(store, page_bytes=256)
    for i in range(500):
        handle = tree.visit(tree.root_handle, f"n{i:05d}")
        assert handle is not None
        if i % 3 == 0:
            tree.update_data(handle, lambda data, i=i: data.update(at=i))
    reader = ShardTree(store, tree.commit()).readers[0]
    whole = reader.all_columns(with_data=True)
    blocks = list(reader.column_blocks(with_data=True, block_bytes=1000))
    assert len(blocks) > 5 and all(len(block) for block in blocks)
    assert np.concatenate([b.ids for b in blocks]).tolist() == whole.ids.tolist()
    assert [n for b in blocks for n in b.names.to_pylist()] == whole.names.to_pylist()
    assert [d for b in blocks for d in b.data or []] == whole.data
    assert whole.data is not None and whole.data[4] == {"at": 3}  # after the internal root


def test_past_the_memory_limit_spilled_runs_stay_and_merges_stream(store: PageStore) -> None:
    with mock.patch.object(tree_module, "columnar_merge_limit", return_value=50):
        tree = ShardTree(store, page_bytes=256)
        tree.memtable_limit = 300
        for i in range(1000):
            tree.visit(tree.root_handle, f"n{i % 700:05d}")
        state = tree.commit()
        assert len(state.runs) > 1  # too big to merge in memory: left for reads to merge
        merged = ShardTree(store, state)
        merged.compact()  # streams, entry by entry
        assert len(merged.readers) == 1
    nodes = list(merged.children(merged.root))
    assert [n.name for n in nodes] == [f"n{i:05d}" for i in range(700)]
    assert sum(n.hits for n in nodes) == 1000 and merged.root.child_count == 700


def test_memtable_columns_come_in_key_order_with_their_data() -> None:
    table = Memtable()
    keys = [(5, "b"), (2, "\U0001f600"), (5, "a"), (2, "\uff61")]
    table.add(_keys(keys), np.array([10, 11, 12, 13]), np.array([1, 2, 3, 4]), np.zeros(4))
    slot = table.add_one((1, "z"), 14, 5, 0)
    table.data[slot] = {"d": 1}
    table.add_hits(np.array([0, slot]), np.array([10, 10]))
    table.add_counts(np.array([2]), np.array([7]))
    columns = table.columns()
    assert list(zip(columns.parents.tolist(), columns.names.to_pylist(), strict=True)) == [
        (1, "z"),
        (2, "\uff61"),  # UTF-8 byte order: U+FF61 before U+1F600
        (2, "\U0001f600"),
        (5, "a"),
        (5, "b"),
    ]
    assert columns.ids.tolist() == [14, 13, 11, 12, 10]
    assert columns.hits.tolist() == [15, 4, 2, 3, 11]
    assert columns.counts.tolist() == [0, 0, 0, 7, 0]
    assert columns.data == [{"d": 1}, None, None, None, None]
    assert table.slots(_keys([(5, "a"), (5, "c")])).tolist() == [2, -1]
    assert (table.slot((1, "z")), table.slot((1, "y"))) == (slot, None)


def _keys(pairs: list[tuple[int, str]], folded: list[int] | None = None) -> KeyHashes:
    """Keys as the memtable takes them (``folded``: hashes forced, to make them collide)."""
    hashes = None if folded is None else np.array(folded, dtype=np.uint64)
    return KeyHashes(np.array([p for p, _ in pairs], dtype=np.int64), [n for _, n in pairs], hashes)


def test_memtable_keys_whose_hashes_collide_stay_apart() -> None:
    """Equal hashes are not equal keys: each lookup is confirmed on the parent and the
    name, and probes on past a different key (all six keys share one hash here)."""
    table = Memtable()
    pairs = [(1, "a"), (2, "a"), (1, "b"), (1, "ab"), (1, "é"), (3, "")]
    table.add(_keys(pairs[:4], [7] * 4), np.arange(4), np.zeros(4), np.zeros(4))
    wanted = [pairs[3], pairs[0], pairs[4], pairs[2], pairs[5], pairs[1]]
    assert table.slots(_keys(wanted, [7] * 6)).tolist() == [3, 0, -1, 2, -1, 1]
    with pytest.raises(ValueError, match="twice"):  # repeated among colliding hashes
        twice = _keys([pairs[4], pairs[5], pairs[4]], [7] * 3)
        table.add(twice, np.arange(3), np.zeros(3), np.zeros(3))
    table.add(_keys([pairs[4], pairs[5]], [7] * 2), np.array([4, 5]), np.zeros(2), np.zeros(2))
    assert table.slots(_keys(wanted, [7] * 6)).tolist() == [3, 0, 4, 2, 5, 1]
    assert table.columns().ids.tolist() == [0, 3, 2, 4, 1, 5]


@given(
    batches=st.lists(
        st.lists(st.tuples(st.integers(-2, 40), st.text(max_size=3)), max_size=300, unique=True),
        max_size=6,
    ),
    singles=st.lists(st.tuples(st.integers(-2, 40), st.text(max_size=3)), max_size=20),
)
def test_memtable_finds_what_a_dict_finds(
    batches: list[list[tuple[int, str]]], singles: list[tuple[int, str]]
) -> None:
    """Batches and single keys added, through the key index's growth (past 512 keys):
    every lookup, one key at a time or many, agrees with a dict of the keys added."""
    table, expected = Memtable(), {}
    for batch, single in zip(batches, [*singles, *[None] * len(batches)], strict=False):
        new = [key for key in batch if key not in expected]
        table.add(_keys(new), np.arange(len(new)), np.zeros(len(new)), np.zeros(len(new)))
        expected.update((key, len(expected)) for key in new)
        if single is not None and single not in expected:
            assert table.add_one(single, 0, 0, 0) == len(expected)
            expected[single] = len(expected)
        probe = [*batch, *singles, (99, "x")]
        # one at a time first: the single keys are not in the key index yet
        assert [table.slot(k) for k in probe] == [expected.get(k) for k in probe]
        assert table.slots(_keys(probe)).tolist() == [expected.get(k, -1) for k in probe]
        assert [table.slot(k) for k in probe] == [expected.get(k) for k in probe]
    assert len(table) == len(expected)
    table.clear()  # emptied, the key index keeps its size: nothing is found, all adds again
    keys = list(expected)
    assert (table.slots(_keys(keys)) == -1).all() and all(table.slot(k) is None for k in keys)
    table.add(_keys(keys[::-1]), np.arange(len(keys)), np.zeros(len(keys)), np.zeros(len(keys)))
    assert table.slots(_keys(keys)).tolist() == list(range(len(keys)))[::-1]


def test_memtable_refuses_a_key_twice() -> None:
    table = Memtable()
    with pytest.raises(ValueError, match="twice"):
        table.add(_keys([(1, "a"), (1, "a")]), np.array([2, 3]), np.zeros(2), np.zeros(2))
    assert not table


def test_data_of_nodes_flushed_since_their_visit_still_lands(store: PageStore) -> None:
    tree = ShardTree(store)
    tree.memtable_limit = 8  # the visit goes in two pieces of 4; a flush follows the second
    root = Handles.of([tree.root_handle])
    names = [f"n{i}" for i in range(8)]
    ids = tree.visit_many(root, np.zeros(8, dtype=np.int64), names, hits=np.full(8, 2))
    keys = [(0, name) for name in names]
    assert len(tree.readers) == 1  # flushed: only the internal root stays (their parent)
    assert len(tree.memtable) == tree.memtable.kept == 1 and tree.memtable.slot((-1, "")) == 0
    for node_id, key in zip(ids.tolist(), keys, strict=True):
        tree.update_data((node_id, key), lambda data, key=key: data.update(name=key[1]))
    state = tree.commit()
    nodes = list(ShardTree(store, state).children(ShardTree(store, state).root))
    assert [(n.name, n.hits, n.data) for n in nodes] == [(n, 2, {"name": n}) for n in names]
    assert ShardTree(store, state).root.child_count == 8


def _handle_of(tree: ShardTree, path: tuple[str, ...]) -> tuple[int, tuple[int, str]] | None:
    """The handle of the committed node at ``path`` (no memtable change), or None."""
    node, key = tree.root, tree.root_handle[1]
    for name in path:
        child = tree.child(node, name)
        if child is None:
            return None
        node, key = child, (node.id, name)
    return (node.id, key)


def _committed(tree: ShardTree) -> list[tuple[object, ...]]:
    final = ShardTree(tree.pages, tree.commit())
    return [(path, n.id, n.hits, n.child_count) for path, n in final.walk()]


@given(
    st.lists(st.lists(_NAME, min_size=1, max_size=3), max_size=20),
    st.lists(
        st.tuples(st.lists(_NAME, max_size=2), _NAME, st.integers(0, 3)), min_size=1, max_size=30
    ),
    st.booleans(),
    st.booleans(),
    st.sampled_from([3, 1000]),
)
@example([["a"]], [(["a"], "x", 1), ([], "a", 1)], True, False, 1000)  # a child before its parent
def test_visit_many_with_parents_among_its_keys_and_flushes(
    base: list[list[str]],
    batch: list[tuple[list[str], str, int]],
    create: bool,
    once: bool,
    limit: int,
) -> None:
    """Keys whose parent is another key of the same call, parents the memtable lacks, zero
    hits, and flushes in the middle (a small limit) still give what single visits give."""
    store = MemoryPageStore()
    state = build_tree(store, base, page_bytes=128).state
    trees = [ShardTree(store, state, page_bytes=128) for _ in range(2)]
    handles, names, hits, seen = [], [], [], set()
    for path, name, weight in batch:
        handle = _handle_of(trees[0], tuple(path))
        if handle is not None and (handle[0], name) not in seen:
            seen.add((handle[0], name))
            handles.append(handle)
            names.append(name)
            hits.append(weight)
    results = []
    for number, tree in enumerate(trees):
        tree.memtable_limit = limit
        results.append(_visits(tree, number == 0, handles, names, hits, create, once))
    assert results[0] == results[1]
    if limit > len(handles) * 2:  # no flush on either side: the memtables are the same
        assert _memtable_entries(trees[0]) == _memtable_entries(trees[1])
        assert trees[0].stats == trees[1].stats
    assert trees[0].next_id == trees[1].next_id
    assert _committed(trees[0]) == _committed(trees[1])


def test_visit_many_refuses_repeated_keys_and_changes_nothing(store: PageStore) -> None:
    tree = ShardTree(store)
    root = Handles.of([tree.root_handle])
    with pytest.raises(ValueError, match="distinct"):
        tree.visit_many(root, np.zeros(2, dtype=np.int64), ["a", "a"])
    assert not tree.memtable and tree.next_id == 1 and tree.stats.nodes_created == 0
    tree.visit(tree.root_handle, "a")
    with pytest.raises(ValueError, match="distinct"):  # repeated keys the memtable holds
        tree.visit_many(root, np.zeros(3, dtype=np.int64), ["a", "b", "a"])
    assert _memtable_entries(tree) == [(-1, "", 0, 0, 1), (0, "a", 1, 1, 0)]
    assert tree.next_id == 2


def test_a_first_build_updates_no_node_not_even_the_internal_root(store: PageStore) -> None:
    tree = ShardTree(store)
    root = Handles.of([tree.root_handle])
    tree.visit_many(root, np.zeros(3, dtype=np.int64), ["a", "b", "c"])
    tree.flush()  # the internal root's entry is written; the next child pulls it in again
    tree.visit(tree.root_handle, "d")
    tree.visit_many(root, np.zeros(1, dtype=np.int64), ["e"])
    assert (tree.stats.nodes_created, tree.stats.nodes_updated) == (5, 0)


_NAMES = ["a", "b", "c", "é", "zz", "abcdefgh", "abcdefghi", "abcdefgh\x00", "abcdefgi", "ééééé"]
"""Names that share their first bytes, or differ only past 8 of them, among short ones."""


@given(
    st.sets(st.tuples(st.integers(0, 5), st.sampled_from([*_NAMES, ""])), max_size=30),
    st.lists(st.tuples(st.integers(-1, 6), st.sampled_from([*_NAMES, "", "q", "abcdefgh\x01"]))),
)
def test_a_runs_ids_are_found_page_by_page_for_any_keys(
    stored: set[tuple[int, str]], looked_up: list[tuple[int, str]]
) -> None:
    """Each key found in its page, absent ones not found, over runs of tiny pages."""
    store = MemoryPageStore()
    ordered = sorted(stored)
    ids = {key: 100 + number for number, key in enumerate(ordered)}
    columns = (
        [k[0] for k in ordered], [k[1] for k in ordered], [ids[k] for k in ordered],
        [1] * len(ordered), [0] * len(ordered), None,
    )  # fmt: skip
    runs.write_run(store, "run", [columns] if ordered else [], page_bytes=40)
    reader = runs.RunReader(store, "run")
    parents = np.array([k[0] for k in looked_up], dtype=np.int64)
    found = reader.find_ids(KeyHashes(parents, [k[1] for k in looked_up]))
    assert found.tolist() == [ids.get(k, -1) for k in looked_up]


def test_a_new_memory_store_never_reads_a_freed_ones_cached_pages() -> None:
    """Runs of the same name in stores made one after another (the first one freed) each
    read as written: the page cache knows stores by location, so a new store must never
    take a freed store's location (``id()`` of the freed object came back)."""
    for number in range(20):
        store = MemoryPageStore()
        ids = [number * 10 + i for i in range(3)]
        columns = ([0, 0, 0], ["a", "b", "c"], ids, [1, 1, 1], [0, 0, 0], None)
        runs.write_run(store, "run", [columns], page_bytes=40)
        found = runs.RunReader(store, "run").find_ids(
            KeyHashes(np.zeros(3, np.int64), ["a", "b", "c"])
        )
        assert found.tolist() == ids
        del store


@given(
    stored=st.sets(st.tuples(st.integers(0, 3), st.sampled_from(_NAMES) | st.text(max_size=10))),
    wanted=st.lists(st.tuples(st.integers(-1, 4), st.sampled_from(_NAMES) | st.text(max_size=10))),
)
def test_insertion_points_are_where_bisect_puts_each_key(
    stored: set[tuple[int, str]], wanted: list[tuple[int, str]]
) -> None:
    """Keys in UTF-8 byte order, as runs keep them, names long and short, sharing their
    first bytes or not."""
    order = sorted(stored, key=lambda k: (k[0], k[1].encode()))
    base = ChildColumns(
        np.array([k[0] for k in order], dtype=np.int64),
        pa.array([k[1] for k in order], pa.string()),
        *[np.zeros(len(order), dtype=np.int64)] * 3,
    )
    parents = np.array([k[0] for k in wanted], dtype=np.int64)
    found = insertion_points(base, parents, pa.array([k[1] for k in wanted], pa.string()))
    encoded = [(k[0], k[1].encode()) for k in order]
    assert found.tolist() == [bisect.bisect_left(encoded, (k[0], k[1].encode())) for k in wanted]


def test_visit_many_in_pieces_refuses_a_key_repeated_in_a_later_piece(store: PageStore) -> None:
    tree = ShardTree(store)
    tree.memtable_limit = 100  # pieces of 50: "a" comes again in the second
    root = Handles.of([tree.root_handle])
    names = ["a", *(f"n{i}" for i in range(49)), "a"]
    with pytest.raises(ValueError, match="distinct"):
        tree.visit_many(root, np.zeros(len(names), dtype=np.int64), names)


def test_a_flush_keeps_the_inner_nodes_and_writes_them_again_only_when_changed(
    store: PageStore,
) -> None:
    tree = ShardTree(store)
    root = tree.visit(tree.root_handle, "root")
    assert root is not None
    a = tree.visit(root, "a")
    assert a is not None
    tree.visit(a, "x")
    tree.visit(root, "b")
    tree.flush()
    # kept: the nodes that are parents of others (the internal root, root, a), nothing to add
    assert _memtable_entries(tree) == [(-1, "", 0, 0, 0), (0, "root", 1, 0, 0), (1, "a", 2, 0, 0)]
    assert tree.memtable.kept == 3 and tree.memtable.changed_slots().tolist() == []
    runs = len(tree.readers)
    tree.flush()  # nothing changed: no run
    assert len(tree.readers) == runs
    tree.visit(a, "y")  # a gets a child (found here, not in the runs); root is unchanged
    tree.flush()
    written = tree.readers[-1].all_columns()
    assert list(zip(written.parents.tolist(), written.names.to_pylist(), strict=True)) == [
        (1, "a"),
        (2, "y"),
    ]
    final = ShardTree(store, tree.commit())
    found = {path: (n.hits, n.child_count) for path, n in final.walk()}
    assert found == {
        ("root",): (1, 2),
        ("root", "a"): (1, 2),
        ("root", "a", "x"): (1, 0),
        ("root", "a", "y"): (1, 0),
        ("root", "b"): (1, 0),
    }


def test_a_flush_keeps_at_most_half_the_memtable_limit(store: PageStore) -> None:
    tree = ShardTree(store)
    root = tree.visit(tree.root_handle, "root")
    assert root is not None
    for name in "abcd":
        parent = tree.visit(root, name)
        assert parent is not None
        tree.visit(parent, "leaf")
    tree.memtable_limit = 10  # six inner nodes: the internal root, root, a, b, c, d
    tree.flush()
    assert [entry[:2] for entry in _memtable_entries(tree)] == [
        (-1, ""),
        (0, "root"),
        (1, "a"),
        (1, "b"),
        (1, "c"),
    ]


def test_new_data_on_a_kept_entry_is_written(store: PageStore) -> None:
    tree = ShardTree(store)
    root = tree.visit(tree.root_handle, "root")
    assert root is not None
    tree.visit(root, "leaf")
    tree.flush()
    assert tree.memtable.slot(root[1]) is not None  # kept: the parent of "leaf"
    tree.update_data(root, lambda data: data.update(seen=1))  # its only change
    tree.flush()
    final = ShardTree(store, tree.commit())
    node = final.child(final.root, "root")
    assert node is not None and (node.hits, node.child_count, node.data) == (1, 1, {"seen": 1})
