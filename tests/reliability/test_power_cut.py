"""Power cuts (see :mod:`tests.support.reliability.powercut`): the model loses what POSIX
does not promise to keep; the page store makes each file durable before it publishes
it; a version published, a load, a gc and a follower's micro-batch cut at any point
leave the previous or the new version exact, ``check`` clean and the next command exact.

The rounds with Spark cut each run at ``TREESTORE_POWERCUT_POINTS`` points (default 3)
chosen at random and run the next command on one crash state;
``TREESTORE_POWERCUT_SEED`` replays a round (the failure message gives its seed).
``make reliability`` cuts at every point (``python -m tests.reliability.table``).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
from pathlib import Path

import pytest

from tests.support.reliability.powercut import (
    Disk,
    Op,
    Plan,
    crash_plans,
    journaling,
    materialize,
    read_journal,
)
from tests.support.reliability.powercut_rounds import (
    KINDS,
    SECOND_BATCH_ROWS,
    points_from_env,
    run_power_cut_round,
    seed_from_env,
)
from tests.support.reliability.scenario import Scenario, prepare_scenario
from treestore.storage.pagestore import FilePageStore
from treestore.storage.tree import ShardTree
from treestore.store.layout import tree_folder
from treestore.store.lock import store_lock
from treestore.store.maintenance import check_store, collect_garbage
from treestore.store.versions import StoreWriter, current_version, open_version, read_manifest


def _blob(blobs: Path, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    blobs.mkdir(parents=True, exist_ok=True)
    (blobs / digest).write_bytes(data)
    return digest


def _disk(tmp_path: Path, ops: list[Op]) -> Disk:
    snapshot = tmp_path / "snapshot"
    (snapshot / "kept").mkdir(parents=True)
    (snapshot / "kept" / "old").write_bytes(b"old bytes")
    disk = Disk.of_snapshot(snapshot, tmp_path / "blobs")
    for op in ops:
        disk.apply(op)
    return disk


def _keep(name: str, keep: int | None, lost: bool = True) -> Plan:
    """A plan keeping ``keep`` changes of every folder (None: all)."""
    return Plan(
        name,
        lambda folder, n: n if keep is None else min(keep, n),
        (lambda synced, data: synced or b"") if lost else (lambda synced, data: data),
    )


def test_a_rename_not_followed_by_a_sync_of_its_folder_may_be_undone(tmp_path: Path) -> None:
    data = _blob(tmp_path / "blobs", b"new bytes")
    ops = [
        Op("write", "kept/.new.tmp", blob=data),
        Op("fsync", "kept/.new.tmp"),
        Op("rename", "kept/.new.tmp", "kept/new"),
    ]
    disk = _disk(tmp_path, ops)
    lost, kept = disk.crash(_keep("lost", 0)), disk.crash(_keep("kept", None))
    assert "kept/new" not in lost and "kept/.new.tmp" not in lost
    assert kept["kept/new"] == b"new bytes" and "kept/.new.tmp" not in kept
    halfway = disk.crash(_keep("the file made, not renamed", 1))
    assert halfway["kept/.new.tmp"] == b"new bytes" and "kept/new" not in halfway
    assert lost["kept/old"] == kept["kept/old"] == b"old bytes"
    disk.apply(Op("fsyncdir", "kept"))
    assert disk.crash(_keep("lost", 0))["kept/new"] == b"new bytes"


def test_bytes_written_after_the_last_sync_are_lost_or_cut(tmp_path: Path) -> None:
    data = bytes(range(200))
    ops = [Op("write", "kept/file", blob=_blob(tmp_path / "blobs", data)), Op("fsyncdir", "kept")]
    disk = _disk(tmp_path, ops)
    assert disk.crash(_keep("lost", 0))["kept/file"] == b""  # its name durable, its bytes not
    assert disk.crash(_keep("kept", None, lost=False))["kept/file"] == data
    seen = set()
    for plan in crash_plans(disk, random.Random(5), 40):
        got = disk.crash(plan)["kept/file"]
        assert got is not None
        cut = got.rstrip(b"\0") if len(got) == len(data) else got
        assert data.startswith(cut) or got == data, got
        seen.add(len(got) if got != data else -1)
    assert len(seen) > 3  # cut at several offsets
    disk.apply(Op("fsync", "kept/file"))
    assert all(
        disk.crash(plan)["kept/file"] == data for plan in crash_plans(disk, random.Random(5), 5)
    )


def test_a_folder_whose_name_was_not_synced_loses_all_it_holds(tmp_path: Path) -> None:
    data = _blob(tmp_path / "blobs", b"run")
    ops = [
        Op("mkdir", "trees"),
        Op("write", "trees/run", blob=data),
        Op("fsync", "trees/run"),
        Op("fsyncdir", "trees"),
        Op("unlink", "kept/old"),
    ]
    disk = _disk(tmp_path, ops)
    only_trees = Plan(
        "trees kept", lambda folder, n: n if folder == "trees" else 0, _keep("", 0).bytes_of
    )
    state = disk.crash(only_trees)
    assert "trees" not in state and "trees/run" not in state
    assert state["kept/old"] == b"old bytes"  # the removal was not synced either
    disk.apply(Op("fsyncdir", ""))
    disk.apply(Op("fsyncdir", "kept"))
    state = disk.crash(_keep("lost", 0))
    assert state["trees/run"] == b"run" and "kept/old" not in state
    assert [p.name for p in crash_plans(disk, random.Random(1), 0)] == [
        "everything not durable lost",
        "everything kept (as a SIGKILL)",
    ]


def test_the_page_store_syncs_each_file_before_publishing_it_and_its_folder_after(
    tmp_path: Path,
) -> None:
    store = FilePageStore(tmp_path / "store")
    (tmp_path / "store").mkdir()
    with journaling(tmp_path / "journal"):
        store.write("trees/shard-0001/run.pages", b"pages")
        assert store.create("versions/000001.json", b"{}")
        store.write("CURRENT", b"1\n")
    ops = [
        re.sub(r"\.[\w.]+\.tmp", "TEMP", str(op))
        for op in read_journal(tmp_path / "journal", tmp_path / "store")
    ]
    assert ops == [
        "mkdir trees",
        "fsyncdir .",
        "mkdir trees/shard-0001",
        "fsyncdir trees",
        "write trees/shard-0001/TEMP",
        "fsync trees/shard-0001/TEMP",
        "rename trees/shard-0001/TEMP -> trees/shard-0001/run.pages",
        "fsyncdir trees/shard-0001",
        "mkdir versions",
        "fsyncdir .",
        "write versions/TEMP",
        "fsync versions/TEMP",
        "link versions/TEMP -> versions/000001.json",
        "fsyncdir versions",
        "unlink versions/TEMP",
        "write TEMP",
        "fsync TEMP",
        "rename TEMP -> CURRENT",
        "fsyncdir .",
    ]
    written = json.loads((tmp_path / "journal" / "journal.jsonl").read_text().splitlines()[4])
    assert (tmp_path / "journal" / "blobs" / written["blob"]).read_bytes() == b"pages"


def test_a_version_published_and_cut_at_any_point_reads_as_the_old_or_the_new_one(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    writer = StoreWriter(store, shards=2)
    writer.publish({}, {"first": {"records": 1}}, {"load": 1})
    snapshot = tmp_path / "snapshot"
    shutil.copytree(store, snapshot)
    with journaling(tmp_path / "journal"):
        StoreWriter(store, shards=2).publish({}, {"second": {"records": 2}}, {"load": 2})
    ops = read_journal(tmp_path / "journal", store)
    disk = Disk.of_snapshot(snapshot, tmp_path / "journal" / "blobs")
    rng = random.Random(11)
    tried = 0
    for point in range(len(ops) + 1):
        if point:
            disk.apply(ops[point - 1])
        for plan in crash_plans(disk, rng, 3):
            where = materialize(disk.crash(plan), tmp_path / "states" / str(tried))
            pages = FilePageStore(where)
            version = current_version(pages)
            inputs = set(read_manifest(pages, version, 2).inputs)
            assert (version, inputs) in ((1, {"first"}), (2, {"first", "second"})), plan.name
            assert check_store(where) == [], (point, plan.name)
            tried += 1
    assert tried > 20


def _cut_everywhere(
    tmp_path: Path, snapshot: Path, store: Path, seed: int
) -> list[tuple[int, str, dict[str, bytes | None]]]:
    """Every crash state of the journal in ``tmp_path / "journal"``: (cut, plan, state)."""
    ops = read_journal(tmp_path / "journal", store)
    disk = Disk.of_snapshot(snapshot, tmp_path / "journal" / "blobs")
    rng = random.Random(seed)
    states = []
    for point in range(len(ops) + 1):
        if point:
            disk.apply(ops[point - 1])
        states += [(point, plan.name, disk.crash(plan)) for plan in crash_plans(disk, rng, 1)]
    return states


def _publish_paths(store: Path, paths: list[list[str]]) -> None:
    """Publish a version whose shard 0 gains ``paths`` (a run of its own)."""
    pages = FilePageStore(store)
    with store_lock(pages, "a test"):
        writer = StoreWriter(pages, shards=2)
        tree = ShardTree(pages, writer.base.trees.get(0), shard=0, folder=tree_folder(0))
        for path in paths:
            handle = tree.root_handle
            for name in path:
                found = tree.visit(handle, name)
                assert found is not None
                handle = found
        writer.publish({0: tree.commit()}, {}, {"sources": {}})


def test_a_gc_cut_at_any_point_leaves_every_kept_version_whole(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for i in range(9):  # runs past compaction's limit: the newest no longer use the first ones
        _publish_paths(store, [["a", f"n{i}"], [f"b{i}"]])
    old = {run for v in (1, 2, 3) for run in read_manifest(FilePageStore(store), v, 2).runs()}
    assert old - read_manifest(FilePageStore(store), 9, 2).runs()
    answer = sorted(open_version(store).tree(0).walk())
    shutil.copytree(store, tmp_path / "snapshot")
    with journaling(tmp_path / "journal"):
        pages = FilePageStore(store)
        with store_lock(pages, "gc"):
            assert collect_garbage(pages, keep=1)["files"] > 0
    states = _cut_everywhere(tmp_path, tmp_path / "snapshot", store, seed=4)
    for n, (point, plan, state) in enumerate(states):
        where = materialize(state, tmp_path / "states" / str(n))
        assert sorted(open_version(where).tree(0).walk()) == answer, (point, plan)
        assert check_store(where) == [], (point, plan)
    assert len(states) > 30


@pytest.fixture(scope="module")
def scenario(spark: object, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    """The demo at version 1 plus a small seeded second batch, and the answers expected."""
    folder = tmp_path_factory.mktemp("powercut")
    return prepare_scenario(spark, folder, SECOND_BATCH_ROWS, seed=3)


@pytest.mark.spark
@pytest.mark.parametrize("kind", KINDS)
def test_a_power_cut_leaves_the_old_or_the_new_version_exact_and_the_next_command_exact(
    spark: object, scenario: Scenario, tmp_path: Path, kind: str
) -> None:
    seed = seed_from_env()
    outcome = run_power_cut_round(
        spark, scenario, kind, tmp_path, seed, cuts=points_from_env(), next_commands=1
    )
    assert outcome.operations > 5 and outcome.distinct >= 1 and outcome.next_runs == 1
    failed = [o.line() for o in outcome.failures]
    assert failed == [], f"{len(failed)} crash states of {kind} failed (seed {seed})"
