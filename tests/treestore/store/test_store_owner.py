"""A store's identity travels with its runs: a new store gets one in ``store.json``, the
trees of its versions write it into every run with the shard, and its readers and
``check`` refuse a run of another shard or store. A store written before (no identity in
``store.json``, no owner in its runs: ``data/store-before-owner``, written by treestore
before runs said what they belong to) still opens, answers, checks clean and loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from query.driver.runner import open_store
from treestore.storage.page_cache import reset_cache
from treestore.storage.pagestore import FilePageStore
from treestore.storage.run_index import parsed_index
from treestore.store.lock import store_lock
from treestore.store.maintenance import inspect_store
from treestore.store.versions import StoreWriter, open_version

BEFORE = Path(__file__).parent / "data" / "store-before-owner"
REPORT = {"sources": {}, "started": "2025-01-01 00:00:00", "seconds": 1.0}


def _add(store: Path, shard: int, name: str) -> None:
    """Publish a version that adds ``root/name`` to ``shard``, as a load does."""
    pages = FilePageStore(store)
    with store_lock(pages, "a test"):
        writer = StoreWriter(pages, shards=2)
        tree = open_version(pages).tree(shard)
        top = tree.visit(tree.root_handle, "root")
        assert top is not None
        tree.visit(top, name)
        writer.publish({shard: tree.commit()}, {}, REPORT)


def _owners(store: Path, shard: int) -> list[tuple[int | None, str | None]]:
    version = open_version(store)
    return [
        (index.shard, index.owner)
        for run in version.manifest.trees[shard].runs
        for index in [parsed_index((store / f"{run}.index").read_bytes())]
    ]


def test_a_new_stores_runs_carry_its_identity(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _add(store, 1, "a")
    owner = json.loads((store / "store.json").read_text())["id"]
    assert len(owner) == 32 and open_version(store).owner == owner
    assert _owners(store, 1) == [(1, owner)]
    _add(store, 1, "b")  # a later version's writer takes the identity from store.json
    assert {o for _, o in _owners(store, 1)} == {owner}
    assert inspect_store(store).problems == []


def test_a_store_written_before_runs_had_owners_still_reads_checks_and_loads(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    shutil.copytree(BEFORE, store)
    assert "id" not in json.loads((store / "store.json").read_text())
    assert _owners(store, 0) == [(None, None)]
    reset_cache()
    rows = open_store(str(store)).query("root/+/+:+hits").to_list()
    assert sorted(rows) == sorted([(f"s{s}-u{i}", "A", s + 1) for s in (0, 1) for i in range(5)])
    report = inspect_store(store)
    assert report.problems == [] and not any("belong" in note for note in report.notes)
    _add(store, 0, "new")  # the store keeps no identity: its new runs say their shard
    assert _owners(store, 0)[-1] == (0, None) and (None, None) in _owners(store, 0)
    assert inspect_store(store).problems == []
    reset_cache()
    assert ("new",) in open_store(str(store)).query("root/+").to_list()
