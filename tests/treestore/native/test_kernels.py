"""Each compiled kernel gives, value for value, what the numpy code it replaced gives
(that code stays as the oracle: the fallback below ``NATIVE_FROM`` values)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treestore import native
from treestore.arrays import distinct_sorted, unique_first_inverse
from treestore.storage.keyfilter import _KINDS as FILTER_KINDS
from treestore.storage.keyfilter import KeyFilter, KeyHashes, _folded, _parted
from treestore.storage.memtable import KeyIndex

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80)


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**62), 2**62), _TEXT), max_size=200), st.integers(0, 5))
def test_key_hashes_are_the_numpy_ones(keys: list[tuple[int, str]], skip: int) -> None:
    parents = np.array([p for p, _ in keys], dtype=np.int64)
    names = pa.array([n for _, n in keys], pa.string()).slice(min(skip, len(keys)))
    parents = parents[min(skip, len(keys)) :]
    folded = native.folded_hashes(parents, names)
    assert folded.tolist() == _folded(parents, names).tolist()
    assert native.parted_hashes(folded, parents).tolist() == _parted(folded, parents).tolist()


def test_large_string_names_hash_alike() -> None:
    parents = np.arange(3, dtype=np.int64)
    names = pa.array(["a", "bé" * 9, ""], pa.string())
    wide = names.cast(pa.large_string())
    assert native.folded_hashes(parents, wide).tolist() == _folded(parents, names).tolist()


def test_key_hashes_switch_to_the_kernels_at_their_size() -> None:
    """``KeyHashes`` hashes 64 keys or more compiled, fewer in numpy: the same values."""
    rng = np.random.default_rng(5)
    parents = rng.integers(0, 1000, native.NATIVE_FROM)
    names = pa.array([f"n{i}" for i in rng.integers(0, 50, native.NATIVE_FROM)])
    whole = KeyHashes(parents, names)
    assert whole.indexed().tolist() == _parted(_folded(parents, names), parents).tolist()
    few = KeyHashes(parents[:3], names.slice(0, 3))
    assert few.indexed().tolist() == whole.indexed()[:3].tolist()


@settings(deadline=None)
@given(
    st.one_of(
        st.lists(st.integers(-5, 40), max_size=300),  # dense: a table over the span
        st.lists(st.integers(-(10**12), 10**12), max_size=300),  # sparse: hash table, sort
    )
)
def test_groups_are_numpys(values: list[int]) -> None:
    array = np.array(values, dtype=np.int64)
    expected = unique_first_inverse(array)
    with mock.patch.object(native, "NATIVE_FROM", 1):
        found = native.first_inverse_groups(array)
    assert [f.tolist() for f in found] == [e.tolist() for e in expected]


@settings(deadline=None)
@given(
    st.integers(1, 30).flatmap(
        lambda nodes: st.integers(1, 30).flatmap(
            lambda codes: st.tuples(
                st.just(nodes),
                st.just(codes),
                st.lists(st.tuples(st.integers(0, nodes - 1), st.integers(0, codes - 1))),
            )
        )
    )
)
def test_pair_groups_are_numpys(case: tuple[int, int, list[tuple[int, int]]]) -> None:
    node_count, code_count, pairs = case
    nodes = np.array([n for n, _ in pairs], dtype=np.int64)
    codes = np.array([c for _, c in pairs], dtype=np.int64)
    expected = unique_first_inverse(nodes * code_count + codes)
    with mock.patch.object(native, "NATIVE_FROM", 1):
        found = native.pair_groups(nodes, codes, node_count, code_count)
    assert [f.tolist() for f in found] == [e.tolist() for e in expected]


def test_pair_groups_refuse_a_value_out_of_range() -> None:
    """The kernel indexes its counting arrays without checks: the wrapper checks first."""
    nodes = np.zeros(native.NATIVE_FROM, np.int64)
    codes = np.arange(native.NATIVE_FROM, dtype=np.int64)
    with pytest.raises(ValueError, match="out of"):
        native.pair_groups(nodes, codes, 1, native.NATIVE_FROM - 1)
    with pytest.raises(ValueError, match="out of"):
        native.pair_groups(nodes - 1, codes, 1, native.NATIVE_FROM)


@settings(deadline=None)
@given(
    st.lists(st.integers(-3, 60) | st.integers(-(2**62), 2**62), max_size=200),
    st.lists(st.integers(0, 60) | st.integers(-(2**62), 2**62), max_size=200),
)
def test_members_and_repeats_are_numpys(values: list[int], candidates: list[int]) -> None:
    """Both ways of :func:`native.members`: the bitmap over a dense span, the hash set."""
    left, right = np.array(values, np.int64), np.array(candidates, np.int64)
    with mock.patch.object(native, "NATIVE_FROM", 1):
        for dense_bits in (0, 1 << 62):  # never a bitmap, a bitmap whenever the span fits
            if dense_bits and len(right) and int(right.max()) - int(right.min()) > 1 << 20:
                continue  # not a bitmap of 2^62 bits
            with mock.patch.object(native, "_DENSE_BITS", dense_bits):
                assert native.members(left, right).tolist() == np.isin(left, right).tolist()
        assert native.repeats(left) == (len(distinct_sorted(left)) < len(left))


@settings(deadline=None)
@given(
    st.lists(st.integers(0, 2**64 - 1), max_size=300),
    st.lists(st.integers(0, 400), max_size=100),
    st.integers(0, 300),
)
def test_the_key_index_finds_what_its_numpy_rounds_find(
    hashes_of_keys: list[int], asked: list[int], collide: int
) -> None:
    """Keys placed compiled or in rounds are found compiled or in rounds alike, each by its
    hash and confirmed on the key; keys share homes and whole hashes (the first
    ``collide`` keys keep only their low byte), and probing goes on past a key of an
    equal hash that is another."""
    hashes = np.array(hashes_of_keys, dtype=np.uint64)
    hashes[:collide] &= np.uint64(0xFF)
    asked = [*range(len(hashes)), *asked]  # every key held, and others
    wanted = np.array(asked, dtype=np.int64)  # key k is held at slot k, if k < len(hashes)
    query = np.array([hashes[k] if k < len(hashes) else k for k in asked], dtype=np.uint64)

    def same(positions: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return wanted[positions] == slots

    expected = np.where(wanted < len(hashes), wanted, -1).tolist()
    for placing in (1, 1 << 62):
        index = KeyIndex()
        with mock.patch.object(native, "NATIVE_FROM", placing):
            index.insert(hashes)
        for finding in (1, 1 << 62):
            with mock.patch.object(native, "NATIVE_FROM", finding):
                assert index.find(query, same).tolist() == expected


def test_a_fresh_process_compiles_into_the_user_cache_and_loads_from_it(tmp_path: Path) -> None:
    """With no ``NUMBA_CACHE_DIR``, the kernels compile into ``$XDG_CACHE_HOME/treestore/
    numba``, and the next process loads them from there."""
    code = (
        "import numpy as np; from treestore import native; "
        "print(native.kernels().first_groups(np.arange(3, dtype=np.int64))[0].tolist())"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    root = Path(__file__).resolve().parents[3]
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[0, 1, 2]"
    cached = list((tmp_path / "treestore" / "numba").rglob("*.nbi"))
    assert cached, "no kernel was cached"


@settings(deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 9), st.lists(st.integers(0, 300), max_size=6)), max_size=60),
    st.integers(1, 4),
    st.sampled_from([8, 64, 1 << 19]),
)
def test_grouped_distinct_ranks_are_each_groups_sorted_set(
    rows: list[tuple[int, list[int]]], pieces: int, block_bytes: int
) -> None:
    """Ranks across several 64-bit words (up to 300), rows of any size (empty too), every
    group's set once, over 1 to 4 threads, with blocks of one group, of a few, or all."""
    groups = 10
    ranks = np.array([r for _, stretch in rows for r in stretch], dtype=np.int64)
    sizes = np.array([len(stretch) for _, stretch in rows], dtype=np.int64)
    firsts = np.cumsum(sizes) - sizes
    owners = np.array([g for g, _ in rows], dtype=np.int64)
    items, bounds = native.grouped_distinct_ranks(
        owners, firsts, sizes, ranks, groups, pieces, block_bytes
    )
    lists = [items[a:b].tolist() for a, b in itertools.pairwise(bounds)]
    expected = [sorted({r for g, s in rows if g == k for r in s}) for k in range(groups)]
    assert lists == expected


@settings(deadline=None)
@given(
    st.lists(st.tuples(st.integers(-(2**62), 2**62), _TEXT), min_size=1, max_size=300),
    st.integers(1, 2000),
    st.sampled_from(FILTER_KINDS),
)
def test_key_filters_filled_and_read_by_the_kernels_are_numpys(
    keys: list[tuple[int, str]], expected: int, kind: str
) -> None:
    """A filter filled with all the keys at once (the kernel, from ``NATIVE_FROM`` keys)
    holds the bits of one filled a key at a time (numpy), and both read alike."""
    _filled_alike(keys, expected, kind)


@pytest.mark.parametrize("kind", FILTER_KINDS)
def test_key_filters_of_many_keys_are_filled_by_the_kernel_as_by_numpy(kind: str) -> None:
    rng = np.random.default_rng(5)
    keys = [(int(p), f"n{i}") for i, p in enumerate(rng.integers(0, 1 << 40, 3000))]
    for expected in (10, 3000, 100_000):  # a filter full, sized, and mostly empty
        _filled_alike(keys, expected, kind)


def _filled_alike(keys: list[tuple[int, str]], expected: int, kind: str) -> None:
    parents = np.array([k[0] for k in keys], np.int64)
    hashes = KeyHashes(parents, [k[1] for k in keys])
    sized = KeyFilter.sized(expected)
    at_once, one_by_one = (KeyFilter(sized.bits.copy(), sized.size, kind) for _ in range(2))
    at_once.add(hashes)
    for i in range(len(keys)):
        one_by_one.add(hashes.take(np.array([i])))
    assert at_once.bits.tobytes() == one_by_one.bits.tobytes()
    absent = KeyHashes(parents + 1, [k[1] + "x" for k in keys])
    for probe in (hashes, absent):
        together = at_once.may_hold(probe).tolist()
        alone = [bool(at_once.may_hold(probe.take(np.array([i])))[0]) for i in range(len(keys))]
        assert together == alone
    assert all(at_once.may_hold(hashes))
    if len(keys) >= native.NATIVE_FROM:  # the kernels ran, and refuse a cut filter
        with pytest.raises(ValueError, match="contiguous bytes"):
            native.filter_add(at_once.bits[:-1], at_once.size + 8, hashes.indexed(), 7)
        with pytest.raises(ValueError, match="contiguous bytes"):
            native.filter_holds(at_once.bits[::2], at_once.size, hashes.indexed(), 7)


@settings(deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-2, 6) | st.integers(-(2**62), 2**62),
            st.sampled_from(["", "a", "ab", "b", "é", "a\x00"]) | _TEXT,
        ),
        max_size=300,
    ),
    st.integers(1, 40),
)
def test_key_order_is_arrows_two_key_sort(entries: list[tuple[int, str]], short: int) -> None:
    """Parents, then names bytewise, stable among equal keys: Arrow's order, whether a
    parent's run of children is sorted by insertion or by Arrow (``short``)."""
    parents, names, expected = _arrow_key_order(entries)
    native_sizes = mock.patch.multiple(native, NATIVE_FROM=1, _SHORT_RUN=short)
    with native_sizes:
        order, sorted_parents, sorted_names = native.key_order(parents, names)
    assert order.tolist() == expected.tolist()
    assert sorted_parents.tolist() == parents[expected].tolist()
    assert sorted_names.to_pylist() == names.take(pa.array(expected)).to_pylist()


@settings(deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(-2, 6), st.sampled_from(["", "a", "ab", "b", "é"]) | _TEXT),
            unique=True,
            max_size=40,
        ),
        min_size=1,
        max_size=9,
    )
)
def test_merged_parts_order_is_a_stable_sort_of_the_parts(
    parts: list[list[tuple[int, str]]],
) -> None:
    """Runs in key order (keys distinct within each, repeated across them), one after
    another: merged, they come in the order a stable two-key sort of all gives (of equal
    keys, the earlier run's first)."""
    runs = [sorted(part, key=lambda e: (e[0], e[1].encode())) for part in parts]
    entries = [entry for run in runs for entry in run]
    parents, names, expected = _arrow_key_order(entries)
    order = native.merged_parts_order(parents, names, [len(run) for run in runs])
    assert order.tolist() == expected.tolist()
    with pytest.raises(ValueError, match="parts of the entries' size"):
        native.merged_parts_order(parents, names, [len(entries) + 1])


def _arrow_key_order(
    entries: list[tuple[int, str]],
) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """The entries' parents and names as columns, and Arrow's stable two-key sort of them
    (the order the key-order kernels must give)."""
    parents = np.array([e[0] for e in entries], np.int64)
    names = pa.array([e[1] for e in entries], pa.string())
    expected = pc.sort_indices(
        pa.table({"parent": parents, "name": names}),
        [("parent", "ascending"), ("name", "ascending")],
    ).to_numpy()
    return parents, names, expected


def test_kernels_that_index_without_checks_refuse_what_would_go_out_of_bounds() -> None:
    one = np.ones(1, np.int64)
    with pytest.raises(ValueError, match="owner"):
        native.grouped_distinct_ranks(np.array([3]), np.zeros(1, np.int64), one, one, 3)
    base, added = pa.array(["a", "c"]), pa.array(["b", "d"])
    for places in ([2, 1], [0, 3], [-1, 0], [0]):
        with pytest.raises(ValueError, match="places"):
            native.inserted_strings(base, np.array(places), added)
    assert native.inserted_strings(base, np.array([0, 2]), added).to_pylist() == [
        "b",
        "a",
        "c",
        "d",
    ]
    ints = np.array([1, 3])
    for places in ([2, 1], [0, 3], [-1, 0], [0]):
        with pytest.raises(ValueError, match="places"):
            native.inserted_ints(ints, np.array(places), np.array([2, 4]))


@settings(deadline=None)
@given(
    st.lists(st.integers(-(1 << 62), 1 << 62), max_size=40),
    st.lists(st.tuples(st.integers(0, 40), st.integers(-(1 << 62), 1 << 62)), max_size=20),
)
def test_inserted_ints_is_numpy_insert(base: list[int], inserts: list[tuple[int, int]]) -> None:
    """At the start, the end, several at one place, none: what ``numpy.insert`` gives."""
    chosen = sorted((min(place, len(base)), value) for place, value in inserts)
    places = np.array([p for p, _ in chosen], dtype=np.int64)
    added = np.array([v for _, v in chosen], dtype=np.int64)
    values = np.array(base, dtype=np.int64)
    found = native.inserted_ints(values, places, added)
    assert found.tolist() == np.insert(values, places, added).tolist()
    mapped = np.frombuffer(values.tobytes(), np.int64)  # read-only, as a mapped run's column
    assert native.inserted_ints(mapped, places, added).tolist() == found.tolist()
    assert values.flags.writeable  # the caller's array is left as it was


@settings(deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 9), st.lists(st.integers(0, 130), max_size=6)), max_size=60),
    st.integers(1, 4),
    st.sampled_from([8, 64, 1 << 19]),
    st.lists(st.text(min_size=0, max_size=4), min_size=131, max_size=131),
)
def test_grouped_distinct_text_is_the_ranks_words_joined(
    rows: list[tuple[int, list[int]]], pieces: int, block_bytes: int, words: list[str]
) -> None:
    """Every group's distinct ranks as their words joined by commas, null for a group
    without any (an empty word still counts), over 1 to 4 threads and any blocks; words
    of several bytes (UTF-8) copied whole."""
    groups = 10
    ranks = np.array([r for _, stretch in rows for r in stretch], dtype=np.int64)
    sizes = np.array([len(stretch) for _, stretch in rows], dtype=np.int64)
    firsts = np.cumsum(sizes) - sizes
    owners = np.array([g for g, _ in rows], dtype=np.int64)
    text = native.grouped_distinct_text(
        owners, firsts, sizes, ranks, groups, pa.array(words), pieces, block_bytes
    )
    expected = []
    for k in range(groups):
        found = sorted({r for g, s in rows if g == k for r in s})
        expected.append(",".join(words[r] for r in found) if found else None)
    assert text.type == pa.string()
    assert text.to_pylist() == expected
    text.validate(full=True)


def test_grouped_distinct_text_refuses_a_rank_without_its_word() -> None:
    one = np.ones(1, np.int64)
    with pytest.raises(ValueError, match="without its word"):
        native.grouped_distinct_text(np.zeros(1, np.int64), np.zeros(1, np.int64), one,
                                     np.array([3]), 1, pa.array(["a", "b"]))  # fmt: skip
    with pytest.raises(ValueError, match="null word"):
        native.grouped_distinct_text(np.zeros(1, np.int64), np.zeros(1, np.int64), one,
                                     np.array([0]), 1, pa.array([None, "b"]))  # fmt: skip
