"""Duplicate-free incremental loads end to end: within a load, across loads, a crash
between data and index, and a deleted, a damaged or a weakly hashed index."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import treestore
from shell.cli import main
from tests.support.jobs import CLICKS_FIRST, CLICKS_SECOND, load_clicks, write_clicks
from tests.support.load_processes import kill_all, start_load, wait_for

pytestmark = pytest.mark.spark


def _hits(spark: Any, folder: Path) -> dict[tuple[str, str], int]:
    rows = treestore.open(folder / "store", spark=spark).query("root/+/+:+hits").to_list()
    return {(uid, url): hits for uid, url, hits in rows}


def test_duplicates_within_and_across_loads(spark: Any, clicks: Path) -> None:
    write_clicks(clicks, "c1.tsv", CLICKS_FIRST)
    write_clicks(clicks, "c2.tsv", [(1, "u2", "a"), (5, "u4", "e")])  # repeats a row of c1
    report = load_clicks(spark, clicks)
    counts = report["sources"]["clicks"]
    assert counts["read"] == 7
    assert counts["duplicates_in_load"] == 2 and counts.get("duplicates_of_earlier_loads", 0) == 0
    assert counts["kept"] == 5
    assert _hits(spark, clicks) == {
        ("u1", "a"): 1,
        ("u1", "b"): 1,
        ("u2", "a"): 1,
        ("u3", "c"): 1,
        ("u4", "e"): 1,
    }
    # a later batch: two records seen before, one new record sent twice
    write_clicks(clicks, "c3.tsv", CLICKS_SECOND)
    counts = load_clicks(spark, clicks)["sources"]["clicks"]
    assert (counts["duplicates_of_earlier_loads"], counts["duplicates_in_load"]) == (2, 1)
    assert counts["kept"] == 1
    hits = _hits(spark, clicks)
    assert hits[("u1", "d")] == 1 and hits[("u1", "b")] == 1 and hits[("u3", "c")] == 1


def test_crash_between_data_and_index_is_repaired(
    spark: Any, clicks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_clicks(clicks, "c1.tsv", CLICKS_FIRST)
    load_clicks(spark, clicks)
    write_clicks(clicks, "c2.tsv", [(7, "u7", "g"), (8, "u8", "h")])
    process = start_load(
        clicks / "job.json", clicks / "store", "between-data-and-index", clicks / "m"
    )
    try:
        wait_for(clicks / "m", process)
    finally:
        kill_all(process)
    assert treestore.open(clicks / "store").version == 2  # the data is published...
    index = json.loads((clicks / "store" / "dedup" / "INDEX").read_text())
    assert index["covers"] == 1  # ...its index is not
    # the next load repairs the index first, so c2's records are duplicates, not new
    write_clicks(clicks, "c3.tsv", [(7, "u7", "g"), (9, "u9", "i")])
    lines: list[str] = []
    counts = load_clicks(spark, clicks, lines)["sources"]["clicks"]
    assert any("catching up from 1 file(s)" in line for line in lines)
    assert counts["duplicates_of_earlier_loads"] == 1 and counts["kept"] == 1
    assert _hits(spark, clicks)[("u7", "g")] == 1
    index = json.loads((clicks / "store" / "dedup" / "INDEX").read_text())
    assert index["covers"] == 3
    # the dead load's runs were garbage: every run left on disk is one the index uses
    used = {run for runs in index["sources"]["clicks"]["shards"].values() for run in runs}
    on_disk = {str(p.relative_to(clicks / "store")) for p in (clicks / "store").rglob("*.arrow")}
    assert on_disk == used
    assert main(["info", str(clicks / "store")]) == 0
    assert "dedup index covers version 3" in capsys.readouterr().out


@pytest.mark.parametrize("damage", ["deleted", "truncated", "manifest"])
def test_a_missing_or_damaged_index_is_rebuilt(
    spark: Any, clicks: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_clicks(clicks, "c1.tsv", CLICKS_FIRST)
    load_clicks(spark, clicks)
    folder = clicks / "store" / "dedup"
    if damage == "deleted":
        shutil.rmtree(folder)
    elif damage == "truncated":
        run = next(p for p in folder.rglob("*.arrow"))
        run.write_bytes(run.read_bytes()[:40])
    else:
        (folder / "INDEX").write_text("{not json")
    if damage != "deleted":
        assert main(["check", str(clicks / "store")]) == 1
        assert "dedup" in capsys.readouterr().out
    write_clicks(clicks, "c2.tsv", CLICKS_SECOND)
    lines: list[str] = []
    counts = load_clicks(spark, clicks, lines)["sources"]["clicks"]
    assert any("rebuil" in line for line in lines), lines
    assert counts["duplicates_of_earlier_loads"] == 2 and counts["kept"] == 1
    assert _hits(spark, clicks)[("u1", "b")] == 1


def test_keys_that_collide_under_a_weak_hash_are_all_kept(
    spark: Any, clicks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql import functions as F

    import loaders.load.dedup_step

    monkeypatch.setattr(
        loaders.load.dedup_step, "key_hash", lambda key: F.pmod(F.xxhash64(key), F.lit(2))
    )
    rows = [(t, f"u{t % 3}", "x") for t in range(30)]
    write_clicks(clicks, "c1.tsv", rows)
    assert load_clicks(spark, clicks)["sources"]["clicks"]["kept"] == 30
    write_clicks(clicks, "c2.tsv", [*rows[:5], (99, "u0", "y")])
    counts = load_clicks(spark, clicks)["sources"]["clicks"]
    assert counts["duplicates_of_earlier_loads"] == 5 and counts["kept"] == 1
    assert sum(_hits(spark, clicks).values()) == 31


def _check(store: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(["check", str(store)])
    return status, capsys.readouterr().out


def test_a_rolled_back_current_drops_no_record(
    spark: Any, clicks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CURRENT written back to version 1 after version 2 was published: check names it, and
    the next load (which reads version 2's file again) rebuilds the index that covered
    version 2 instead of dropping that file's records as duplicates of earlier loads."""
    store = clicks / "store"
    write_clicks(clicks, "c1.tsv", CLICKS_FIRST)
    load_clicks(spark, clicks)
    write_clicks(clicks, "c2.tsv", [(7, "u7", "g"), (8, "u8", "h")])
    load_clicks(spark, clicks)
    (store / "CURRENT").write_text("1\n")
    status, out = _check(store, capsys)
    assert status == 1 and "CURRENT names version 1, but version 2 was published" in out
    write_clicks(clicks, "c3.tsv", [(7, "u7", "g"), (9, "u9", "i")])
    lines: list[str] = []
    counts = load_clicks(spark, clicks, lines)["sources"]["clicks"]
    assert any("CURRENT names version 1 (it was rolled back)" in line for line in lines), lines
    assert counts["duplicates_of_earlier_loads"] == 0 and counts["duplicates_in_load"] == 1
    hits = _hits(spark, clicks)
    assert hits[("u7", "g")] == hits[("u8", "h")] == hits[("u9", "i")] == 1
    assert len(hits) == 7
    assert _check(store, capsys)[0] == 0
    index = json.loads((store / "dedup" / "INDEX").read_text())
    assert index["covers"] == treestore.open(store).version == 2


def test_dedup_runs_swapped_between_shards_are_named_and_rebuilt(
    spark: Any, clicks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = clicks / "store"
    rows = [(t, f"u{t}", "a") for t in range(40)]
    write_clicks(clicks, "c1.tsv", rows)
    load_clicks(spark, clicks)
    shards = json.loads((store / "dedup" / "INDEX").read_text())["sources"]["clicks"]["shards"]
    (first,), (second,) = list(shards.values())[:2]
    one, two = store / first, store / second
    data = one.read_bytes()
    one.write_bytes(two.read_bytes())
    two.write_bytes(data)
    status, out = _check(store, capsys)
    assert status == 1 and out.count("moved or copied from elsewhere") == 2, out
    assert f"{one} belongs to shard {list(shards)[1]} of source 'clicks', not to shard" in out
    write_clicks(clicks, "c2.tsv", rows)  # every record sent again
    lines: list[str] = []
    counts = load_clicks(spark, clicks, lines)["sources"]["clicks"]
    assert any("moved or copied from elsewhere; rebuilding it" in line for line in lines)
    assert counts["duplicates_of_earlier_loads"] == 40 and counts["kept"] == 0
    assert set(_hits(spark, clicks).values()) == {1}
    assert _check(store, capsys)[0] == 0


def test_a_store_written_before_run_owners_loads_as_before(
    spark: Any, clicks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store.json without an identity and runs that record no owner (as written before):
    the store loads, keeps using the old runs (check notes them) and writes new runs that
    record their source and shard (the store keeps no identity)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    store = clicks / "store"
    write_clicks(clicks, "c1.tsv", CLICKS_FIRST)
    load_clicks(spark, clicks)
    config = json.loads((store / "store.json").read_text())
    del config["id"]
    (store / "store.json").write_text(json.dumps(config, indent=1))
    old = list((store / "dedup").rglob("*.arrow"))
    for path in old:  # as runs were written before: the columns' checksum only
        table = ipc.open_file(pa.py_buffer(path.read_bytes())).read_all()
        kept = {b"treestore.xxh3": table.schema.metadata[b"treestore.xxh3"]}
        table = table.replace_schema_metadata(kept)
        with pa.OSFile(str(path), "wb") as out, ipc.new_file(out, table.schema) as writer:
            writer.write_table(table)
    status, out = _check(store, capsys)
    assert status == 0 and f"{len(old)} dedup index run(s) were written before" in out, out
    write_clicks(clicks, "c2.tsv", CLICKS_SECOND)
    lines: list[str] = []
    counts = load_clicks(spark, clicks, lines)["sources"]["clicks"]
    assert not any("rebuil" in line for line in lines), lines
    assert counts["duplicates_of_earlier_loads"] == 2 and counts["kept"] == 1
    assert "id" not in json.loads((store / "store.json").read_text())
    new = set((store / "dedup").rglob("*.arrow")) - set(old)
    assert new
    for path in new:
        owner = ipc.open_file(pa.memory_map(str(path))).schema.metadata[b"treestore.owner"]
        assert json.loads(owner)["store"] is None
        assert json.loads(owner)["source"] == "clicks"
        assert f"shard-{json.loads(owner)['shard']:04d}" in str(path)
    assert _check(store, capsys)[0] == 0


def test_a_store_without_dedup_sources_rolled_back_is_named(
    spark: Any, clicks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every load writes the dedup index covering its version, dedup sources or not, so a
    CURRENT rolled back by a single version is told from a manifest never published."""
    job = json.loads((clicks / "job.json").read_text())
    del job["source"][0]["dedup"]
    (clicks / "job.json").write_text(json.dumps(job))
    write_clicks(clicks, "c1.tsv", CLICKS_FIRST)
    load_clicks(spark, clicks)
    write_clicks(clicks, "c2.tsv", CLICKS_SECOND)
    load_clicks(spark, clicks)
    (clicks / "store" / "CURRENT").write_text("1\n")
    status, out = _check(clicks / "store", capsys)
    assert status == 1 and "but version 2 was published" in out and "rolled back" in out
