"""A load that fails cleanly (an exception while it holds the lock: disk full, too many
rejected records) removes what it wrote before letting the lock go, never a file a
published version uses, and keeps the rejected records its message points to."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from treestore.errors import LoadError, StoreError
from treestore.storage.pagestore import FilePageStore
from treestore.storage.state import SideFiles
from treestore.storage.tree import ShardTree
from treestore.store.dedup_index import DedupManifest, ShardIndex, publish_dedup_manifest
from treestore.store.layout import tree_folder
from treestore.store.lock import lock_holder, store_lock
from treestore.store.maintenance import check_store
from treestore.store.versions import StoreWriter, current_version

REPORT = {"sources": {}, "started": "2025-01-01 00:00:00", "seconds": 1.0}
STAMP = "20250101T000000-abcdef01"


class FullDisk(FilePageStore):
    """A store whose disk fills up when ``CURRENT`` is written (ENOSPC)."""

    full = False

    def write(self, name: str, data: bytes) -> None:
        if self.full and name == "CURRENT":
            raise self._failed(name, "cannot be written", OSError(errno.ENOSPC, "No space"))
        super().write(name, data)


def _files(folder: Path) -> set[str]:
    return {
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and not str(p.relative_to(folder)).startswith("locks/")
    }


def _write_a_load(pages: FilePageStore, writer: StoreWriter) -> dict[int, object]:
    """What a load's tasks and driver write before publishing: a run and a side file in
    each shard, a dedup run, rejected and expired records."""
    states = {}
    for shard in (0, 1):
        tree = ShardTree(
            pages, writer.base.trees.get(shard), shard=shard, folder=tree_folder(shard)
        )
        tree.visit(tree.root_handle, f"new-{shard}")
        side = f"trees/shard-{shard:04d}/new-pending.arrow"
        pages.write_table(side, pa.table({"x": [1]}))
        states[shard] = tree.commit(side={"pending": SideFiles((side,))})
    index = ShardIndex(pages, "dedup/src/shard-0000", ())
    index.add(np.array([5]), pa.array(['["k"]']))
    index.commit()
    pages.write(f"rejected/{STAMP}/part-0.jsonl", b'{"line": 1}\n')
    pages.write(f"expired/{STAMP}-shards/shard-0000.parquet", b"PAR1")
    return states


@pytest.fixture
def store(tmp_path: Path) -> FullDisk:
    """A store with one published version (a tree in each shard, a dedup index)."""
    pages = FullDisk(tmp_path / "store")
    with store_lock(pages, "the first load"):
        writer = StoreWriter(pages, shards=2)
        states = {}
        for shard in (0, 1):
            tree = ShardTree(pages, shard=shard, folder=tree_folder(shard))
            tree.visit(tree.root_handle, "old")
            states[shard] = tree.commit()
        writer.publish(states, {}, REPORT)
        index = ShardIndex(pages, "dedup/src/shard-0000", ())
        index.add(np.array([1]), pa.array(['["a"]']))
        runs = index.commit()
        publish_dedup_manifest(pages, DedupManifest(1).with_source("src", ["K"], {0: runs}))
    return pages


def test_a_load_failing_on_a_full_disk_leaves_only_what_was_published(
    store: FullDisk, tmp_path: Path
) -> None:
    before = _files(tmp_path / "store")
    store.full = True
    with pytest.raises(StoreError, match="CURRENT cannot be written"), store_lock(store, "load"):
        writer = StoreWriter(store, shards=2)
        states = _write_a_load(store, writer)
        assert len(_files(tmp_path / "store")) > len(before) + 6
        writer.publish(states, {}, REPORT)  # type: ignore[arg-type]
    assert _files(tmp_path / "store") == before  # the unpublished manifest went too
    assert current_version(store) == 1 and check_store(store) == []
    assert lock_holder(store) is None


def test_the_rejected_records_a_failed_load_points_to_are_kept(
    store: FullDisk, tmp_path: Path
) -> None:
    before = _files(tmp_path / "store")
    message = f"3 records were rejected ... All kept ones are in {store.location}/rejected/{STAMP}/"
    with pytest.raises(LoadError, match="rejected"), store_lock(store, "load"):
        _write_a_load(store, StoreWriter(store, shards=2))
        raise LoadError(message)
    assert _files(tmp_path / "store") == before | {f"rejected/{STAMP}/part-0.jsonl"}


def test_a_process_that_lost_the_lock_removes_nothing(store: FullDisk, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), store_lock(store, "a stalled load"):
        _write_a_load(store, StoreWriter(store, shards=2))
        written = _files(tmp_path / "store")
        # another load took the lock over (this one stalled past its lease) and writes now
        store.write("locks/000099.json", json.dumps({"pid": os.getpid() + 1}).encode())
        raise RuntimeError("the stalled load fails")
    assert _files(tmp_path / "store") == written
