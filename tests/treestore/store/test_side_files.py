"""Side files: kept with a shard's tree by a version, carried by commit, kept by gc, read
by check; and a manifest in the format stores already hold reads and writes unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from treestore.errors import StoreError
from treestore.storage.pagestore import FilePageStore, MemoryPageStore, PageStore
from treestore.storage.state import ShardState, SideFiles
from treestore.storage.tree import ShardTree, build_tree
from treestore.store.layout import tree_folder
from treestore.store.lock import store_lock
from treestore.store.maintenance import check_store, collect_garbage
from treestore.store.versions import Manifest, StoreWriter, open_version

MANIFEST = b"""{
 "inputs": {},
 "loads": [],
 "shards": 2,
 "trees": {
  "0": {
   "bytes": 512,
   "next_id": 9,
   "nodes": 8,
   "pending": {
    "files": [
     "trees/shard-0000/0123456789ab-pending.arrow"
    ],
    "records": 3,
    "time": 5000,
    "tree": "f00d"
   },
   "runs": [
    "trees/shard-0000/aaaaaaaaaaaa-000"
   ]
  },
  "1": {
   "bytes": 100,
   "next_id": 2,
   "nodes": 1,
   "runs": [
    "trees/shard-0001/bbbbbbbbbbbb-000"
   ]
  }
 },
 "version": 3
}"""
"""A manifest as treestore wrote it before side files had a name (pending records in it)."""


@pytest.fixture(params=["memory", "disk"])
def pages(request: pytest.FixtureRequest, tmp_path: Path) -> PageStore:
    """Every test runs against the in-memory and the on-disk page store."""
    return MemoryPageStore() if request.param == "memory" else FilePageStore(tmp_path / "store")


def test_a_manifest_of_todays_format_reads_and_writes_byte_for_byte() -> None:
    manifest = Manifest.from_json(MANIFEST, "versions/000003.json")
    side = manifest.trees[0].side["pending"]
    assert side.files == ("trees/shard-0000/0123456789ab-pending.arrow",)
    assert dict(side.meta) == {"records": 3, "time": 5000, "tree": "f00d"}
    assert manifest.trees[1].side == {}
    # written again, it gains only the record files key (see test_record_files.py)
    assert manifest.to_json() == MANIFEST.replace(
        b'"loads": [],', b'"loads": [],\n "record_files": {},'
    )
    assert manifest.side_files() == {"trees/shard-0000/0123456789ab-pending.arrow"}
    assert manifest.runs() == {
        "trees/shard-0000/aaaaaaaaaaaa-000",
        "trees/shard-0001/bbbbbbbbbbbb-000",
    }


def test_a_side_group_cannot_take_a_key_of_the_tree() -> None:
    with pytest.raises(StoreError, match="'runs'"):
        ShardState(side={"runs": SideFiles()})


def test_commit_carries_side_files_unless_replaced(pages: PageStore) -> None:
    kept = SideFiles(("trees/shard-0000/x.arrow",), {"n": 1})
    start = ShardState(side={"feature": kept, "other": SideFiles(("trees/shard-0000/y.arrow",))})
    tree = ShardTree(pages, start)
    tree.visit(tree.root_handle, "a")
    carried = tree.commit()
    assert carried.side == start.side and carried.nodes == 1
    tree = ShardTree(pages, carried)
    replaced = SideFiles(("trees/shard-0000/z.arrow",), {"n": 2})
    state = tree.commit(side={"feature": replaced, "other": None})
    assert state.side == {"feature": replaced}
    assert ShardState.from_json(json.loads(json.dumps(state.to_json()))) == state


def test_gc_keeps_the_side_files_of_kept_versions_and_check_reads_them(pages: PageStore) -> None:
    table = pa.table({"x": [1, 2, 3]})
    names = [f"trees/shard-0000/{n}-side.arrow" for n in ("first", "second")]
    with store_lock(pages, "a test"):
        writer = StoreWriter(pages, shards=1)
        state = build_tree(pages, [["a", "b"]], folder=tree_folder(0)).state
        for number, name in enumerate(names):
            pages.write_table(name, table)
            side = {"feature": SideFiles((name,), {"k": number})}
            with_side = ShardState(
                state.runs, state.next_id, state.nodes, state.bytes, side, state.run_sums
            )
            writer.publish({0: with_side}, {}, {"sources": {}})
    assert open_version(pages).shard_state(0).side["feature"].meta == {"k": 1}
    assert check_store(pages) == []
    with store_lock(pages, "gc"):
        collect_garbage(pages, keep=1)
    assert not pages.exists(names[0]) and pages.exists(names[1])
    assert all(pages.exists(f"{run}.pages") for run in state.runs)
    pages.write(names[1], pages.read(names[1])[:20])  # damaged
    problems = check_store(pages)
    assert len(problems) == 1 and names[1] in problems[0] and "feature" in problems[0]
