"""``treestore sweep`` end to end: times of day stay times of day, ``--out`` and replace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loaders.sweep.command import is_time_of_day_format, run_sweep
from treestore.errors import LoadError

pytestmark = pytest.mark.spark

EVENTS = "id,time\n1,9:30\n1,10:15\n2,23:59\n"
INTERVALS = "id,start,end,points\n1,9:00,10:00,5\n1,9:15,11:00,2\n2,23:00,23:59,7\n"
SWEPT = [["1", "09:30:00", "7"], ["1", "10:15:00", "2"], ["2", "23:59:00", "7"]]


def _inputs(folder: Path, events: str = EVENTS, intervals: str = INTERVALS) -> tuple[str, str]:
    (folder / "events.csv").write_text(events)
    (folder / "intervals.csv").write_text(intervals)
    return str(folder / "events.csv"), str(folder / "intervals.csv")


def _query(store: Path, path: str, capsys: Any) -> Any:
    from query.driver.runner import open_store

    return [[str(v) for v in row] for row in open_store(str(store)).query(path).to_list()]


def test_time_of_day_formats() -> None:
    assert [is_time_of_day_format(f) for f in ("H:mm", "HH:mm:ss.SSS", "'T'HH:mm", "h:mm a")] == [
        True, True, True, True,
    ]  # fmt: skip
    assert [is_time_of_day_format(f) for f in ("yyyy-MM-dd HH:mm", "dd HH:mm", "'at'")] == [
        False, False, False,
    ]  # fmt: skip


def test_times_of_day_stay_times_of_day(spark: Any, tmp_path: Path, capsys: Any) -> None:
    events, intervals = _inputs(tmp_path)
    store, out = tmp_path / "store", tmp_path / "results.parquet"
    run_sweep(spark, events, intervals, str(store), "s", time_format="H:mm", out=str(out))
    assert _query(store, "s/+/+/+", capsys) == SWEPT
    written = pq.read_table(out)  # one file, the time of day as its text
    assert out.is_file() and written.schema.field("time").type == pa.string()
    assert [(r["id"], r["time"], r["value"]) for r in written.to_pylist()] == [
        (1, "09:30:00", 7), (1, "10:15:00", 2), (2, "23:59:00", 7),
    ]  # fmt: skip
    # without --time-format: strings that are all times of day are read the same way
    run_sweep(spark, events, intervals, str(store), "plain")
    assert _query(store, "plain/+/+/+", capsys) == SWEPT


def test_out_is_refused_when_it_exists_unless_replace(spark: Any, tmp_path: Path) -> None:
    events, intervals = _inputs(tmp_path, "id,time\n1,5\n", "id,start,end,points\n1,0,9,3\n")
    out = tmp_path / "r.parquet"
    out.write_text("an earlier file")
    with pytest.raises(LoadError, match="exists: pass --replace to replace it"):
        run_sweep(spark, events, intervals, str(tmp_path / "store"), "a", out=str(out))
    run_sweep(spark, events, intervals, str(tmp_path / "store"), "a", out=str(out), replace=True)
    assert pq.read_table(out).to_pylist() == [{"id": 1, "time": 5, "value": 3}]
    folder = tmp_path / "results"  # a folder: part files only, no .crc files
    run_sweep(spark, events, intervals, str(tmp_path / "store"), "b", out=str(folder))
    (folder / "notes.txt").write_text("mine")
    names = sorted(p.name for p in folder.iterdir())
    assert [n for n in names if n != "notes.txt"] and all(
        n.startswith("part-") and n.endswith(".parquet") for n in names if n != "notes.txt"
    )
    with pytest.raises(LoadError, match="already holds sweep results"):
        run_sweep(spark, events, intervals, str(tmp_path / "store"), "c", out=str(folder))
    run_sweep(spark, events, intervals, str(tmp_path / "store"), "c", out=str(folder), replace=True)
    assert (folder / "notes.txt").read_text() == "mine"
    parts = sorted(folder.glob("part-*.parquet"))
    assert [r for p in parts for r in pq.read_table(p).to_pylist()] == [
        {"id": 1, "time": 5, "value": 3}
    ]


def test_the_results_in_the_store_keep_their_column_names(spark: Any, tmp_path: Path) -> None:
    """They were name, name2, name3; a label of the query's own still wins, and a load of
    another job keeps the names."""
    from query.driver.runner import open_store

    events, intervals = _inputs(tmp_path, "user,at\n1,5\n", "user,start,end,points\n1,0,9,3\n")
    store = str(tmp_path / "store")
    run_sweep(spark, events, intervals, store, "s", columns={"id": "user", "time": "at"})
    rows = open_store(store).query("s/+/+/+")
    assert rows.column_names() == ["user", "at", "value"] and rows.to_list() == [("1", "5", "3")]
    assert open_store(store).query("s/+{u}/+/+:+hits").column_names() == [
        "u",
        "at",
        "value",
        "hits",
    ]
    assert open_store(store).query("s/*/+").column_names() == ["at"]
    assert open_store(store).query("+/+").column_names() == ["name", "name2"]  # not under s
    (tmp_path / "t").mkdir()
    events, intervals = _inputs(tmp_path / "t", "id,time\n1,5\n", "id,start,end,points\n1,0,9,3\n")
    run_sweep(spark, events, intervals, store, "t")  # the default names, and s's kept
    assert open_store(store).query("t/+/+/+").column_names() == ["id", "time", "value"]
    assert open_store(store).query("s/+/+/+").column_names() == ["user", "at", "value"]
