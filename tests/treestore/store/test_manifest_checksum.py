"""Manifests carry their checksum and each run's sizes and index checksum: any edit is
found by readers and by check; a store written before checksums still reads, and check
says what it cannot verify."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from tests.support.old_stores import as_before_sealing
from treestore.errors import CorruptPageError, StoreError
from treestore.storage.pagestore import FilePageStore, MemoryPageStore, PageStore
from treestore.storage.runs import RunReader
from treestore.storage.state import ShardState, SideFiles
from treestore.storage.tree import ShardTree, build_tree
from treestore.store.layout import manifest_name, tree_folder
from treestore.store.lock import store_lock
from treestore.store.maintenance import inspect_store
from treestore.store.sealed import seal, unseal
from treestore.store.versions import (
    Manifest,
    StoreWriter,
    open_version,
    published_versions,
    read_manifest,
)

REPORT = {"sources": {}, "started": "2025-01-01 00:00:00", "seconds": 1.0}


@pytest.fixture(params=["memory", "disk"])
def pages(request: pytest.FixtureRequest, tmp_path: Path) -> PageStore:
    """Every test runs against the in-memory and the on-disk page store."""
    return MemoryPageStore() if request.param == "memory" else FilePageStore(tmp_path / "store")


def _publish(pages: PageStore, paths: list[list[str]]) -> Manifest:
    with store_lock(pages, "a test"):
        writer = StoreWriter(pages, shards=2)
        base = writer.base.trees.get(0)
        tree = ShardTree(pages, base, shard=0, page_bytes=256, folder=tree_folder(0))
        for path in paths:
            handle = tree.root_handle
            for name in path:
                found = tree.visit(handle, name)
                assert found is not None
                handle = found
        return writer.publish({0: tree.commit()}, {"in.tsv": {"size": 3}}, REPORT)


def test_every_byte_of_a_manifest_is_covered(pages: PageStore) -> None:
    _publish(pages, [["a", "b"], ["a", "c"]])
    data = pages.read(manifest_name(1))
    manifest = read_manifest(pages, 1, 2)
    assert manifest.sealed and manifest.trees[0].run_sums
    for at in range(len(data)):
        edited = bytearray(data)
        edited[at] ^= 0x01
        with pytest.raises(StoreError, match=r"versions/000001\.json"):
            Manifest.from_json(bytes(edited), "versions/000001.json")
    pages.write(manifest_name(1), data + b"\n")  # an editor's final newline changes nothing
    assert read_manifest(pages, 1, 2) == manifest


def test_a_manifest_that_lost_its_checksum_line_is_refused(pages: PageStore) -> None:
    _publish(pages, [["a"]])
    data = pages.read(manifest_name(1))
    cut = data[: data.rindex(b',\n "checksum"')] + b"\n}"  # "sealed" is still there
    pages.write(manifest_name(1), cut)
    with pytest.raises(StoreError, match="checksum does not match"):
        open_version(pages)


def test_a_manifest_copied_over_another_is_refused(pages: PageStore) -> None:
    _publish(pages, [["a"]])
    _publish(pages, [["b"]])
    pages.write(manifest_name(2), pages.read(manifest_name(1)))  # sealed, but version 1
    with pytest.raises(StoreError, match="holds version 1, not 2"):
        open_version(pages)


def test_a_reader_opening_a_run_compares_it_with_the_manifest(pages: PageStore) -> None:
    _publish(pages, [["a", str(i)] for i in range(200)])
    other = build_tree(pages, [["z", str(i)] for i in range(50)], shard=0).state.runs[0]
    state = open_version(pages).shard_state(0)
    run = state.runs[0]
    pages.write(f"{run}.index", pages.read(f"{other}.index"))  # a valid index, not its own
    with pytest.raises(CorruptPageError, match=r"is not the one the version's manifest names"):
        RunReader(pages, run, 0, state.run_sums[run])
    problems = inspect_store(pages).problems
    assert len(problems) == 1 and f"{run}.index" in problems[0]


def test_a_store_written_before_checksums_reads_and_check_says_what_it_cannot_verify(
    pages: PageStore,
) -> None:
    _publish(pages, [["a", "b"]])
    as_before_sealing(pages, 1)
    version = open_version(pages)
    assert not version.manifest.sealed and version.tree(0).count_nodes() == 2
    report = inspect_store(pages)
    assert report.problems == []
    assert len(report.notes) == 2
    assert "(versions/000001.json) were written before treestore sealed" in report.notes[0]
    assert "1 run(s) and 0 side file(s) were written before" in report.notes[1]
    # the next load writes a sealed manifest; the old run stays unverifiable until rewritten
    _publish(pages, [["a", "c"]])
    assert read_manifest(pages, 2, 2).sealed
    assert published_versions(pages) == [1, 2]


def test_sums_travel_with_a_state_and_are_kept_for_runs_carried(pages: PageStore) -> None:
    first = _publish(pages, [["a", str(i)] for i in range(100)])
    carried = first.trees[0]
    assert ShardState.from_json(json.loads(json.dumps(carried.to_json()))) == carried
    tree = ShardTree(pages, carried, shard=0)
    assert tree.commit().run_sums == carried.run_sums  # nothing new: the same runs and sums


def test_a_side_file_read_through_the_tree_is_compared_with_its_sum(pages: PageStore) -> None:
    name = "trees/shard-0000/x-pending.arrow"
    pages.write_table(name, pa.table({"record": ["a", "b"]}))
    state = ShardTree(pages, shard=0).commit(side={"pending": SideFiles((name,))})
    assert state.side_sums[name].size == len(pages.read(name))
    assert ShardTree(pages, state).read_side_table(name).column(0).to_pylist() == ["a", "b"]
    pages.write(name, pages.read(name).replace(b"ab", b"ac", 1))  # still an Arrow stream
    with pytest.raises(CorruptPageError, match=r"x-pending\.arrow is not what the version's"):
        ShardTree(pages, state).read_side_table(name)


def test_a_pages_file_of_the_wrong_size_is_refused_on_every_read(tmp_path: Path) -> None:
    """The size check happens when the reader opens the pages file; a refused file is not
    kept open, so the same reader refuses again (it does not answer from it later)."""
    pages = FilePageStore(tmp_path / "store")
    _publish(pages, [["a", str(i)] for i in range(200)])
    state = open_version(pages).shard_state(0)
    run = state.runs[0]
    with (tmp_path / "store" / f"{run}.pages").open("ab") as out:
        out.write(b"extra bytes")
    reader = RunReader(pages, run, 0, state.run_sums[run])
    for _ in range(2):
        with pytest.raises(CorruptPageError, match="the version's manifest says"):
            reader.page(0)


def test_a_run_index_is_decoded_once_and_a_changed_one_again(tmp_path: Path) -> None:
    """Readers of one run share one decoded index (a query's tasks decode each index
    once per worker); an index file whose bytes changed since is decoded again, so a
    damaged one is still found; and the process keeps at most KEPT_INDEXES of them."""
    import treestore.storage.run_index as run_index

    pages = FilePageStore(tmp_path / "store")
    state = _publish(pages, [["a", "b"], ["a", "c"], ["d"]]).trees[0]
    run = state.runs[0]
    first = RunReader(pages, run, 0, state.run_sums[run])
    second = RunReader(pages, run, 0, state.run_sums[run])
    assert second.pages is first.pages and second.keys is first.keys
    index = tmp_path / "store" / f"{run}.index"
    data = bytearray(index.read_bytes())
    data[len(data) // 2] ^= 0x01
    index.write_bytes(bytes(data))
    with pytest.raises(CorruptPageError, match="run index"):
        RunReader(pages, run, 0, state.run_sums[run])
    saved = run_index.KEPT_INDEXES
    run_index.KEPT_INDEXES = 1
    try:
        other = _publish(FilePageStore(tmp_path / "other"), [["x"]]).trees[0]
        RunReader(FilePageStore(tmp_path / "other"), other.runs[0], 0)
        assert len(run_index._parsed) == 1
    finally:
        run_index.KEPT_INDEXES = saved


def test_a_manifest_records_the_shard_hash_and_a_changed_store_json_is_refused(
    pages: PageStore,
) -> None:
    _publish(pages, [["a"]])
    assert read_manifest(pages, 1, 2).shard_hash == "xxhash64-utf8-seed42"
    config = json.loads(pages.read("store.json"))
    pages.write("store.json", json.dumps({**config, "hash": "other-hash"}).encode())
    said = "store.json says the shard hash is 'other-hash', but"
    with pytest.raises(StoreError, match=said):
        open_version(pages)
    with pytest.raises(StoreError, match=said):  # before the job's own hash is compared
        StoreWriter(pages, shards=2)


def test_a_manifest_written_before_it_recorded_the_hash_reads_as_before(pages: PageStore) -> None:
    _publish(pages, [["a"]])
    doc, _ = unseal(pages.read(manifest_name(1)))
    del doc["hash"]
    pages.write(manifest_name(1), seal(json.dumps(doc, indent=1, sort_keys=True).encode()))
    assert read_manifest(pages, 1, 2, "any-hash").shard_hash == ""
    assert open_version(pages).version == 1


def test_column_names_are_kept_from_version_to_version_and_absent_when_none(
    pages: PageStore,
) -> None:
    with store_lock(pages, "a test"):
        writer = StoreWriter(pages, shards=1)
        first = writer.publish({}, {}, REPORT)
        assert b'"columns"' not in first.to_json()  # a store without them: as before
        writer.columns["s"] = ("user", "at", "value")
        writer.publish({}, {}, REPORT)
        writer = StoreWriter(pages, shards=1)
        writer.publish({}, {}, REPORT)  # a later load of another job keeps them
    assert read_manifest(pages, 3, 1).columns == {"s": ("user", "at", "value")}
    doc, _ = unseal(pages.read(manifest_name(3)))
    assert doc["columns"] == {"s": ["user", "at", "value"]}
