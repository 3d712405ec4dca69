"""A run's key filter: the same hash for a key whatever the batch, no false negatives,
about 1% false positives, and runs of the first index format read as before."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from treestore.storage import runs
from treestore.storage.keyfilter import _KINDS as KINDS
from treestore.storage.keyfilter import KeyFilter, KeyHashes, LegacyFilter, index_key
from treestore.storage.pagestore import FilePageStore, MemoryPageStore
from treestore.storage.runs import RunReader
from treestore.storage.state import ShardState
from treestore.storage.tree import ShardTree

_KEYS = st.lists(
    st.tuples(
        st.integers(-(1 << 63), (1 << 63) - 1),
        st.text(max_size=3) | st.text(min_size=30, max_size=80) | st.sampled_from(["u12", "é"]),
    ),
    max_size=30,
)
_LEGACY = Path(__file__).parent / "data" / "run-index-1"


@given(_KEYS)
def test_a_keys_hashes_do_not_depend_on_the_batch_or_the_way(keys: list[tuple[int, str]]) -> None:
    parents = np.array([k[0] for k in keys], dtype=np.int64)
    for parted in (True, False):  # the filters written now, and the first kind's
        together = KeyHashes(parents, [k[1] for k in keys]).pair(parted)
        as_arrow = KeyHashes(parents, pa.array([k[1] for k in keys], pa.string())).pair(parted)
        for i, key in enumerate(keys):
            alone = KeyHashes(parents[i : i + 1], [key[1]]).pair(parted)
            assert (alone[0][0], alone[1][0]) == (together[0][i], together[1][i])
            assert (as_arrow[0][i], as_arrow[1][i]) == (together[0][i], together[1][i])
    indexed = KeyHashes(parents, [k[1] for k in keys]).indexed().tolist()
    assert indexed == [index_key(key) for key in keys]
    for kind in KINDS:
        built = KeyFilter.load(KeyFilter(*_empty(len(keys)), kind).save())
        built.add(KeyHashes(parents, [k[1] for k in keys]))
        held = KeyFilter.load(built.save())
        assert held.may_hold(KeyHashes(parents, [k[1] for k in keys])).all()  # no false negative
        assert all(held.holds(key) for key in keys)


def _empty(expected: int) -> tuple[np.ndarray, int]:
    sized = KeyFilter.sized(expected)
    return sized.bits, sized.size


def test_keys_whose_folded_hashes_collide_pass_only_the_first_kinds_filter() -> None:
    """``"0" ^ "3" == 1 ^ 2``: the keys fold alike. The first kind's filter of one lets the
    other pass (a page read for nothing); the filters written now tell them apart."""
    present, absent = (1, "0"), (2, "3")
    first = KeyFilter(*_empty(1), KINDS[1])
    first.add(KeyHashes(np.array([present[0]]), [present[1]]))
    assert first.holds(absent) and KeyFilter.load(first.save()).holds(absent)
    now = KeyFilter.sized(1)
    assert now.kind == KINDS[0]
    now.add(KeyHashes(np.array([present[0]]), [present[1]]))
    assert now.holds(present) and not now.holds(absent)
    assert now.may_hold(KeyHashes(np.array([1, 2]), ["0", "3"])).tolist() == [True, False]


def test_about_one_in_a_hundred_absent_keys_pass() -> None:
    size = 50_000
    built = KeyFilter.sized(size)
    built.add(KeyHashes(np.arange(size), [f"n{i}" for i in range(size)]))
    absent = KeyHashes(np.arange(size), [f"m{i}" for i in range(size)])
    passed = built.may_hold(absent)
    assert 0.002 < passed.mean() < 0.02
    assert [built.holds((i, f"m{i}")) for i in range(2000)] == passed[:2000].tolist()
    other = KeyHashes(np.arange(size) + 1, [f"n{i}" for i in range(size)])  # other parents
    assert built.may_hold(other).mean() < 0.02


def test_a_filter_of_the_wrong_size_is_refused() -> None:
    saved = KeyFilter.sized(10).save()
    saved["filter"] = saved["filter"][:-1]
    try:
        KeyFilter.load(saved)
    except ValueError as exc:
        assert "wrong size" in str(exc)
    else:
        raise AssertionError("a cut filter was accepted")


def test_a_run_of_the_first_index_format_is_read_and_merged(tmp_path: Path) -> None:
    """The run (written by the first format's writer: 300 UIDs with A/é0..é6 children)
    is read through its rbloom filter, and a new load's runs merge with it."""
    store = FilePageStore(tmp_path)
    name = "trees/shard-0000/legacy-000"
    (tmp_path / "trees" / "shard-0000").mkdir(parents=True)
    for suffix in ("pages", "index"):
        shutil.copy(f"{_LEGACY}.{suffix}", tmp_path / f"{name}.{suffix}")
    reader = RunReader(store, name)
    assert isinstance(reader.keys, LegacyFilter)
    entry = reader.get((0, "u0007"))
    assert entry is not None and reader.get((0, "nope")) is None
    ids = reader.find_ids(KeyHashes(np.array([0, 0, 0]), ["u0007", "nope", "u0299"]))
    assert ids[0] == entry[1] and ids[1] == -1 and ids[2] > 0
    asked = KeyHashes(np.array([0, 0, 0]), ["u0007", "nope", "u0299"])
    assert reader.keys.may_hold(asked, np.array([0, 2])).tolist() == [True, False, True]
    assert reader.keys.may_hold(asked, np.array([1])).tolist() == [False] * 3
    assert not reader.keys.may_hold(asked, np.array([], dtype=np.int64)).any()
    tree = ShardTree(store, _state_of(store, name, reader))
    assert [n.name for n in tree.children(tree.root)][:2] == ["u0000", "u0001"]
    tree.visit(tree.visit(tree.root_handle, "u0007"), "B")  # type: ignore[arg-type]
    tree.visit(tree.root_handle, "u0300")
    merged = ShardTree(store, tree.commit())
    merged.compact()  # the legacy run and the new one become one run of the new format
    assert len(merged.readers) == 1 and not isinstance(merged.readers[0].keys, LegacyFilter)
    uid = merged.child(merged.root, "u0007")
    assert uid is not None and uid.hits == 2
    assert [n.name for n in merged.children(uid)] == ["A", "B"]
    assert len(list(merged.children(merged.root))) == 301
    assert merged.child(merged.root, "u0300") is not None


def _state_of(store: FilePageStore, name: str, reader: RunReader) -> ShardState:
    ids = [e[1] for e in reader.scan((-1, ""))]
    return ShardState(runs=(name,), next_id=max(ids) + 1, nodes=len(ids) - 1)


def test_a_long_names_hash_is_the_same_folded_one_by_one() -> None:
    """Names past 32 KiB are folded a word at a time in Python ints, the others a column at
    a time: the same hashes as one key alone (:func:`index_key`), in any batch."""
    long = ["x" * 32_760, "y" * 32_768, "z" * 32_769, "é" * 20_000 + "a", "w" * 100_003]
    names = [*long, "short", "", "u12"]
    parents = np.array([(i * 7919) << 40 for i in range(len(names))], dtype=np.int64)
    hashes = KeyHashes(parents, names).indexed().tolist()
    assert hashes == [index_key((int(p), n)) for p, n in zip(parents, names, strict=True)]
    alone = [KeyHashes(parents[i : i + 1], [n]).indexed()[0] for i, n in enumerate(names)]
    assert alone == hashes


def test_a_filter_probed_among_some_keys_answers_as_for_all_of_them_there() -> None:
    """``may_hold(hashes, among)`` is ``may_hold(hashes)`` at ``among`` and False elsewhere,
    both ways of probing (numpy below the compiled kernels' size, compiled above)."""
    rng = np.random.default_rng(5)
    for count in (40, 3000):
        parents = rng.integers(0, 50, count)
        names = [f"n{v}" for v in rng.integers(0, 80, count)]
        built = KeyFilter.sized(count // 2)
        built.add(KeyHashes(parents[: count // 2], names[: count // 2]))
        hashes = KeyHashes(parents, names)
        among = np.flatnonzero(rng.random(count) < 0.4)
        expected = np.zeros(count, dtype=bool)
        expected[among] = built.may_hold(hashes)[among]
        assert built.may_hold(hashes, among).tolist() == expected.tolist()
        assert not built.may_hold(hashes, among[:0]).any()


def test_a_run_asks_its_filter_only_about_keys_within_its_parents(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run holding children of nodes 10 to 12 finds its keys, and keys of parents below
    or above those are ruled out before its filter is read (the filter is asked about the
    keys within the run's parents only)."""
    store = MemoryPageStore()
    columns = ([10, 11, 12], ["a", "b", "c"], [20, 21, 22], [1, 1, 1], [0, 0, 0], None)
    runs.write_run(store, "run", [columns], page_bytes=40)
    reader = runs.RunReader(store, "run")
    asked: list[list[int]] = []
    holds = type(reader.keys).may_hold

    def spied(self, hashes, among=None):  # type: ignore[no-untyped-def]
        asked.append(hashes.parents[among].tolist() if among is not None else "all")
        return holds(self, hashes, among)

    monkeypatch.setattr(type(reader.keys), "may_hold", spied)
    parents = np.array([9, 10, 11, 12, 13, 12], dtype=np.int64)
    found = reader.find_ids(KeyHashes(parents, ["a", "a", "b", "c", "c", "z"]))
    assert found.tolist() == [-1, 20, 21, 22, -1, -1]
    assert asked == [[10, 11, 12, 12]]
    reader.find_ids(KeyHashes(np.array([10, 12]), ["a", "c"]))  # all within: all asked
    assert asked[-1] == "all"
    some = reader.find_ids(KeyHashes(parents, ["a", "a", "b", "c", "c", "z"]), np.array([0, 2, 4]))
    assert some.tolist() == [-1, -1, 21, -1, -1, -1]  # only those looked for
    assert asked[-1] == [11]  # of them, only the key within the run's parents
