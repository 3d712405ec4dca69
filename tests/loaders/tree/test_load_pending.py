"""Pending update-only records: kept when their node is missing, applied when it appears."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from loaders import load_job, run_load
from loaders.load.report import format_load_report
from loaders.tree.pending import PendingState
from shell.output.info import write_info
from tests.support.jobs import PENDING_JOB
from treestore.sharding import shard_of
from treestore.store.maintenance import check_store, collect_garbage
from treestore.store.versions import open_version


def _uids() -> tuple[str, str, str]:
    """Two UIDs on different shards (the second's shard gets no record in later loads),
    and a third on the first one's shard."""
    first = next(f"u{i}" for i in range(100) if shard_of(f"u{i}", 2) == 0)
    second = next(f"u{i}" for i in range(100) if shard_of(f"u{i}", 2) == 1)
    third = next(f"u{i}" for i in range(100) if shard_of(f"u{i}", 2) == 0 and f"u{i}" != first)
    return first, second, third


def _load(spark: Any, folder: Path, name: str, source: str, rows: list[str]) -> dict[str, Any]:
    (folder / source).mkdir(exist_ok=True)
    (folder / source / f"{name}.csv").write_text("\n".join(rows) + "\n")
    result = run_load(spark, load_job(folder / "job.json"), folder / "store")
    return result.report


def _expired(store: Path, report: dict[str, Any]) -> list[dict[str, Any]]:
    """The expired records a load wrote (fields the test names, and why), sorted."""
    import pyarrow.parquet as pq

    rows = []
    for name in report["expired"]["files"]:
        for row in pq.read_table(store / name).to_pylist():
            rows.append({k: v for k, v in row.items() if k not in ("element", "MAPPING")})
    return sorted(rows, key=repr)


def test_a_record_before_its_node_waits_and_applies_when_the_node_appears(
    spark: Any, tmp_path: Path
) -> None:
    (tmp_path / "job.json").write_text(json.dumps(PENDING_JOB))
    (tmp_path / "a").mkdir()
    known, late, other = _uids()
    (tmp_path / "a" / "first.csv").write_text(f"U\n{other}\n")
    first = _load(spark, tmp_path, "first", "m", ["U,P", f"{known},p1", f"{late},p2"])
    assert first["pending"] == {"buffered": 2, "applied": 0, "expired": 0, "waiting": 2}
    shown = io.StringIO()
    write_info(str(tmp_path / "store"), shown)
    assert shown.getvalue().count("1 pending update-only record(s) waiting") == 2  # per shard
    assert first["sources"]["mapping"]["pending"] == 2
    assert first["sources"]["mapping"]["missed_updates"] == 0
    assert any("2 kept for later loads" in line for line in format_load_report(first, "s"))
    states = open_version(tmp_path / "store").manifest.trees.values()
    files = [f for s in states for f in PendingState.of(s).files]
    assert len(files) == 2  # one per shard
    damaged = tmp_path / "store" / files[0]
    kept = damaged.read_bytes()
    damaged.write_bytes(kept[: len(kept) // 2])
    assert any(files[0] in problem for problem in check_store(tmp_path / "store"))
    damaged.write_bytes(kept)
    assert check_store(tmp_path / "store") == []

    second = _load(spark, tmp_path, "second", "a", ["U", known])  # only shard 0 gets records
    assert second["pending"] == {"buffered": 0, "applied": 1, "expired": 0, "waiting": 1}
    paths: dict[tuple[str, ...], int] = {}
    for shard in (0, 1):  # a path's hits summed over the shards
        for path, node in open_version(tmp_path / "store").tree(shard).walk():
            paths[path] = paths.get(path, 0) + node.hits
    assert paths[("root", known)] == 2  # its attribute record, then the mapping record
    assert paths[("root", known, "M", "p1")] == 1
    assert paths[("root", known, "M", "p1", "seen")] == 1  # the rest of the tree ran too
    assert paths[("root",)] == 4  # the waiting record is not counted again above its element
    assert ("root", late) not in paths

    third = _load(spark, tmp_path, "third", "a", ["U", other])
    assert third["pending"] == {"buffered": 0, "applied": 0, "expired": 1, "waiting": 0}
    # the expired record is written out with its fields and why, and listed
    assert _expired(tmp_path / "store", third) == [
        {
            "U": late,
            "P": "p2",
            "source": "mapping",  # where it was read, carried through two loads
            "file": str((tmp_path / "m" / "first.csv").resolve()),
            "line": 3,
            "looked_for": late,
            "weight": 1,
            "why": "its loads ran out",
        }
    ]
    assert any("expired pending records" in line for line in format_load_report(third, "s"))
    shown = io.StringIO()
    write_info(str(tmp_path / "store"), shown)
    (only,) = third["expired"]["files"]  # the shards' parts merged: one file per version
    assert only.startswith("expired/") and only.endswith(".parquet")
    assert f"expired pending records in {tmp_path / 'store'}/{only}" in shown.getvalue()
    assert list((tmp_path / "store" / "expired").iterdir()) == [tmp_path / "store" / only]
    version = open_version(tmp_path / "store")
    assert all(not PendingState.of(state).files for state in version.manifest.trees.values())
    collect_garbage(tmp_path / "store", keep=1)
    assert not list((tmp_path / "store" / "trees").rglob("*-pending.arrow"))


def test_shards_no_record_reaches_retry_their_records_in_every_load(
    spark: Any, tmp_path: Path
) -> None:
    """A shard with waiting records is retried by the shard task that serves it when the
    load's records all go to other shards, and when the load's files hold no record at all."""
    (tmp_path / "job.json").write_text(json.dumps(PENDING_JOB))
    (tmp_path / "a").mkdir()
    known, late, _other = _uids()
    first = _load(spark, tmp_path, "first", "m", ["U,P", f"{late},p2"])  # waits in shard 1
    assert first["pending"] == {"buffered": 1, "applied": 0, "expired": 0, "waiting": 1}
    second = _load(spark, tmp_path, "second", "a", ["U", known])  # only shard 0's record
    assert second["pending"] == {"buffered": 0, "applied": 0, "expired": 0, "waiting": 1}

    third = _load(spark, tmp_path, "third", "a", ["U"])  # a file without records
    assert third["sources"]["attributes"]["files"] == 1
    assert third["sources"]["attributes"]["read"] == 0
    assert third["pending"] == {"buffered": 0, "applied": 0, "expired": 1, "waiting": 0}
    assert [r["U"] for r in _expired(tmp_path / "store", third)] == [late]


def test_without_pending_an_early_record_is_dropped_and_counted(spark: Any, tmp_path: Path) -> None:
    job = json.loads(json.dumps(PENDING_JOB))
    del job["tree"]["root"][1]["list"][1][0]["pending"]
    (tmp_path / "job.json").write_text(json.dumps(job))
    (tmp_path / "a").mkdir()
    known, _late, _other = _uids()
    first = _load(spark, tmp_path, "first", "m", ["U,P", f"{known},p1"])
    assert first["sources"]["mapping"]["missed_updates"] == 1
    assert first["pending"]["waiting"] == 0
    second = _load(spark, tmp_path, "second", "a", ["U", known])
    assert second["pending"]["applied"] == 0
    tree = open_version(tmp_path / "store").tree(0)
    assert ("root", known, "M", "p1") not in dict(tree.walk())


def test_waiting_records_survive_a_name_node_a_list_field_and_another_job_path(
    spark: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """Records kept where the element's ``name`` node is missing; a field that is text in
    one load and a list in the next (two files of waiting records); the job file named by
    another path when they are retried."""
    job = json.loads(json.dumps(PENDING_JOB))
    job["shards"] = 1
    job["source"][1]["format"] = "json"
    del job["tree"]["root"][2]
    attribute, mapping = job["tree"]["root"][1]["list"]
    attribute[0]["name"] = mapping[0]["name"] = "uids"
    del mapping[1]
    mapping[1]["name"] = "puids"
    (tmp_path / "job.json").write_text(json.dumps(job))
    (tmp_path / "a").mkdir()
    first = _load(spark, tmp_path, "first", "m", [json.dumps({"U": "u1", "P": "p1"})])
    second = _load(spark, tmp_path, "second", "m", [json.dumps({"U": "u2", "P": ["p2", "p3"]})])
    assert (first["pending"]["buffered"], second["pending"]["waiting"]) == (1, 2)
    state = open_version(tmp_path / "store").manifest.trees[0]
    assert len(PendingState.of(state).files) == 2  # two schemas
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a" / "third.csv").write_text("U\nu1\nu2\n")
    third = run_load(spark, load_job("job.json"), "store").report
    assert third["pending"] == {"buffered": 0, "applied": 2, "expired": 0, "waiting": 0}
    hits = {p: n.hits for p, n in open_version(tmp_path / "store").tree(0).walk()}
    assert hits[("root",)] == 4  # each record once: the retried ones are not counted again
    assert hits[("root", "uids")] == 4  # the two attribute records and the two retried ones
    assert hits[("root", "uids", "u1", "puids", "p1")] == 1
    assert (
        hits[("root", "uids", "u2", "puids", "p2")]
        == hits[("root", "uids", "u2", "puids", "p3")]
        == 1
    )


def test_waiting_records_expire_when_the_watermark_of_their_time_passes(
    spark: Any, tmp_path: Path
) -> None:
    """``pending: {"time": "T", "delay": 1000}``: a record older than the newest time its
    shard has seen minus 1000 expires (at once when it arrives late); a bad time is
    rejected with its line."""
    job = json.loads(json.dumps(PENDING_JOB))
    job["shards"] = 1
    job["tree"]["root"][1]["list"][1][0]["pending"] = {"time": "T", "delay": 1000}
    (tmp_path / "job.json").write_text(json.dumps(job))
    (tmp_path / "a").mkdir()
    first = _load(
        spark, tmp_path, "first", "m", ["U,P,T", "u1,p1,100", "u2,p2,5000", "u3,p3,4500", "u4,p4,x"]
    )
    # watermark 5000 - 1000: u1 (100) is late at once; u2 and u3 wait; u4's time is rejected
    assert first["pending"] == {"buffered": 3, "applied": 0, "expired": 1, "waiting": 2}
    assert first["rejected"]["count"] == 1
    assert PendingState.of(open_version(tmp_path / "store").manifest.trees[0]).time == 5000
    assert [
        (r["U"], r["T"], r["why"], r["source"], r["line"])
        for r in _expired(tmp_path / "store", first)
    ] == [("u1", "100", "the watermark passed it", "mapping", 2)]
    second = _load(spark, tmp_path, "second", "a", ["U,T", "u2,9000"])
    # u2 finds its node; the watermark moves to 8000 and u3 (4500) expires
    assert second["pending"] == {"buffered": 0, "applied": 1, "expired": 1, "waiting": 0}
    assert [
        (r["U"], r["T"], r["why"], Path(r["file"]).name, r["line"])
        for r in _expired(tmp_path / "store", second)
    ] == [("u3", "4500", "the watermark passed it", "first.csv", 4)]
    hits = {p: n.hits for p, n in open_version(tmp_path / "store").tree(0).walk()}
    assert hits[("root", "u2", "M", "p2")] == 1 and ("root", "u3") not in hits


def test_a_node_made_later_in_the_same_load_takes_its_record_and_a_new_tree_resets_the_watermark(
    spark: Any, tmp_path: Path
) -> None:
    job = json.loads(json.dumps(PENDING_JOB))
    job["shards"] = 1
    job["source"].reverse()  # mappings first: their UIDs come from a later source
    job["tree"]["root"][1]["list"][1][0]["pending"] = {"time": "T", "delay": 1000}
    (tmp_path / "job.json").write_text(json.dumps(job))
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "first.csv").write_text("U,T\nu1,1000\n")
    first = _load(spark, tmp_path, "first", "m", ["U,P,T", "u1,p1,1000"])
    assert first["pending"] == {"buffered": 1, "applied": 1, "expired": 0, "waiting": 0}
    assert ("root", "u1", "M", "p1") in dict(open_version(tmp_path / "store").tree(0).walk())

    job["tree"]["root"][1]["list"][1][0]["pending"] = {"time": "T", "delay": 5}
    (tmp_path / "job.json").write_text(json.dumps(job))  # another tree: a new watermark
    second = _load(spark, tmp_path, "second", "m", ["U,P,T", "u2,p2,50", "u3,p3,", "u4,p4,+5"])
    # u2 waits (watermark 50 - 5, not 1000 - 5); u3 has no time and could wait for ever: it
    # expires; u4's time is not an optional minus and digits: rejected
    assert second["pending"] == {"buffered": 2, "applied": 0, "expired": 1, "waiting": 1}
    assert second["rejected"]["count"] == 1
    assert PendingState.of(open_version(tmp_path / "store").manifest.trees[0]).time == 50
