"""`treestore check` finds every damage, naming the file in one line, and readers never
give a silent wrong answer: each damage below is either refused by ``info`` and ``query``
(one line) or does not touch what they read. A small store built without Spark."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from query.driver.runner import open_store
from shell.output.info import write_info
from treestore.errors import StoreError
from treestore.storage.page_cache import reset_cache
from treestore.storage.pagestore import FilePageStore
from treestore.storage.runs import RunReader
from treestore.storage.state import SideFiles
from treestore.storage.tree import ShardTree
from treestore.store.dedup_index import (
    DedupManifest,
    RunOwner,
    ShardIndex,
    publish_dedup_manifest,
    read_dedup_manifest,
)
from treestore.store.layout import CURRENT, DEDUP_INDEX, manifest_name, tree_folder
from treestore.store.lock import store_lock
from treestore.store.maintenance import collect_garbage, inspect_store
from treestore.store.sealed import seal, unseal
from treestore.store.versions import StoreWriter

QUERY = "root/+/+:+hits"
DEDUP_RUN_KEY = b'["key-00042"]'
REPORT = {"sources": {}, "started": "2025-01-01 00:00:00", "seconds": 1.0}


def _tree(
    pages: FilePageStore, shard: int, children: int, side: str | None, owner: str | None
) -> ShardTree:
    tree = ShardTree(pages, shard=shard, page_bytes=256, folder=tree_folder(shard), owner=owner)
    for parent in range(10):
        handle = tree.visit(tree.root_handle, "root")
        assert handle is not None
        handle = tree.visit(handle, f"p{parent}")
        assert handle is not None
        for child in range(children):
            tree.visit(handle, f"c{child:03d}", hits=shard + 1)
    groups = {}
    if side:
        pages.write_table(side, pa.table({"record": [f"r{i}" for i in range(50)]}))
        groups = {"pending": SideFiles((side,), {"records": 50})}
    tree.commit(side=groups)
    return tree


def _store(folder: Path) -> FilePageStore:
    """Two versions of a 2-shard store (the second adds to shard 1), a side file in
    shard 0 and a dedup index of one run per shard, covering version 2."""
    pages = FilePageStore(folder)
    with store_lock(pages, "a test"):
        writer = StoreWriter(pages, shards=2)
        side = "trees/shard-0000/side-pending.arrow"
        owner = writer.owner  # the store's identity, which its runs carry as a load's do
        trees = {s: _tree(pages, s, 30, side if s == 0 else None, owner).state for s in (0, 1)}
        writer.publish(trees, {}, REPORT)
        more = ShardTree(
            pages, trees[1], shard=1, page_bytes=256, folder=tree_folder(1), owner=owner
        )
        more.visit(more.root_handle, "extra")
        writer.publish({1: more.commit()}, {}, REPORT)
        runs = {}
        for shard, name in enumerate(("key", "other")):
            owner = RunOwner(writer.owner, "src", shard)
            index = ShardIndex(pages, f"dedup/src/shard-000{shard}", (), owner)
            keys = [f'["{name}-{i:05d}"]' for i in range(100)]
            index.add(np.arange(100, dtype=np.int64), pa.array(keys))
            runs[shard] = index.commit()
        publish_dedup_manifest(pages, DedupManifest(2).with_source("src", ["K"], runs))
    return pages


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x5A
    path.write_bytes(bytes(data))


def _one_run(store: Path, suffix: str) -> Path:
    return sorted((store / "trees" / "shard-0000").glob(f"*{suffix}"))[0]


def _current_garbage(store: Path) -> None:
    (store / "CURRENT").write_text("2x\n")


def _current_missing_manifest(store: Path) -> None:
    (store / "CURRENT").write_text("7\n")


def _manifest_byte(store: Path) -> None:
    path = store / manifest_name(2)
    path.write_bytes(path.read_bytes().replace(b'"nodes": 311', b'"nodes": 399', 1))


def _run_removed(store: Path) -> None:
    path = store / manifest_name(2)
    doc = json.loads(path.read_bytes())
    doc["trees"]["0"]["runs"] = doc["trees"]["0"]["runs"][:-1]  # still valid JSON
    path.write_text(json.dumps(doc, indent=1, sort_keys=True))


def _run_truncated(store: Path) -> None:
    path = _one_run(store, ".pages")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _run_flipped(store: Path) -> None:
    path = _one_run(store, ".pages")
    _flip(path, path.stat().st_size // 2)


def _index_damaged(store: Path) -> None:
    path = _one_run(store, ".index")
    _flip(path, path.stat().st_size // 2)


def _side_damaged(store: Path) -> None:
    path = store / "trees" / "shard-0000" / "side-pending.arrow"
    data = path.read_bytes()
    _flip(path, data.index(b"r42"))


def _dedup_run_damaged(store: Path) -> None:
    path = next(p for p in (store / "dedup").rglob("*.arrow") if DEDUP_RUN_KEY in p.read_bytes())
    _flip(path, path.read_bytes().index(DEDUP_RUN_KEY) + 3)


def _dedup_run_of_another_shard(store: Path) -> None:
    """A well-formed run of shard 1 copied over shard 0's: shard 0's index now holds shard
    1's keys (swapping the two makes two such lines; tests/loaders/load/test_dedup_load.py)."""
    index = read_dedup_manifest(FilePageStore(store))
    assert index is not None
    (first,), (second,) = (index.runs("src")[shard] for shard in (0, 1))
    (store / first).write_bytes((store / second).read_bytes())


def _current_rolled_back(store: Path) -> None:
    (store / CURRENT).write_text("1\n")  # version 2 was published: the dedup index covers it


def _dedup_index_damaged(store: Path) -> None:
    path = store / DEDUP_INDEX
    doc = json.loads(path.read_bytes())
    doc["sources"]["src"]["shards"] = {}  # still valid JSON: loads would count keys again
    path.write_text(json.dumps(doc, indent=1, sort_keys=True))


def _manifest_rewritten(store: Path) -> None:
    path = store / manifest_name(2)
    doc = json.loads(path.read_bytes())
    doc["trees"]["0"]["runs"] = doc["trees"]["0"]["runs"][:-1]
    path.write_text(json.dumps(doc))  # a JSON tool's layout: no longer the sealed bytes


def _manifest_resealed_lists_disagree(store: Path) -> None:
    path = store / manifest_name(2)
    doc, _ = unseal(path.read_bytes())
    doc["trees"]["0"]["runs"] = doc["trees"]["0"]["runs"][:-1]  # its sums stay
    path.write_bytes(seal(json.dumps(doc, indent=1, sort_keys=True).encode()))


def _dedup_index_rewritten(store: Path) -> None:
    path = store / DEDUP_INDEX
    doc = json.loads(path.read_bytes())
    doc["sources"]["src"]["shards"] = {}
    path.write_text(json.dumps(doc))


def _config_garbage(store: Path) -> None:
    (store / "store.json").write_bytes(b"\x00garbage")


def _config_edited(store: Path, key: str, value: object) -> None:
    path = store / "store.json"
    doc = json.loads(path.read_bytes())
    doc[key] = value
    path.write_text(json.dumps(doc, indent=1))


def _config_other_hash(store: Path) -> None:
    _config_edited(store, "hash", "murmur3-utf8-seed0")  # keys would be sought in wrong shards


def _config_other_shard_count(store: Path) -> None:
    _config_edited(store, "shards", 4)


def _current_deleted(store: Path) -> None:
    (store / "CURRENT").unlink()


def _run_copied_over(store: Path, source: Path, shard: int) -> None:
    """Put the first run of ``shard`` in the store at ``source`` in place of shard 0's run,
    files and manifest entries alike (each manifest sealed again, as a tool that knows the
    seal would): the manifests agree with the files, only the run knows where it is from."""
    (ours,) = json.loads((store / manifest_name(1)).read_bytes())["trees"]["0"]["runs"]
    theirs_entry = json.loads((source / manifest_name(1)).read_bytes())["trees"][str(shard)]
    theirs = theirs_entry["runs"][0]
    for suffix in (".pages", ".index"):
        (store / (ours + suffix)).write_bytes((source / (theirs + suffix)).read_bytes())
    for path in (store / "versions").glob("*.json"):
        doc, _ = unseal(path.read_bytes())
        doc["trees"]["0"]["run_sums"][ours] = theirs_entry["run_sums"][theirs]
        path.write_bytes(seal(json.dumps(doc, indent=1, sort_keys=True).encode()))


def _run_from_another_shard(store: Path) -> None:
    _run_copied_over(store, store, 1)


def _run_from_another_store(store: Path) -> None:
    other = store.parent / "other-store"
    _store(other)  # the same shards, built the same way: only its identity differs
    _run_copied_over(store, other, 0)


# damage -> (what check's one line names, what info does, what a query does)
CASES: dict[str, tuple[Callable[[Path], None], str, str, str]] = {
    "CURRENT garbage": (_current_garbage, "CURRENT is damaged", "refuses", "refuses"),
    "CURRENT names a missing manifest": (
        _current_missing_manifest,
        "Version 7's manifest",
        "refuses",
        "refuses",
    ),
    "CURRENT deleted": (_current_deleted, "CURRENT is missing", "refuses", "refuses"),
    "manifest byte edit": (_manifest_byte, "versions/000002.json", "refuses", "refuses"),
    "run removed from a manifest": (_run_removed, "versions/000002.json", "refuses", "refuses"),
    "run truncated": (_run_truncated, ".pages is", "works", "refuses"),
    "run byte flipped": (_run_flipped, ".pages fails its checksum", "works", "refuses"),
    "run index damaged": (_index_damaged, ".index is damaged", "works", "refuses"),
    "side file damaged": (_side_damaged, "side-pending.arrow (pending) fails", "works", "same"),
    "dedup run damaged": (_dedup_run_damaged, "next load rebuilds", "works", "same"),
    "dedup INDEX damaged": (_dedup_index_damaged, "INDEX is damaged", "works", "same"),
    "dedup run of another shard": (
        _dedup_run_of_another_shard,
        "belongs to shard 1 of source 'src', not to shard 0",
        "works",
        "same",
    ),
    "CURRENT rolled back": (_current_rolled_back, "CURRENT was rolled back", "works", "same"),
    "store.json garbage": (_config_garbage, "store.json is damaged", "refuses", "refuses"),
    "store.json names another shard hash than its manifests": (
        _config_other_hash,
        "store.json says the shard hash is 'murmur3-utf8-seed0', but",
        "refuses",
        "refuses",
    ),
    "store.json names another shard count than its manifests": (
        _config_other_shard_count,
        "store.json says the store has 4 shards, but",
        "refuses",
        "refuses",
    ),
    "manifest written again by a JSON tool, a run out": (
        _manifest_rewritten,
        "000002.json is not a valid manifest (it was sealed with",
        "refuses",
        "refuses",
    ),
    "manifest lists disagree (sums of a run it does not name)": (
        _manifest_resealed_lists_disagree,
        "which is not among its runs",
        "refuses",
        "refuses",
    ),
    "dedup INDEX written again by a JSON tool": (
        _dedup_index_rewritten,
        "INDEX is damaged (it was sealed with",
        "works",
        "same",
    ),
    "run moved from another shard": (
        _run_from_another_shard,
        "says it belongs to shard 1",
        "works",
        "refuses",
    ),
    "run copied from another store": (
        _run_from_another_store,
        "says it belongs to shard 0 of store",
        "works",
        "refuses",
    ),
}


def _query(store: Path) -> list[tuple[object, ...]]:
    reset_cache()  # pages read before the damage must not answer for it
    return open_store(str(store), None).query(QUERY).to_list()


def _outcome(action: Callable[[], object]) -> str:
    try:
        action()
    except StoreError as exc:
        assert "\n" not in str(exc), str(exc)
        return f"refuses: {exc}"
    return "works"


@pytest.mark.parametrize("case", list(CASES))
def test_check_names_every_damage_and_readers_never_answer_wrong(tmp_path: Path, case: str) -> None:
    damage, named, info, query = CASES[case]
    store = tmp_path / "store"
    _store(store)
    expected = _query(store)
    assert len(expected) == 2 * 10 * 30 and inspect_store(store).problems == []
    damage(store)
    problems = inspect_store(store).problems
    assert len(problems) == 1, problems
    assert named in problems[0] and "\n" not in problems[0], problems[0]
    info_outcome = _outcome(lambda: write_info(str(store), io.StringIO()))
    assert info_outcome.startswith(info), info_outcome
    rows: list[tuple[object, ...]] = []
    query_outcome = _outcome(lambda: rows.extend(_query(store)))
    if query == "same":
        assert query_outcome == "works" and rows == expected
    else:
        assert query_outcome.startswith(query), query_outcome


def test_check_and_the_query_name_the_same_damaged_page(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _store(store)
    run = _one_run(store, ".pages")
    reader = RunReader(FilePageStore(store), str(run.relative_to(store))[: -len(".pages")], 0)
    assert len(reader.pages) > 3
    damaged = len(reader.pages) // 2  # a page in the middle: neither the first nor the last
    _flip(run, reader.pages[damaged].offset + reader.pages[damaged].length // 2)
    (problem,) = inspect_store(store).problems
    named = f"page {damaged} of {store}/{run.relative_to(store)} fails its checksum"
    assert named in problem, problem
    assert named in _outcome(lambda: _query(store))


@pytest.mark.parametrize("span", ["whole run", "blocks", "from the damaged page"])
def test_reading_many_pages_at_once_names_the_damaged_one(tmp_path: Path, span: str) -> None:
    """Pages read together (a whole run, a merge's blocks) are checked together; the one
    that fails is named, not the first of the read."""
    store = tmp_path / "store"
    _store(store)
    run = _one_run(store, ".pages")
    reader = RunReader(FilePageStore(store), str(run.relative_to(store))[: -len(".pages")], 0)
    damaged = len(reader.pages) // 2
    _flip(run, reader.pages[damaged].offset + reader.pages[damaged].length // 2)
    read = {
        "whole run": lambda: reader.pages_columns(0, len(reader.pages)),
        "blocks": lambda: list(reader.column_blocks(block_bytes=1)),
        "from the damaged page": lambda: reader.pages_columns(damaged, len(reader.pages)),
    }[span]
    with pytest.raises(StoreError, match=rf"page {damaged} of .* fails its checksum"):
        read()
    assert len(reader.pages_columns(0, damaged)) == sum(p.entries for p in reader.pages[:damaged])


def test_check_notes_stray_files_under_trees_and_gc_removes_them(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _store(store)
    strays = [store / "trees" / "shard-0000" / "left-by-a-load.pages", store / "trees" / "x.txt"]
    for path in strays:
        path.write_bytes(b"not named by any version")
    report = inspect_store(store)
    assert report.problems == []
    (note,) = [n for n in report.notes if "named by no published version" in n]
    assert note.startswith("2 file(s) under") and "trees/x.txt" in note, note
    assert "left-by-a-load.pages" in note and "'treestore gc' removes them" in note
    assert collect_garbage(store)["files"] == 2
    assert not any(p.exists() for p in strays)
    assert not [n for n in inspect_store(store).notes if "named by no published" in n]
