"""``treestore info``'s facts as one typed value: its JSON (the service's ``/stores/NAME``)
and its text say the same things: a follower and its last micro-batch's lag, the files it
set aside, a manifest a stopped load left, the dedup index. A small store without Spark."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from shell.output.info import store_info, write_info
from treestore.storage.pagestore import FilePageStore
from treestore.storage.tree import ShardTree
from treestore.store.dedup_index import (
    DedupManifest,
    RunOwner,
    ShardIndex,
    publish_dedup_manifest,
)
from treestore.store.layout import STREAM_UNREADABLE, manifest_name, tree_folder
from treestore.store.lock import store_lock
from treestore.store.versions import StoreWriter, open_version

NEWEST_NS = 1_735_689_590 * 10**9
"""The follower's newest file: 10 s before its load started (2025-01-01T00:00:00Z)."""
REPORT = {
    "sources": {"a": {"read": 5, "rejected": 0}, "b": {"read": 2, "rejected": 1}},
    "started": "2025-01-01T00:00:00Z",
    "seconds": 2.5,
    "stream": {"batch": 7, "newest_file_ns": NEWEST_NS},
}


def _store(folder: Path) -> FilePageStore:
    pages = FilePageStore(folder)
    with store_lock(pages, "a test"):
        writer = StoreWriter(pages, shards=3)
        tree = ShardTree(pages, shard=1, folder=tree_folder(1), owner=writer.owner)
        tree.visit(tree.root_handle, "x")
        writer.publish({1: tree.commit()}, {"f": {}}, REPORT)
        index = ShardIndex(pages, "dedup/src/shard-0001", (), RunOwner(writer.owner, "src", 1))
        index.add(np.arange(3, dtype=np.int64), pa.array(['["k1"]', '["k2"]', '["k3"]']))
        publish_dedup_manifest(
            pages, DedupManifest(1).with_source("src", ["K"], {1: index.commit()})
        )
    pages.write(STREAM_UNREADABLE, json.dumps(["d.csv", "a.csv", "c.csv", "b.csv"]).encode())
    return pages


def _text(store: Path) -> list[str]:
    out = io.StringIO()
    write_info(str(store), out)
    return out.getvalue().splitlines()


def test_a_followed_store_says_the_same_in_text_and_json(tmp_path: Path) -> None:
    pages = _store(tmp_path / "s")
    with store_lock(pages, "treestore load job.json --follow"):
        doc = store_info(open_version(pages)).to_json()
        lines = _text(tmp_path / "s")
    follower = doc["follower"]
    assert follower["running"] and follower["purpose"] == "treestore load job.json --follow"
    assert follower["last"] == {
        "batch": 7,
        "version": 1,
        "started": "2025-01-01T00:00:00Z",
        "newest_file_ns": NEWEST_NS,
        "lag_seconds": 12.5,  # landed 10 s before the load started, which took 2.5 s
    }
    assert any(
        line.startswith(f"  followed by {follower['purpose']}: pid {follower['pid']} on ")
        and "its last micro-batch 7 published version 1 at 2025-01-01T00:00:00Z" in line
        for line in lines
    )
    assert doc["unreadable"] == ["a.csv", "b.csv", "c.csv", "d.csv"]
    assert lines[5].startswith("  4 file(s) the follower could not read") and lines[5].endswith(
        ": a.csv, b.csv, c.csv ..."
    )
    assert doc["dedup"] == {"covers": 1, "sources": [{"name": "src", "keys": ["K"], "runs": 1,
                                                      "shards": 1}]}  # fmt: skip
    assert "dedup index covers version 1" in lines
    assert "  source src (keys K): 1 run(s) in 1 shard(s)" in lines
    assert doc["loads"] == [
        {
            "version": 1,
            "started": "2025-01-01T00:00:00Z",
            "seconds": 2.5,
            "sources": REPORT["sources"],
            "expired": [],
        }
    ]
    assert lines[-3:] == [
        "      source  read  rejected",
        "      a          5         0",
        "      b          2         1",
    ]


def test_without_a_follower_its_last_batch_and_a_stopped_load_are_said(tmp_path: Path) -> None:
    store = tmp_path / "s"
    _store(store)
    (store / manifest_name(2)).write_bytes((store / manifest_name(1)).read_bytes())
    doc = store_info(open_version(str(store))).to_json()
    lines = _text(store)
    assert doc["follower"]["running"] is False and doc["follower"]["last"]["batch"] == 7
    assert "  no follower now; the last one's micro-batch 7 published version 1" in lines
    assert doc["unpublished"] == [2] and any("not published: version(s) 2 " in x for x in lines)
    assert (doc["version"], doc["kept"], doc["shards"], doc["nodes"], doc["inputs"]) == (
        1, [1], 3, 1, 1,
    )  # fmt: skip
    assert [s.get("empty", False) for s in doc["shard_trees"]] == [True, False, True]
    assert lines[1].startswith("version 1 (kept: 1), 3 shards, 1 nodes, ")


def test_a_store_whose_jobs_dedup_nothing_says_nothing_of_a_dedup_index(tmp_path: Path) -> None:
    """Loads publish an index covering their version even when no source has dedup keys;
    info once said "dedup index covers version 1" for such a store."""
    pages = FilePageStore(tmp_path / "s")
    with store_lock(pages, "a test"):
        writer = StoreWriter(pages, shards=2)
        tree = ShardTree(pages, shard=1, folder=tree_folder(1), owner=writer.owner)
        tree.visit(tree.root_handle, "x")
        writer.publish({1: tree.commit()}, {"f": {}}, REPORT)
        publish_dedup_manifest(pages, DedupManifest(1))
    assert not any("dedup" in line for line in _text(tmp_path / "s")[1:])  # [0]: the path
    assert store_info(open_version(tmp_path / "s")).to_json()["dedup"] is None


def test_info_json_is_the_document_of_the_facts_the_text_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shell.cli import main

    _store(tmp_path / "s")
    assert main(["info", str(tmp_path / "s"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == store_info(open_version(tmp_path / "s")).to_json()
    assert (doc["version"], doc["shard_trees"][1]["nodes"], doc["dedup"]["covers"]) == (1, 1, 1)
    assert main(["info", str(tmp_path / "nowhere"), "--json"]) == 2  # an error is one line
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err
