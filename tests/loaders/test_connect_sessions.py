"""Loads and sweeps on a Spark Connect session give what they give on a classic one.

A real Spark Connect server runs for the whole test run (the ``connect_server``
fixture). A Connect client cannot share a process with the classic session, so the
Connect side runs in one process of its own (:mod:`tests.support.connect_scenario`),
every step in order, and the same steps run here on the classic session, on the same
input files: the demo load and then an incremental one, the clicks job's dedup over two
loads, loads whose task fails (a Python error, a Java one), ``treestore load --master
sc://...``, the interval sweep on DataFrames with each plan and ``treestore sweep
--master sc://...`` with the range plan. ``treestore sweep --master sc://...`` with the
broadcast plan runs as a command of its own. The stores the Connect side wrote are read
here.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import treestore
from loaders import load_job, run_load
from loaders.sweep.broadcast_plan import CONNECT_BROADCAST
from loaders.sweep.driver import SweepReport, interval_sweep
from shell.cli import main
from shell.demo import write_demo_inputs
from tests.support.connect_scenario import sweep_rows
from tests.support.file_limits import file_size_limit
from tests.support.jobs import CLICKS_FIRST, CLICKS_JOB, CLICKS_SECOND
from treestore.errors import LoadError
from treestore.events import as_lines
from treestore.store.versions import open_version

pytestmark = [pytest.mark.spark, pytest.mark.connect]

ROOT = Path(__file__).resolve().parents[2]
NEW_MAPPING = "TIME\tUID\tPUID\n1419441800000\t11111\tqqq\n1419441800001\t12345\tnew\n"
BAD_HEADER = random.Random(22).randbytes(2000)
EVENTS_SCHEMA = "id bigint, time bigint, n int"
INTERVALS_SCHEMA = "id bigint, start bigint, end bigint, points bigint"


def _sweep_inputs() -> tuple[list[list[int]], list[list[int]]]:
    """Events and intervals over a few ids, some intervals reversed or empty."""
    rng = random.Random(7)
    events = [[rng.randint(0, 6), rng.randint(0, 300), n] for n in range(300)]
    intervals = []
    for _ in range(150):
        start = rng.randint(0, 300)
        intervals.append([rng.randint(0, 6), start, start + rng.randint(-5, 60), rng.randint(1, 9)])
    return events, intervals


SWEEPS = [
    {"agg": "sum", "plan": "auto", "closed": "both"},
    {"agg": "count", "plan": "broadcast", "closed": "left"},
    {"agg": "sum", "plan": "range", "closed": "right"},
    {"agg": "set", "plan": "auto", "closed": "both"},
]
"""The sweeps both sides run: each plan, each kind of aggregation."""


def _client(server: Any, args: list[str]) -> subprocess.CompletedProcess[str]:
    """This Python run with ``args`` as a client of the Connect server, from the checkout."""
    return subprocess.run(
        [sys.executable, *args], env=server.client_env(), cwd=ROOT,
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def _scenario(server: Any, work: Path, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run ``steps`` on a Connect session in a process of their own; their results."""
    done = _client(
        server,
        ["-m", "tests.support.connect_scenario", server.url, str(work)]
        + [json.dumps(step) for step in steps],
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])["results"]
    return results


def _classic_load(spark: Any, job: Path, store: Path) -> dict[str, Any]:
    lines: list[str] = []
    result = run_load(spark, load_job(job), store, as_lines(lines.append))
    return {"version": result.version, "sources": result.report["sources"], "events": lines}


def _rows(spark: Any, store: Path, path: str) -> list[tuple[Any, ...]]:
    return sorted(treestore.open(store, spark=spark).query(path).to_list())


def _inputs(store: Path) -> dict[str, Any]:
    """The loaded input files the store's newest version keeps: size, fingerprint, ..."""
    return {k: dict(v) for k, v in open_version(store).manifest.inputs.items()}


def _report_lines(out: str) -> list[str]:
    """A command's printed report without what depends on timing (stage lines, times)."""
    return [
        line
        for line in out.splitlines()
        if not line.startswith("spark stage")
        and "phases:" not in line
        and not line.startswith("published version")
    ]


@pytest.fixture(scope="session")
def both(
    spark: Any, connect_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Every step on both sides: the classic results, the Connect results, and the folder."""
    work = tmp_path_factory.mktemp("connect-sessions")
    for name in ("demo", "cli"):
        (work / name).mkdir()
        write_demo_inputs(work / name)
    (work / "clicks" / "clicks").mkdir(parents=True)
    (work / "clicks" / "job.json").write_text(json.dumps(CLICKS_JOB))
    _write_clicks(work / "clicks" / "clicks" / "c1.tsv", CLICKS_FIRST)
    (work / "bad" / "in").mkdir(parents=True)
    (work / "bad" / "job.json").write_text(
        json.dumps(
            {
                "shards": 2,
                "source": [{"name": "s", "path": "in/", "format": "tsv", "shard_by": "K"}],
                "tree": {"root": [{"type": "value", "key": "K"}, {"type": "value", "key": "V"}]},
            }
        )
    )
    (work / "bad" / "in" / "b.tsv").write_bytes(BAD_HEADER)
    (work / "java" / "in").mkdir(parents=True)
    java_job = json.loads((work / "bad" / "job.json").read_text())
    java_job["source"][0]["dedup"] = {"keys": ["K", "V"]}  # a load that rebuilds its index
    (work / "java" / "job.json").write_text(json.dumps(java_job))
    (work / "java" / "in" / "a.tsv").write_text(
        "K\tV\n" + "".join(f"k{i}\tv{i}\n" for i in range(500))
    )
    (work / "sweep").mkdir()
    (work / "sweep" / "events.csv").write_text("id,time\n1,10:00\n1,10:15\n2,10:01\n")
    (work / "sweep" / "intervals.csv").write_text(
        "id,start,end,points\n1,9:30,10:30,10\n1,10:01,10:05,20\n1,10:08,10:20,30\n"
        "1,10:30,10:45,40\n2,9:30,10:30,50\n3,10:00,9:00,5\n"
    )
    events, intervals = _sweep_inputs()

    classic: dict[str, Any] = {
        "demo 1": _classic_load(spark, work / "demo" / "job.json", work / "demo" / "classic"),
        "clicks 1": _classic_load(spark, work / "clicks" / "job.json", work / "clicks" / "classic"),
    }
    with pytest.raises(LoadError) as failed:
        run_load(spark, load_job(work / "bad" / "job.json"), work / "bad" / "store")
    classic["bad"] = str(failed.value)
    # the JVM writes files in a load only to rebuild a dedup index (Spark's shuffle): a
    # damaged index is rebuilt by the next load, which meets a full disk
    java_job_file = work / "java" / "job.json"
    _classic_load(spark, java_job_file, work / "java" / "classic")
    (work / "java" / "classic" / "dedup" / "INDEX").write_text("damaged")
    (work / "java" / "in" / "b.tsv").write_text("K\tV\nk1\tv1\n")
    spark.range(1).mapInArrow(lambda batches: batches, "id long").collect()  # workers up
    with file_size_limit(spark.sparkContext._gateway.proc.pid, 1), pytest.raises(LoadError) as full:
        run_load(spark, load_job(java_job_file), work / "java" / "classic")
    classic["java"] = str(full.value)
    sweep_step = {
        "do": "sweep",
        "events": events,
        "intervals": intervals,
        "events_schema": EVENTS_SCHEMA,
        "intervals_schema": INTERVALS_SCHEMA,
    }
    steps = [
        {"do": "cli", "args": ["load", "cli/job.json", "--store", "cli/store",
                               "--master", connect_server.url]},
        {"do": "cli", "args": ["load", "cli/job.json", "--store", "cli/followed", "--follow",
                               "--master", connect_server.url]},
        {"do": "cli", "args": ["query", "cli/store", "+/+/+/+:+hits", "--format", "tsv",
                               "--master", connect_server.url]},
        {"do": "load", "job": "demo/job.json", "store": "demo/connect"},
        {"do": "write", "path": "demo/mapping/mapping-0002.tsv", "text": NEW_MAPPING},
        {"do": "load", "job": "demo/job.json", "store": "demo/connect"},
        {"do": "load", "job": "clicks/job.json", "store": "clicks/connect"},
        {"do": "write", "path": "clicks/clicks/c2.tsv", "text": _clicks_text(CLICKS_SECOND)},
        {"do": "load", "job": "clicks/job.json", "store": "clicks/connect"},
        {"do": "load", "job": "bad/job.json", "store": "bad/store"},
        {"do": "load", "job": "java/job.json", "store": "java/connect"},
        {"do": "write", "path": "java/connect/dedup/INDEX", "text": "damaged"},
        {"do": "write", "path": "java/in/c.tsv", "text": "K\tV\nk2\tv2\n"},
        {"do": "load", "job": "java/job.json", "store": "java/connect",
         "file_limit_pid": connect_server.process.pid},
        {"do": "load", "job": "java/job.json", "store": "java/connect"},
        *({**sweep_step, **sweep} for sweep in SWEEPS),
        {**sweep_step, "agg": "sum", "plan": "auto", "connect_index_bytes": 1},
        {"do": "parallelism"},
        {"do": "cli", "args": [*_sweep_args(work / "sweep", work / "sweep" / "connect",
                                            "ranged", "range"),
                               "--master", connect_server.url]},
    ]  # fmt: skip
    connect = _scenario(connect_server, work, steps)
    classic["demo 2"] = _classic_load(spark, work / "demo" / "job.json", work / "demo" / "classic")
    classic["clicks 2"] = _classic_load(
        spark, work / "clicks" / "job.json", work / "clicks" / "classic"
    )
    classic["sweeps"] = [_classic_sweep(spark, events, intervals, sweep) for sweep in SWEEPS]
    return {"classic": classic, "connect": connect, "work": work}


def _sweep_args(folder: Path, store: Path, name: str, plan: str) -> list[str]:
    """``treestore sweep`` of the seed's events and intervals in ``folder``."""
    return ["sweep", "--events", str(folder / "events.csv"), "--intervals",
            str(folder / "intervals.csv"), "--store", str(store), "--name", name,
            "--time-format", "H:mm", "--plan", plan]  # fmt: skip


def _clicks_text(rows: list[tuple[int, str, str]]) -> str:
    return "\n".join(["TIME\tUID\tURL", *(f"{t}\t{u}\t{url}" for t, u, url in rows)]) + "\n"


def _write_clicks(path: Path, rows: list[tuple[int, str, str]]) -> None:
    path.write_text(_clicks_text(rows))


def _classic_sweep(
    spark: Any, events: list[list[int]], intervals: list[list[int]], sweep: dict[str, str]
) -> dict[str, Any]:
    report = SweepReport()
    result = interval_sweep(
        spark,
        spark.createDataFrame([tuple(r) for r in events], EVENTS_SCHEMA),
        spark.createDataFrame([tuple(r) for r in intervals], INTERVALS_SCHEMA),
        sweep["agg"],
        sweep["closed"],
        plan=sweep["plan"],
        report=report,
    )
    return {"rows": sweep_rows(result.collect()), "plan": report.plan}


def _steps(both: dict[str, Any], do: str) -> list[dict[str, Any]]:
    return [result for result in both["connect"] if result["do"] == do]


def test_demo_and_incremental_loads_on_connect_equal_the_classic_ones(
    spark: Any, both: dict[str, Any]
) -> None:
    first, second = _steps(both, "load")[:2]
    demo = both["work"] / "demo"
    assert first["version"] == 1 and second["version"] == 2
    assert first["sources"] == both["classic"]["demo 1"]["sources"]
    assert second["sources"] == both["classic"]["demo 2"]["sources"]
    # only the new file was read the second time
    assert second["sources"]["mapping"]["files"] == 1
    assert second["sources"]["attributes"]["files"] == 0
    assert "source attributes: 0 new file(s)" in second["events"]
    for query in ("root/+/+/+:+hits", "root/+:nodes>1/+/+"):
        assert _rows(spark, demo / "connect", query) == _rows(spark, demo / "classic", query)
    # the files' fingerprints came back from the Connect tasks as from the classic ones
    inputs = _inputs(demo / "connect")
    assert inputs == _inputs(demo / "classic")
    assert len(inputs) == 3 and all(entry["fingerprint"] for entry in inputs.values())
    # the stages' progress came through the session's progress handler (the server reports
    # every 100 ms: a stage that ends after the operation's last report is seen running,
    # never done, so a line "spark stage N done" is not certain)
    assert first["stage_events"] > 0


def test_dedup_on_connect_counts_a_repeated_click_once(spark: Any, both: dict[str, Any]) -> None:
    first, second = _steps(both, "load")[2:4]
    clicks = both["work"] / "clicks"
    assert first["sources"] == both["classic"]["clicks 1"]["sources"]
    assert second["sources"] == both["classic"]["clicks 2"]["sources"]
    assert first["sources"]["clicks"]["duplicates_in_load"] == 1
    assert second["sources"]["clicks"]["duplicates_of_earlier_loads"] == 2
    hits = _rows(spark, clicks / "connect", "root/+/+:+hits")
    assert hits == _rows(spark, clicks / "classic", "root/+/+:+hits")
    assert ("u1", "a", 1) in hits and ("u1", "d", 1) in hits


def test_a_task_that_fails_on_connect_gives_the_classic_error_line(both: dict[str, Any]) -> None:
    failed, _, full, after = _steps(both, "load")[-4:]
    assert failed["error"] == "LoadError"
    assert failed["message"] == both["classic"]["bad"]
    assert failed["message"].startswith("The load's Spark job failed: input file ")
    assert not (both["work"] / "bad" / "store").exists()  # a failed first load leaves none
    # a Java failure's root cause, from the server's stack trace
    assert full["error"] == "LoadError"
    assert full["message"] == both["classic"]["java"]
    assert full["message"] == (
        "Indexing the records of source 's' failed: java.io.IOException: File too large"
    )
    assert after["version"] == 2  # the limit is gone


def test_interval_sweep_on_connect_frames_equals_classic_with_each_plan(
    both: dict[str, Any],
) -> None:
    *swept, refused = _steps(both, "sweep")
    assert [s["plan"] for s in swept] == ["broadcast", "broadcast", "range", "range"]
    assert [s["plan"] for s in both["classic"]["sweeps"]] == [s["plan"] for s in swept]
    for connect, classic in zip(swept, both["classic"]["sweeps"], strict=True):
        assert connect["rows"] == classic["rows"]
    assert swept[0]["notes"] == ["broadcast plan: " + CONNECT_BROADCAST]
    # an index past what a Connect plan may carry: the range plan, saying why
    assert refused["plan"] == "range" and refused["rows"] == swept[0]["rows"]
    assert len(refused["notes"]) == 1
    assert refused["notes"][0].startswith(
        "range plan: Spark Connect has no broadcast variables, and the index of "
    )
    assert refused["notes"][0].endswith(" is past the 1 bytes a plan may carry")


def test_treestore_load_with_a_connect_master(spark: Any, both: dict[str, Any]) -> None:
    (loaded,) = [
        step
        for step in _steps(both, "cli")
        if step["args"][0] == "load" and "--follow" not in step["args"]
    ]
    (queried,) = [step for step in _steps(both, "cli") if step["args"][0] == "query"]
    assert loaded["status"] == 0, loaded["err"]
    cli = both["work"] / "cli"
    capture = _capture_main(["load", str(cli / "job.json"), "--store", str(cli / "classic")])
    assert _report_lines(loaded["out"]) == _report_lines(capture)
    assert "published version 1" in loaded["out"]
    query = "root/+/+/+:+hits"
    assert _rows(spark, cli / "store", query) == _rows(spark, cli / "classic", query)
    # treestore query --master sc://... after the load above, in the same process; a path
    # that starts with no name lookup runs as a Spark job
    assert queried["status"] == 0, queried["err"]
    assert queried["out"] == _capture_main(
        ["query", str(cli / "classic"), "+/+/+/+:+hits", "--format", "tsv"]
    )
    assert queried["out"].count("\n") == 13
    assert _steps(both, "parallelism") == [{"do": "parallelism", "parallelism": 2}]


def _capture_main(args: list[str]) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(args) == 0
    return out.getvalue()


def test_treestore_sweep_with_a_connect_master(
    spark: Any, connect_server: Any, both: dict[str, Any]
) -> None:
    # the range plan ran as a step of the Connect process; the broadcast plan runs here,
    # as a command of its own
    folder = both["work"] / "sweep"
    done = _client(
        connect_server,
        ["-m", "treestore", *_sweep_args(folder, folder / "connect", "seed", "broadcast"),
         "--master", connect_server.url],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    (ranged,) = [step for step in _steps(both, "cli") if step["args"][0] == "sweep"]
    assert ranged["status"] == 0, ranged["err"]
    printed = _capture_main(_sweep_args(folder, folder / "classic", "ranged", "range"))
    printed += _capture_main(_sweep_args(folder, folder / "classic", "seed", "broadcast"))
    connect_lines = _report_lines(
        (ranged["out"] + done.stdout).replace(str(folder / "connect"), "STORE")
    )
    notes = [line for line in connect_lines if line.startswith("broadcast plan: ")]
    assert notes == ["broadcast plan: " + CONNECT_BROADCAST]  # on Connect only
    connect_lines.remove(notes[0])
    assert connect_lines == _report_lines(printed.replace(str(folder / "classic"), "STORE"))
    assert "results kept in STORE as version 2: query 'seed/+/+/+'" in connect_lines
    for name in ("seed", "ranged"):
        rows = _rows(spark, folder / "connect", f"{name}/+/+/+")
        assert rows == _rows(spark, folder / "classic", f"{name}/+/+/+")
        assert [(r[0], r[1], r[2]) for r in rows] == [
            ("1", "10:00:00", "10"),
            ("1", "10:15:00", "40"),
            ("2", "10:01:00", "50"),
        ]


def test_a_follower_refuses_a_connect_session_in_one_line(both: dict[str, Any]) -> None:
    (followed,) = [step for step in _steps(both, "cli") if "--follow" in step["args"]]
    assert followed["status"] == 2, followed
    assert "load --follow needs a classic Spark session" in followed["err"], followed["err"]
    assert "Traceback" not in followed["err"]
    assert not (both["work"] / "cli" / "followed" / "CURRENT").exists()
