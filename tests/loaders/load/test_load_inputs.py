"""Input side of a load: formats, incremental file tracking, rejected records, report, progress."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import treestore
from loaders import load_job, run_load
from loaders.load.progress import _StageWatcher
from loaders.load.report import format_load_report
from shell.cli import main
from treestore.events import Event, StageFinished, StageProgress, as_lines
from treestore.store.versions import open_version

pytestmark = pytest.mark.spark


def _job(folder: Path, sources: list[dict[str, Any]], root: list[Any] | None = None) -> Path:
    doc = {
        "shards": 2,
        "source": sources,
        "tree": {"root": root or [{"type": "value", "key": "K"}, {"type": "value", "key": "V"}]},
    }
    (folder / "job.json").write_text(json.dumps(doc))
    return folder / "job.json"


def _load(spark: Any, job: Path, **options: Any) -> Any:
    lines: list[str] = []
    result = run_load(
        spark, load_job(job), job.parent / "store", on_event=as_lines(lines.append), **options
    )
    result.report["log"] = lines
    return result


def _pairs(store: Path) -> dict[tuple[str, str], int]:
    rows = treestore.open(store).query("+/+:+hits").to_list()
    return {(k, v): hits for k, v, hits in rows}  # type: ignore[misc]


def test_every_format_folders_globs_and_injected_source_name(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "a.csv").write_text('K,V\na,"x,1"\n')
    (tmp_path / "csv" / "_ignored.csv").write_text("K,V\nzz,zz\n")
    (tmp_path / "b.tsv").write_text("b\ty\n")
    (tmp_path / "c1.json").write_text('{"K": "c", "V": ["p", "q"]}\n{"K": "c", "V": 3}\n')
    pq.write_table(pa.table({"K": ["d"], "V": ["w"], "X": [1]}), tmp_path / "d.parquet")
    job = _job(
        tmp_path,
        [
            {"name": "c", "path": "csv/", "format": "csv", "shard_by": "K"},
            {
                "name": "t",
                "path": "b.tsv",
                "format": "tsv",
                "header": False,
                "columns": ["K", "V"],
                "shard_by": "K",
            },
            {"name": "j", "path": "c*.json", "format": "json", "shard_by": "K"},
            {
                "name": "p",
                "path": "d.parquet",
                "format": "parquet",
                "shard_by": "K",
                "inject_source_name": "V",
            },
        ],
    )
    result = _load(spark, job)
    assert _pairs(tmp_path / "store") == {
        ("a", "x,1"): 1,
        ("b", "y"): 1,
        ("c", "p"): 1,
        ("c", "q"): 1,
        ("c", "3"): 1,
        ("d", str((tmp_path / "d.parquet").resolve())): 1,
    }
    assert {name: c["read"] for name, c in result.report["sources"].items()} == {
        "c": 1,
        "t": 1,
        "j": 2,
        "p": 1,
    }
    for shard in result.report["shards"].values():  # each phase's wall and CPU seconds
        assert list(shard["task_cpu_seconds"]) == list(shard["task_seconds"])
        assert all(seconds >= 0 for seconds in shard["task_cpu_seconds"].values())
    cpu = [s["task_cpu_seconds"] for s in result.report["shards"].values()]
    assert sum(phases["write"] for phases in cpu) > 0


def test_a_source_whose_glob_matches_no_file_says_so(spark: Any, tmp_path: Path) -> None:
    """It was silent: the other sources loaded as if this one were empty."""
    (tmp_path / "a.tsv").write_text("K\tV\na\t1\n")
    job = _job(
        tmp_path,
        [
            {"name": "good", "path": "a.tsv", "format": "tsv", "shard_by": "K"},
            {"name": "typo", "path": "b*.tvs", "format": "tsv", "shard_by": "K"},
        ],
    )
    result = _load(spark, job)
    assert result.version == 1 and _pairs(tmp_path / "store") == {("a", "1"): 1}
    said = [line for line in result.report["log"] if "matches no file" in line]
    assert said == [
        f"warning: source typo: its path {tmp_path / 'b*.tvs'} matches no file; "
        "nothing is read from it"
    ]


def test_new_unchanged_and_changed_files(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    first = tmp_path / "in" / "1.csv"
    first.write_text("K,V\na,1\n")
    job = _job(tmp_path, [{"name": "s", "path": "in/", "format": "csv", "shard_by": "K"}])
    assert _load(spark, job).version == 1
    nothing = _load(spark, job)
    assert nothing.version is None and "nothing new to load" in nothing.report["log"][-1]
    (tmp_path / "in" / "2.csv").write_text("K,V\nb,2\n")
    first.write_text("K,V\na,1\nc,3\n")  # changed after it was loaded
    os.utime(first, ns=(1, 1))
    result = _load(spark, job)
    assert result.version == 2 and result.report["sources"]["s"]["files"] == 1
    assert result.report["changed_files"] == {"s": [str(first.resolve())]}
    assert any("changed after it was loaded" in line for line in result.report["log"])
    assert _pairs(tmp_path / "store") == {("a", "1"): 1, ("b", "2"): 1}
    # still skipped on the next run, and read again (whole) only when asked
    assert _load(spark, job).version is None
    again = _load(spark, job, reprocess_changed=True)
    assert again.version == 3 and again.report["sources"]["s"]["read"] == 2
    assert _pairs(tmp_path / "store") == {("a", "1"): 2, ("b", "2"): 1, ("c", "3"): 1}
    inputs = open_version(tmp_path / "store").manifest.inputs  # source / path under its root
    assert inputs["s/1.csv"]["records"] == 2 and inputs["s/1.csv"]["version"] == 3
    assert _load(spark, job, reprocess_changed=True).version is None


def _rejected_rows(store: Path, report: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for name in report["rejected"]["files"]:
        found += [json.loads(line) for line in (store / name).read_text().splitlines()]
    return sorted(found, key=lambda r: (r["file"], r["line"]))


def test_bad_records_are_rejected_with_file_and_line(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    csv_file = tmp_path / "in" / "a.csv"
    csv_file.write_bytes(b"K,V,N\na,1,5\n\nb,2\nc,\xff\xfe,1\nd,4,five\ne,5,6,7\nf,6,8\n")
    json_file = tmp_path / "j.json"
    json_file.write_text(
        '{"K": "g", "V": "7", "N": "1"}\n{"K": "h",\n{"K": "i", "V": "9", "N": "2"}\n'
    )
    job = _job(
        tmp_path,
        [
            {"name": "c", "path": "in/", "format": "csv", "shard_by": "K"},
            {"name": "j", "path": "j.json", "format": "json", "shard_by": "K"},
        ],
        [
            {"type": "value", "key": "K"},
            {"type": "value", "key": "V", "data": {"n": {"type": "sum", "key": "N"}}},
        ],
    )
    doc = json.loads(job.read_text())
    doc["map"] = {
        "filter_in": {"op": "field", "from": "N", "to": "M", "filter": {"op": "mod", "mod": 2}}
    }
    job.write_text(json.dumps(doc))
    result = _load(spark, job)
    store = tmp_path / "store"
    report = result.report
    assert report["sources"]["c"]["rejected"] == 4 and report["sources"]["j"]["rejected"] == 1
    assert report["sources"]["c"]["read"] == 6 and report["sources"]["c"]["applied"] == 2
    rows = _rejected_rows(store, report)
    where = [(Path(r["file"]).name, r["line"], r["reason"]) for r in rows]
    assert where == [
        ("a.csv", 4, "expected 3 columns, found 2"),
        ("a.csv", 5, "field 'V' is not UTF-8 text (byte 1)"),
        ("a.csv", 6, "mod: a value is not a whole number"),
        ("a.csv", 7, "expected 3 columns, found 4"),
        ("j.json", 2, where[-1][2]),
    ]
    assert where[-1][2].startswith("not valid JSON")
    assert rows[0]["text"] == "b,2" and rows[2]["record"]["K"] == "d"
    assert _pairs(store) == {("a", "1"): 1, ("f", "6"): 1, ("g", "7"): 1, ("i", "9"): 1}
    lines = format_load_report(report, str(store))
    assert any("rejected: 5 records, with file and line in" in line for line in lines)


def test_too_many_rejected_records_publish_nothing(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.tsv").write_text("K\tV\n" + "bad\n" * 4 + "k\tv\n")
    job = _job(tmp_path, [{"name": "s", "path": "in/", "format": "tsv", "shard_by": "K"}])
    with pytest.raises(treestore.LoadError) as caught:
        _load(spark, job, max_rejected=3)
    message = str(caught.value)
    assert "4 records were rejected, more than --max-rejected 3; nothing was published" in message
    assert "a.tsv:2: expected 2 columns, found 1" in message
    assert not (tmp_path / "store" / "CURRENT").exists()  # nothing published ...
    failed = {p.name for p in (tmp_path / "store" / "rejected").iterdir()}  # ... but these kept
    assert len(failed) == 1  # kept for a look until the next gc
    result = _load(spark, job, max_rejected=4)
    assert result.version == 1 and result.report["rejected"]["count"] == 4
    # gc after the load removed the failed load's rejects and kept this one's
    left = sorted(
        str(p.relative_to(tmp_path / "store"))
        for p in (tmp_path / "store" / "rejected").rglob("*.jsonl")
    )
    assert left == result.report["rejected"]["files"]


def test_load_command_prints_the_report(spark: Any, tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("K,V\na,1\nb,2\nb,2\n")
    job = _job(tmp_path, [{"name": "s", "path": "in/", "format": "csv", "shard_by": "K"}])
    store = tmp_path / "store"
    assert main(["load", str(job), "--store", str(store), "--max-rejected", "0"]) == 0
    out = capsys.readouterr().out
    assert "published version 1" in out
    assert "source s: 1 file, 3 read, 0 rejected" in out and "3 applied" in out
    created = [line for line in out.splitlines() if line.startswith("  shard ")]
    assert len(created) == 2 and sum(int(line.split()[2]) for line in created) == 4
    assert "phases: list files" in out and "read and map (Arrow)" in out
    assert "apply (Spark)" in out
    assert "spark stage" in out  # plain progress lines: not a terminal


def test_stage_watcher_reports_running_and_finished_stages(spark: Any, tmp_path: Path) -> None:
    """The watcher is polled by the test while the stage's tasks are held running, so what
    it sees does not depend on how the tasks are scheduled."""
    import threading
    import time

    seen: list[Event] = []
    watcher = _StageWatcher(spark, seen.append)
    release = tmp_path / "release"

    def held(x: int) -> int:
        while not os.path.exists(release):
            time.sleep(0.02)
        return x

    job = threading.Thread(target=lambda: spark.range(0, 4, 1, 4).rdd.map(held).count())
    job.start()
    deadline = time.monotonic() + 120
    while not any(isinstance(e, StageProgress) for e in seen) and time.monotonic() < deadline:
        watcher.poll()
        time.sleep(0.05)
    running = [e for e in seen if isinstance(e, StageProgress)]
    release.touch()
    job.join()
    while not any(isinstance(e, StageFinished) for e in seen) and time.monotonic() < deadline:
        watcher.poll()
        time.sleep(0.05)
    assert running and running[0].total == 4 and running[0].done < 4  # seen while held
    assert [
        (e.tasks, e.text().startswith("spark stage")) for e in seen if isinstance(e, StageFinished)
    ] == [(4, True)]


def test_max_rejected_must_be_a_count(tmp_path: Path, capsys: Any) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["load", str(tmp_path / "job.json"), "--store", str(tmp_path), "--max-rejected", "-1"])
    assert caught.value.code == 2
    assert "--max-rejected: -1 is below 0" in capsys.readouterr().err


def test_stages_too_quick_to_be_polled_are_still_reported(spark: Any) -> None:
    lines: list[str] = []
    from loaders.load import progress

    slow = progress._POLL_SECONDS
    progress._POLL_SECONDS = 600  # no poll happens while the job runs
    try:
        with progress.spark_progress(spark, as_lines(lines.append)):
            spark.range(0, 10, 1, 3).count()
    finally:
        progress._POLL_SECONDS = slow
    assert any(line.startswith("spark stage") and "3 task(s)" in line for line in lines)


def test_a_block_inside_another_reports_nothing_twice(spark: Any) -> None:
    """A sweep's load watches its stages inside the sweep's own watch: each stage is
    reported once, by the outer block, and the inner block adds no lines."""
    from loaders.load import progress

    outer: list[Event] = []
    inner: list[Event] = []
    with progress.spark_progress(spark, outer.append, "outer"):
        spark.range(0, 10, 1, 3).count()
        with progress.spark_progress(spark, inner.append, "inner"):
            spark.range(0, 10, 1, 2).count()
            spark.range(0, 10, 1, 3).rdd.map(lambda x: x).count()
    finished = [e.stage for e in outer if isinstance(e, StageFinished)]
    assert inner == [] and len(finished) >= 3 and len(finished) == len(set(finished))
