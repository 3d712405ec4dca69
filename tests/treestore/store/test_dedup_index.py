"""The per-shard dedup index against a Python set, on both page stores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from treestore.errors import StoreError
from treestore.storage.pagestore import FilePageStore, MemoryPageStore, PageStore
from treestore.store.dedup_index import RunOwner, ShardIndex


@pytest.fixture(params=["memory", "disk"])
def pages(request: pytest.FixtureRequest, tmp_path: Path) -> PageStore:
    """Every index test runs against the in-memory and the on-disk page store."""
    return MemoryPageStore() if request.param == "memory" else FilePageStore(tmp_path / "store")


def _hash(key: str, bits: int = 64) -> int:
    """A stand-in hash; ``bits`` small makes different keys collide on purpose."""
    import xxhash

    return xxhash.xxh64_intdigest(key.encode()) % (1 << bits) - (1 << (bits - 1))


def _load(index: ShardIndex, batch: list[str], bits: int = 64) -> list[bool]:
    """What a load does with one batch: drop repeats and known keys, add the rest (kept?)."""
    keys = pa.array(batch, pa.string())
    hashes = np.array([_hash(k, bits) for k in batch], dtype=np.int64)
    within, earlier = index.classify(hashes, keys)
    return (~(within | earlier)).tolist()


@given(
    loads=st.lists(
        st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=3).map("".join), max_size=40),
        max_size=6,
    ),
    bits=st.sampled_from([2, 64]),
)
def test_loads_keep_exactly_the_new_keys(loads: list[list[list[str]]], bits: int) -> None:
    pages = MemoryPageStore()
    runs: tuple[str, ...] = ()
    known: set[str] = set()
    for load in loads:
        index = ShardIndex(pages, "dedup/s/shard-0000", runs)
        for batch in load:
            kept = _load(index, batch, bits)
            expected = []
            for key in batch:
                expected.append(key not in known)
                known.add(key)
            assert kept == expected
        runs = index.commit()
    assert sum(len(r) for r in ShardIndex(pages, "dedup/s/shard-0000", runs).runs) == len(known)


def test_colliding_keys_are_both_kept(pages: PageStore) -> None:
    # with a 1-bit hash every key collides with half of the others: only exact keys decide
    index = ShardIndex(pages, "dedup/s/shard-0000", ())
    assert _load(index, ["x", "y", "z", "x"], bits=1) == [True, True, True, False]
    runs = index.commit()
    again = ShardIndex(pages, "dedup/s/shard-0000", runs)
    assert _load(again, ["w", "y", "v", "z"], bits=1) == [True, False, True, False]


def test_runs_merge_size_tiered_and_stay_few(pages: PageStore) -> None:
    runs: tuple[str, ...] = ()
    for load in range(40):
        index = ShardIndex(pages, "dedup/s/shard-0000", runs)
        _load(index, [f"k{load}-{i}" for i in range(100)])
        runs = index.commit()
    index = ShardIndex(pages, "dedup/s/shard-0000", runs)
    sizes = [len(run) for run in index.runs]
    assert sum(sizes) == 4000 and len(sizes) <= 6
    assert sizes == sorted(sizes, reverse=True)
    assert _load(index, ["k0-0", "k39-99", "new"]) == [False, False, True]


def _committed_run(tmp_path: Path) -> tuple[FilePageStore, str, Path]:
    """A store on disk with one committed run of keys ``a`` and ``b``: (store, run, file)."""
    pages = FilePageStore(tmp_path / "store")
    index = ShardIndex(pages, "dedup/s/shard-0000", ())
    _load(index, ["a", "b"])
    (run,) = index.commit()
    path = pages.local_path(run)
    assert path is not None
    return pages, run, path


def test_a_damaged_run_is_reported(tmp_path: Path) -> None:
    pages, run, path = _committed_run(tmp_path)
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(StoreError, match=r"dedup index run .* is damaged"):
        ShardIndex(pages, "dedup/s/shard-0000", (run,))


@pytest.mark.parametrize("hasher_key", [b"treestore.xxh3", b"treestore.xxh64"])
def test_a_run_whose_key_bytes_changed_fails_its_checksum(
    tmp_path: Path, hasher_key: bytes
) -> None:
    """A run checksummed with XXH3 (as written now) or XXH64 (as written before) opens
    while intact, and is reported damaged once a byte of a key changes."""
    import pyarrow.ipc as ipc

    from treestore.store import dedup_index

    pages = FilePageStore(tmp_path / "store")
    names = sorted(["alpha", "bravo", "charlie"], key=_hash)
    keys = pa.array([n.encode() for n in names], pa.large_binary())
    hashes = np.array([_hash(n) for n in names], dtype=np.int64)
    digest = dedup_index._run_checksum(hashes, keys, dedup_index._CHECKSUM_KEYS[hasher_key])
    schema = dedup_index.RUN_SCHEMA.with_metadata({hasher_key: f"{digest:016x}"})
    with pages.writer("dedup/s/run.arrow") as out, ipc.new_file(out, schema) as writer:
        writer.write_batch(pa.record_batch([pa.array(hashes), keys], schema=schema))
    intact = ShardIndex(pages, "dedup/s", ("dedup/s/run.arrow",))
    assert _load(intact, ["bravo", "delta"]) == [False, True]  # bravo is in the run
    path = pages.local_path("dedup/s/run.arrow")
    assert path is not None
    data = path.read_bytes()
    assert data.count(b"charlie") == 1
    path.write_bytes(data.replace(b"charlie", b"charlix"))
    with pytest.raises(StoreError, match=r"dedup index run .* is damaged .*checksum"):
        ShardIndex(pages, "dedup/s", ("dedup/s/run.arrow",))


def test_runs_are_written_with_an_xxh3_checksum(tmp_path: Path) -> None:
    import pyarrow.ipc as ipc

    _, _, path = _committed_run(tmp_path)
    metadata = ipc.open_file(pa.memory_map(str(path))).schema.metadata
    assert set(metadata) == {b"treestore.xxh3"}


OWNER = RunOwner("store-a", "s", 0)


def _owned_run(tmp_path: Path, owner: RunOwner | None = OWNER) -> tuple[FilePageStore, str]:
    """A store on disk with one committed run of keys ``a`` and ``b`` written for ``owner``
    (None: as runs were written before they recorded one)."""
    pages = FilePageStore(tmp_path / "store")
    index = ShardIndex(pages, "dedup/s/shard-0000", (), owner)
    _load(index, ["a", "b"])
    (run,) = index.commit()
    return pages, run


def test_a_run_records_what_it_belongs_to(tmp_path: Path) -> None:
    import pyarrow.ipc as ipc

    pages, run = _owned_run(tmp_path)
    path = pages.local_path(run)
    assert path is not None
    metadata = ipc.open_file(pa.memory_map(str(path))).schema.metadata
    assert set(metadata) == {b"treestore.xxh3", b"treestore.owner", b"treestore.owner.xxh3"}
    assert _load(ShardIndex(pages, "dedup/s/shard-0000", (run,), OWNER), ["a", "c"]) == [
        False,
        True,
    ]
    assert ShardIndex(pages, "", (run,)).runs[0].owner == OWNER  # no owner asked: read as is


@pytest.mark.parametrize(
    ("expected", "said"),
    [
        (RunOwner("store-a", "s", 1), "belongs to shard 0 of source 's', not to shard 1 of"),
        (RunOwner("store-a", "t", 0), "belongs to shard 0 of source 's', not to shard 0 of"),
        (RunOwner("store-b", "s", 0), "of store store-a, not to shard 0 of source 's' of store"),
    ],
)
def test_a_run_of_another_shard_source_or_store_is_refused(
    tmp_path: Path, expected: RunOwner, said: str
) -> None:
    pages, run = _owned_run(tmp_path)
    with pytest.raises(StoreError, match=r"dedup index run .*\.arrow ") as refused:
        ShardIndex(pages, "dedup/x", (run,), expected)
    assert said in str(refused.value) and "moved or copied" in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("edit", ["owner changed", "seal removed", "owner removed"])
def test_what_a_run_belongs_to_cannot_change_unnoticed(tmp_path: Path, edit: str) -> None:
    """The owner is sealed with the columns' checksum: rewriting it (a well-formed file,
    its columns intact) or dropping half of it makes the run damaged."""
    import pyarrow.ipc as ipc

    pages, run = _owned_run(tmp_path)
    path = pages.local_path(run)
    assert path is not None
    table = ipc.open_file(pa.py_buffer(path.read_bytes())).read_all()
    metadata = dict(table.schema.metadata)
    if edit == "owner changed":
        metadata[b"treestore.owner"] = RunOwner("store-a", "s", 1).to_bytes()
    else:
        del metadata[b"treestore.owner.xxh3" if edit == "seal removed" else b"treestore.owner"]
    table = table.replace_schema_metadata(metadata)
    with pa.OSFile(str(path), "wb") as out, ipc.new_file(out, table.schema) as writer:
        writer.write_table(table)
    with pytest.raises(StoreError, match=r"dedup index run .* is damaged"):
        ShardIndex(pages, "dedup/s/shard-0000", (run,), RunOwner("store-a", "s", 1))


def test_runs_written_before_runs_recorded_an_owner_are_accepted_and_noted(
    tmp_path: Path,
) -> None:
    """A run without an owner (written before) serves any shard as it did; check counts
    such runs in a note, and reports none as a problem."""
    from treestore.store.dedup_index import (
        DedupManifest,
        check_dedup_index,
        publish_dedup_manifest,
    )
    from treestore.store.versions import StoreWriter

    StoreWriter(FilePageStore(tmp_path / "store"), shards=2)  # store.json, with its identity
    pages, run = _owned_run(tmp_path, owner=None)
    assert ShardIndex(pages, "", (run,), RunOwner("any", "s", 5)).runs[0].owner is None
    publish_dedup_manifest(pages, DedupManifest(0).with_source("s", ["K"], {0: (run,)}))
    notes: list[str] = []
    assert check_dedup_index(pages, notes) == []
    assert len(notes) == 1 and notes[0].startswith("1 dedup index run(s) were written before")
