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
