"""A store that seals never takes an unsealed or rewritten document for an old one: whether
a manifest (or the dedup index) must be sealed is read from the document and from the
store's ``store.json``, not from the layout of its bytes; and a manifest's own lists agree
(each run named once and with its sums, no sums without a run or side file). Stores
written before sealing, and before ``store.json`` said from when it seals, still open."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from tests.support.old_stores import as_before_sealed_from, as_before_sealing
from treestore.errors import StoreError
from treestore.storage.pagestore import FilePageStore, MemoryPageStore, PageStore
from treestore.storage.state import FileSum, ShardState, SideFiles
from treestore.storage.tree import ShardTree
from treestore.store.dedup_index import (
    DedupManifest,
    ShardIndex,
    check_dedup_index,
    publish_dedup_manifest,
    read_dedup_manifest,
)
from treestore.store.layout import CONFIG, DEDUP_INDEX, manifest_name, tree_folder
from treestore.store.lock import store_lock
from treestore.store.maintenance import inspect_store
from treestore.store.sealed import SEALED_FROM, seal, unseal
from treestore.store.versions import Manifest, StoreWriter, open_version, read_config

REPORT = {"sources": {}, "started": "2025-01-01 00:00:00", "seconds": 1.0}
REWRITTEN = "another program wrote it again"


@pytest.fixture(params=["memory", "disk"])
def pages(request: pytest.FixtureRequest, tmp_path: Path) -> PageStore:
    """Every test runs against the in-memory and the on-disk page store."""
    return MemoryPageStore() if request.param == "memory" else FilePageStore(tmp_path / "store")


def _publish(pages: PageStore, shard: int, names: list[str]) -> Manifest:
    """Publish the next version with ``names`` added under ``shard``'s root."""
    with store_lock(pages, "a test"):
        writer = StoreWriter(pages, shards=2)
        base = writer.base.trees.get(shard)
        tree = ShardTree(pages, base, shard=shard, page_bytes=256, folder=tree_folder(shard))
        for name in names:
            tree.visit(tree.root_handle, name)
        return writer.publish({shard: tree.commit()}, {}, REPORT)


def _two_shards(pages: PageStore) -> None:
    """Version 1: a run in shard 0 and one in shard 1."""
    with store_lock(pages, "a test"):
        writer = StoreWriter(pages, shards=2)
        trees = {}
        for shard in (0, 1):
            tree = ShardTree(pages, shard=shard, folder=tree_folder(shard))
            for i in range(20):
                tree.visit(tree.root_handle, f"s{shard}-{i}")
            trees[shard] = tree.commit()
        writer.publish(trees, {}, REPORT)


def _nodes(pages: PageStore) -> int:
    version = open_version(pages)
    return sum(version.tree(shard).count_nodes() for shard in range(version.shards))


def _edit(pages: PageStore, name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The document ``name`` (its checksum keys kept, as a JSON tool sees it) after ``change``."""
    doc = json.loads(pages.read(name))
    change(doc)
    return doc


def _without_shard_1s_run(doc: dict[str, Any]) -> None:
    doc["trees"]["1"]["runs"] = []


def _config(pages: PageStore) -> dict[str, Any]:
    return dict(json.loads(pages.read(CONFIG)))


# how a JSON tool writes a manifest back (a run of shard 1 taken out of its list)
REWRITES: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "compact": lambda doc: json.dumps(doc).encode(),
    "indent 2": lambda doc: json.dumps(doc, indent=2).encode(),
    "indent 1, checksum keys dropped": lambda doc: json.dumps(
        {k: v for k, v in doc.items() if k not in ("sealed", "checksum")}, indent=1, sort_keys=True
    ).encode(),
    "as written before sealing (no checksum, no sums)": lambda doc: json.dumps(
        {
            **{k: v for k, v in doc.items() if k not in ("sealed", "checksum")},
            "trees": {
                shard: {k: v for k, v in tree.items() if k not in ("run_sums", "side_sums")}
                for shard, tree in doc["trees"].items()
            },
        },
        indent=1,
        sort_keys=True,
    ).encode(),
}


@pytest.mark.parametrize("rewrite", list(REWRITES))
def test_a_manifest_a_json_tool_wrote_again_is_refused_by_readers_and_check(
    pages: PageStore, rewrite: str
) -> None:
    """The issue's repro: a run taken out of a shard's list and the manifest written back
    by a JSON tool read as an old unsealed manifest; check said the store is sound and
    queries missed the run's nodes."""
    _two_shards(pages)
    assert _nodes(pages) == 40
    name = manifest_name(1)
    pages.write(name, REWRITES[rewrite](_edit(pages, name, _without_shard_1s_run)))
    with pytest.raises(
        StoreError, match=rf"versions/000001\.json is not a valid manifest .*{REWRITTEN}"
    ):
        open_version(pages)
    report = inspect_store(pages)
    assert len(report.problems) == 1, report.problems
    assert "versions/000001.json" in report.problems[0] and REWRITTEN in report.problems[0]
    assert "\n" not in report.problems[0]


def test_a_manifest_written_again_unchanged_is_refused_too(pages: PageStore) -> None:
    """Its checksum covers the exact bytes: a manifest in another layout cannot be verified,
    so it is refused even when nothing in it changed."""
    _two_shards(pages)
    name = manifest_name(1)
    pages.write(name, json.dumps(json.loads(pages.read(name))).encode())
    with pytest.raises(StoreError, match=REWRITTEN):
        open_version(pages)


def test_a_new_store_says_it_seals_from_its_first_version(pages: PageStore) -> None:
    _two_shards(pages)
    assert _config(pages)[SEALED_FROM] == 1 and read_config(pages)[SEALED_FROM] == 1


def test_a_store_json_whose_sealed_from_is_not_a_number_is_damaged(pages: PageStore) -> None:
    _two_shards(pages)
    pages.write(CONFIG, json.dumps({**_config(pages), SEALED_FROM: "one"}).encode())
    with pytest.raises(StoreError, match=r"store\.json is damaged"):
        open_version(pages)


def test_a_store_written_before_sealing_still_opens_and_seals_once_its_runs_have_sums(
    pages: PageStore,
) -> None:
    """A store of unsealed manifests without sums (as treestore wrote before sealing, no
    ``sealed_from``) reads as before; a load that still carries its old, unsummed run
    publishes a sealed manifest without marking the store (the run cannot have its sums);
    the unsealed manifest stays readable."""
    _publish(pages, 0, ["a", "b"])
    as_before_sealing(pages, 1)
    assert SEALED_FROM not in _config(pages)
    version = open_version(pages)
    assert not version.manifest.sealed and version.tree(0).count_nodes() == 2
    report = inspect_store(pages)
    assert report.problems == [] and "were written before treestore sealed" in report.notes[0]
    second = _publish(pages, 1, ["c"])  # shard 0 keeps its old run, without sums
    assert second.trees[0].runs and not second.trees[0].run_sums
    assert SEALED_FROM not in _config(pages)
    assert open_version(pages, 1).tree(0).count_nodes() == 2
    assert _nodes(pages) == 3 and inspect_store(pages).problems == []


def test_a_store_sealed_before_store_json_said_so_is_marked_by_its_next_load(
    pages: PageStore,
) -> None:
    """A store written since manifests are sealed but before ``store.json`` kept
    ``sealed_from``: its manifests are sealed and carry sums, so one rewritten keeps its
    checksum keys or its sums and is refused; its next load marks it from that version."""
    _two_shards(pages)
    as_before_sealed_from(pages)
    assert open_version(pages).manifest.sealed and _nodes(pages) == 40
    name = manifest_name(1)
    sealed = pages.read(name)
    stripped = _edit(pages, name, lambda doc: [doc.pop("sealed"), doc.pop("checksum")])
    pages.write(name, json.dumps(stripped, indent=1, sort_keys=True).encode())
    with pytest.raises(StoreError, match="it records sums of its files"):
        open_version(pages)
    pages.write(name, sealed)
    _publish(pages, 0, ["more"])
    assert _config(pages)[SEALED_FROM] == 2 and read_config(pages)["shards"] == 2
    assert open_version(pages, 1).manifest.sealed and _nodes(pages) == 41
    as_before_sealing(pages, 2)  # (which drops the mark too: put it back)
    pages.write(CONFIG, json.dumps({**_config(pages), SEALED_FROM: 2}).encode())
    with pytest.raises(StoreError, match="seals every manifest from version 2 on"):
        open_version(pages)


def _resealed(pages: PageStore, version: int, change: Callable[[dict[str, Any]], None]) -> None:
    """Version ``version``'s manifest changed and sealed again, as only a writer could."""
    name = manifest_name(version)
    doc, _ = unseal(pages.read(name))
    change(doc)
    pages.write(name, seal(json.dumps(doc, indent=1, sort_keys=True).encode()))


def _run_out_sums_left(doc: dict[str, Any]) -> None:
    doc["trees"]["1"]["runs"] = []


def _sums_out(doc: dict[str, Any]) -> None:
    del doc["trees"]["1"]["run_sums"]


def _run_twice(doc: dict[str, Any]) -> None:
    doc["trees"]["1"]["runs"] *= 2


def _run_of_another_shard(doc: dict[str, Any]) -> None:
    run = doc["trees"]["0"]["runs"][0]
    doc["trees"]["1"]["runs"].append(run)
    doc["trees"]["1"]["run_sums"][run] = doc["trees"]["0"]["run_sums"][run]


def _side_sums_without_a_file(doc: dict[str, Any]) -> None:
    doc["trees"]["1"]["side_sums"] = {"trees/shard-0001/gone.arrow": [10, "00000000000000ff"]}


DISAGREEMENTS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "sums without a run": (_run_out_sums_left, "shard 1 records the sums of the run"),
    "a run without its sums": (_sums_out, "shard 1 names the run .* without its sums"),
    "a run named twice": (_run_twice, "shard 1 names the run .* twice"),
    "a run of another shard": (_run_of_another_shard, "as shard 0 does"),
    "side sums without a side file": (_side_sums_without_a_file, "side file .*gone.arrow"),
}


@pytest.mark.parametrize("case", list(DISAGREEMENTS))
def test_a_manifest_whose_lists_disagree_is_refused_by_readers_and_check(
    pages: PageStore, case: str
) -> None:
    change, said = DISAGREEMENTS[case]
    _two_shards(pages)
    _resealed(pages, 1, change)
    with pytest.raises(
        StoreError, match=rf"versions/000001\.json is not a valid manifest \(.*{said}"
    ):
        open_version(pages)
    problems = inspect_store(pages).problems
    assert len(problems) == 1 and "versions/000001.json" in problems[0], problems


def test_sums_without_a_run_are_refused_in_a_store_written_before_it_said_it_seals(
    pages: PageStore,
) -> None:
    """The lists agree in every manifest (no sums of a run it does not name), whatever its
    store; a run without sums is allowed where the store does not say it seals."""
    _two_shards(pages)
    as_before_sealed_from(pages)
    written = pages.read(manifest_name(1))
    _resealed(pages, 1, _sums_out)
    assert _nodes(pages) == 40  # an old run, unsummed: readable, as before
    pages.write(manifest_name(1), written)
    _resealed(pages, 1, _run_out_sums_left)
    with pytest.raises(StoreError, match="records the sums of the run"):
        open_version(pages)


def test_a_writer_never_publishes_a_version_whose_lists_disagree(pages: PageStore) -> None:
    _two_shards(pages)
    state = open_version(pages).shard_state(1)
    unsummed = ShardState(state.runs, state.next_id, state.nodes, state.bytes)
    with store_lock(pages, "a test"), pytest.raises(StoreError, match="was not published"):
        StoreWriter(pages, shards=2).publish({1: unsummed}, {}, REPORT)
    assert open_version(pages).version == 1 and not pages.exists(manifest_name(2))
    side = {"x": SideFiles(("trees/shard-0001/a.arrow",))}
    sums = {"trees/shard-0001/b.arrow": FileSum(1, 2)}
    stray = replace(state, side=side, side_sums=sums)
    with store_lock(pages, "a test"), pytest.raises(StoreError, match=r"b\.arrow"):
        StoreWriter(pages, shards=2).publish({1: stray}, {}, REPORT)


def _dedup(pages: PageStore) -> tuple[str, ...]:
    """A dedup index of one source, a run in shard 0 and one in shard 1, covering 1."""
    runs: dict[int, tuple[str, ...]] = {}
    for shard in (0, 1):
        index = ShardIndex(pages, f"dedup/src/shard-{shard:04d}", ())
        keys = [f'["k{shard}-{i}"]' for i in range(40)]
        index.add(np.arange(40, dtype=np.int64), pa.array(keys))
        runs[shard] = index.commit()
    publish_dedup_manifest(pages, DedupManifest(1).with_source("src", ["K"], runs))
    return runs[0]


def test_a_dedup_index_a_json_tool_wrote_again_is_refused(pages: PageStore) -> None:
    """The same for ``dedup/INDEX``: a run taken out and the file written back compactly
    would make the next load apply again the records that run knew."""
    _two_shards(pages)
    _dedup(pages)
    doc = _edit(pages, DEDUP_INDEX, lambda doc: doc["sources"]["src"]["shards"].pop("1"))
    pages.write(DEDUP_INDEX, json.dumps(doc).encode())
    with pytest.raises(StoreError, match=rf"INDEX is damaged .*{REWRITTEN}"):
        read_dedup_manifest(pages)
    for key in ("sealed", "checksum"):
        doc.pop(key)
    pages.write(DEDUP_INDEX, json.dumps(doc, indent=1, sort_keys=True).encode())
    with pytest.raises(StoreError, match="seals its dedup index from version 1 on"):
        read_dedup_manifest(pages)
    problems = check_dedup_index(pages)
    assert len(problems) == 1 and "next load rebuilds" in problems[0]
    assert inspect_store(pages).problems == problems


def test_a_dedup_index_naming_a_run_twice_is_refused(pages: PageStore) -> None:
    _two_shards(pages)
    runs = _dedup(pages)
    manifest = read_dedup_manifest(pages)
    assert manifest is not None
    publish_dedup_manifest(pages, manifest.with_source("src", ["K"], {0: runs, 1: runs[:1]}))
    with pytest.raises(StoreError, match="is named twice"):
        read_dedup_manifest(pages)


def test_a_dedup_index_written_before_sealing_still_reads(pages: PageStore) -> None:
    """An unsealed index in a store that does not say it seals (written before), or one
    that covers a version before the store began to seal, reads as before."""
    _two_shards(pages)
    _dedup(pages)
    doc, _ = unseal(pages.read(DEDUP_INDEX))
    pages.write(DEDUP_INDEX, json.dumps(doc, indent=1, sort_keys=True).encode())
    pages.write(CONFIG, json.dumps({**_config(pages), SEALED_FROM: 2}).encode())
    found = read_dedup_manifest(pages)
    assert found is not None and found.covers == 1 and len(found.referenced()) == 2
    as_before_sealed_from(pages)
    assert read_dedup_manifest(pages) == found and check_dedup_index(pages) == []
