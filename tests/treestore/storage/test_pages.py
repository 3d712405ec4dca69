"""The page codec: round trips of every column type, and pages of the first format."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from unittest import mock

import msgpack
import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

import treestore.storage.pages
from treestore.storage import entries as entries_module
from treestore.storage.entries import ChildColumns, merge_blocks, merge_columns, merge_disjoint
from treestore.storage.keyfilter import KeyHashes
from treestore.storage.pages import Page, columns_of_span, encode_page, int_dtypes
from treestore.storage.runs import merge_entries

_INT = st.integers(-(1 << 62), 1 << 62)


def _encode(parents, names, ids, hits, counts, data):  # type: ignore[no-untyped-def]
    ints = tuple(np.asarray(c, dtype=np.int64) for c in (parents, ids, hits, counts))
    array = pa.array(names, pa.string())
    offsets = np.frombuffer(array.buffers()[1], np.int32, len(names) + 1)
    raw = array.buffers()[2]
    return encode_page(ints, int_dtypes(ints), offsets, raw.to_pybytes() if raw else b"", data)


@given(
    st.lists(
        st.tuples(_INT, st.text(), _INT, _INT, _INT, st.none() | st.dictionaries(st.text(), _INT)),
        max_size=40,
    )
)
def test_a_page_gives_back_every_entry(entries: list[tuple]) -> None:  # type: ignore[type-arg]
    columns = [list(c) for c in zip(*entries, strict=True)] if entries else [[]] * 6
    has_data = any(d is not None for d in columns[5])
    page = Page(_encode(*columns[:5], columns[5] if has_data else None))
    assert len(page) == len(entries)
    assert [page.entry(i) for i in range(len(page))] == [
        ((p, n), i, h, c, d) for p, n, i, h, c, d in entries
    ]
    assert page.names.to_pylist() == columns[1]
    assert [c.tolist() for c in page.ints] == [columns[0], columns[2], columns[3], columns[4]]


def test_small_values_are_stored_as_int32_and_big_ones_as_int64() -> None:
    small = _encode([1, 2], ["a", "b"], [3, 4], [5, 6], [0, 0], None)
    big = _encode([1, 2], ["a", "b"], [3, 1 << 40], [5, 6], [0, 0], None)
    assert len(big) > len(small)
    assert [c.dtype.itemsize for c in Page(small).ints] == [4, 4, 4, 4]
    assert Page(big).ints[1].tolist() == [3, 1 << 40]


def test_pages_of_the_first_format_are_read() -> None:
    encoded = msgpack.packb([[0, 0], ["a", "é"], [1, 2], [3, 4], [0, 1], [None, {"s": ["sum", 2]}]])
    page = Page(encoded)
    assert page.entry(1) == ((0, "é"), 2, 4, 1, {"s": ["sum", 2]})
    assert page.find((0, "b")) == 1
    assert page.ints[2].tolist() == [3, 4]


_ENTRY = st.tuples(_INT, st.text(), _INT, _INT, _INT, st.none() | st.dictionaries(st.text(), _INT))


@given(
    st.lists(st.lists(_ENTRY, max_size=12), min_size=1, max_size=6),
    st.sampled_from(["int32", "mixed", "as drawn"]),
    st.booleans(),
)
def test_a_span_of_pages_decodes_as_its_pages_do(  # type: ignore[type-arg]
    pages: list[list[tuple]], widths: str, compiled: bool
) -> None:
    """Consecutive pages (all int32, int32 and int64 columns mixed, or as drawn; some with
    data) decode at once into what their pages give one by one: by numpy's gathers, or
    by the compiled decoder (forced: a span of any size)."""
    if widths != "as drawn":
        pages = [
            [(p % 9, n, i % 9, h % 9, c % 9, d) for p, n, i, h, c, d in page] for page in pages
        ]
    if widths == "mixed":
        pages[0] = [(p, n, i + (1 << 40), h, c, d) for p, n, i, h, c, d in pages[0]]
    encoded = []
    for page in pages:
        columns = [list(c) for c in zip(*page, strict=True)] if page else [[]] * 6
        has_data = any(d is not None for d in columns[5])
        encoded.append(_encode(*columns[:5], columns[5] if has_data else None))
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    saved = treestore.storage.pages.NATIVE_ENTRIES
    treestore.storage.pages.NATIVE_ENTRIES = 0 if compiled else 1 << 62
    try:
        found = columns_of_span(b"".join(encoded), np.cumsum(lengths) - lengths, lengths, True)
    finally:
        treestore.storage.pages.NATIVE_ENTRIES = saved
    assert found is not None
    ints, names, data = found
    decoded = [Page(e) for e in encoded]
    assert names.to_pylist() == [n for page in decoded for n in page.names.to_pylist()]
    assert data == [d for page in decoded for d in page.data()]
    for k in range(4):
        assert ints[k].dtype == np.int64
        assert ints[k].tolist() == [v for page in decoded for v in page.ints[k].tolist()]


def test_a_span_that_does_not_add_up_is_left_to_the_page_decoder() -> None:
    page = _encode([1, 2], ["a", "b"], [3, 4], [5, 6], [0, 0], None)
    starts, lengths = np.array([0, len(page)]), np.array([len(page), len(page)])
    assert columns_of_span(page + page, starts, lengths) is not None
    assert columns_of_span(page + page, starts, lengths - 8) is None  # lengths disagree
    assert columns_of_span(page + page[:16] + bytes(len(page) - 16), starts, lengths) is None
    first_format = msgpack.packb([[0], ["a"], [1], [3], [0], [None]])
    assert (
        columns_of_span(first_format + bytes(-len(first_format) % 8), np.array([0]), np.array([8]))
        is None
    )


_KEYS = st.lists(
    st.tuples(st.integers(-1, 4), st.sampled_from(["", "a", "b", "ab", "\u00e9"])), max_size=30
)


def _columns(run: list[tuple]) -> ChildColumns:  # type: ignore[type-arg]
    keys = [e[0] for e in run]
    return ChildColumns(
        np.array([k[0] for k in keys], dtype=np.int64),
        pa.array([k[1] for k in keys], pa.string()),
        np.array([e[1] for e in run], dtype=np.int64),
        np.array([e[2] for e in run], dtype=np.int64),
        np.array([e[3] for e in run], dtype=np.int64),
        [e[4] for e in run],
    )


def _indexed(columns: ChildColumns) -> np.ndarray:
    return KeyHashes(columns.parents, columns.names).indexed()


def _merged_disjoint(
    parts: list[ChildColumns], common: np.ndarray
) -> tuple[ChildColumns, np.ndarray]:
    """merge_disjoint of ``parts`` with their keys' hashes, as a memtable gives them; its
    stretches one after another."""
    stretches = merge_disjoint(parts, common, [_indexed(p) for p in parts], _indexed)
    if not stretches:
        return ChildColumns.empty(), np.zeros(0, np.uint64)
    columns = [c for c, _ in stretches]
    data = [d for c in columns for d in (c.data if c.data is not None else [None] * len(c))]
    merged = ChildColumns(
        np.concatenate([c.parents for c in columns]),
        pa.concat_arrays([c.names for c in columns]),
        np.concatenate([c.ids for c in columns]),
        np.concatenate([c.hits for c in columns]),
        np.concatenate([c.counts for c in columns]),
        data if any(c.data is not None for c in columns) else None,
    )
    return merged, np.concatenate([h for _, h in stretches])


def _entries_of(merged: ChildColumns) -> list[tuple]:  # type: ignore[type-arg]
    return list(
        zip(
            zip(merged.parents.tolist(), merged.names.to_pylist(), strict=True),
            merged.ids.tolist(),
            merged.hits.tolist(),
            merged.counts.tolist(),
            merged.data or [],
            strict=True,
        )
    )


@given(
    st.lists(_KEYS, min_size=1, max_size=4),
    st.booleans(),
    st.booleans(),
    st.lists(st.integers(1, 12), min_size=1, max_size=8),
    st.booleans(),
)
def test_merged_columns_equal_the_entry_merge(
    runs: list[list[tuple[int, str]]],
    big_base: bool,
    sparse_ids: bool,
    block_sizes: list[int],
    compiled: bool,
) -> None:
    """Both merges (sorting, and merging small runs into a big base, its new entries put in
    by the compiled kernels or by Arrow and numpy), whole or block by block, give merge_entries'
    result."""
    with mock.patch.object(entries_module, "NATIVE_INSERT", 0 if compiled else 1 << 62):
        _check_merges(runs, big_base, sparse_ids, block_sizes)


def _check_merges(
    runs: list[list[tuple[int, str]]], big_base: bool, sparse_ids: bool, block_sizes: list[int]
) -> None:
    if big_base:
        runs[0] = runs[0] + [(9, f"n{i:03d}") for i in range(40 * sum(map(len, runs)))]
    stride = 1 << 40 if sparse_ids else 1  # ids far apart: no table as long as the ids
    ids: dict[tuple[int, str], int] = {}
    entries = []
    for number, keys in enumerate(runs):
        run = []
        for key in sorted(set(keys)):
            node = ids.setdefault(key, len(ids) + 1)
            data = {"run": number} if node % 2 else None
            run.append((key, node * stride, number + 1, node % 3, data))
        entries.append(run)
    expected = list(merge_entries([iter(run) for run in entries]))
    assert _entries_of(merge_columns([_columns(run) for run in entries])) == expected
    common = np.array(sorted({k[0] for keys in runs[:1] for k in keys}), dtype=np.int64)
    merged, hashes = _merged_disjoint([_columns(run) for run in entries], common)
    assert _entries_of(merged) == expected
    assert hashes.tolist() == _indexed(merged).tolist()

    def blocks(run: list[tuple]) -> Iterator[ChildColumns]:  # type: ignore[type-arg]
        start = 0
        for size in itertools.cycle(block_sizes):
            if start >= len(run):
                return
            yield _columns(run[start : start + size])
            start += size

    streamed = list(merge_blocks([blocks(run) for run in entries]))
    assert all(len(block) for block in streamed)
    assert [e for block in streamed for e in _entries_of(block)] == expected


@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 7), st.sampled_from(["a", "b", "c", "dd"])), max_size=12),
        min_size=2,
        max_size=5,
    ),
    st.sets(st.integers(0, 7), max_size=3),
)
def test_parts_that_share_only_common_parents_merge_by_stretches(
    parts: list[list[tuple[int, str]]], common: set[int]
) -> None:
    """A big shard's parts: each part's own parents (``10 * (part + 1) + p``) are in no other
    part; the ``common`` ones may be in all. Merged stretch by stretch (no entry merge but
    the common parents' children), they give the entry merge's result."""
    ids: dict[tuple[int, str], int] = {}
    runs = []
    for number, keys in enumerate(parts):
        own = {(p if p in common else 10 * (number + 1) + p, name) for p, name in keys}
        run = []
        for key in sorted(own):
            node = ids.setdefault(key, len(ids) + 1)
            run.append((key, node, number + 1, node % 3, {"n": node} if node % 2 else None))
        runs.append(run)
    expected = list(merge_entries([iter(run) for run in runs]))
    total = sum(map(len, runs))
    with mock.patch.object(entries_module, "merge_columns", wraps=merge_columns) as merged:
        got, hashes = _merged_disjoint([_columns(run) for run in runs], np.array(sorted(common)))
    assert _entries_of(got) == expected
    assert hashes.tolist() == _indexed(got).tolist()  # carried where not merged
    merged_whole = [c for c in merged.call_args_list if sum(map(len, c.args[0])) == total]
    exclusive = sum(1 for run in runs for (p, _), *_ in run if p not in common)
    if exclusive and sum(1 for run in runs if run) > 1:
        assert not merged_whole  # only the common parents' children were merged
