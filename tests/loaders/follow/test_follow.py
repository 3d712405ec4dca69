"""Continuous loads (``load --follow``): each micro-batch of Spark's file stream is one
load; the answers equal a batch load of the same files, across backlogs, files that
arrive while following, switching between load and follow, and SIGKILLs."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import treestore
from loaders import load_job, run_load
from loaders.follow import FollowSummary, follow_job, parse_trigger
from loaders.follow.stream import LISTING_SETTING, LOCAL_LISTING_PATHS
from loaders.listing.identity import location_of
from shell.cli import main
from shell.output.info import write_info
from tests.support.jobs import PENDING_JOB
from tests.support.load_processes import kill_all, wait_for
from treestore.errors import LoadError, StoreError
from treestore.events import as_lines
from treestore.storage.pagestore import page_store_for
from treestore.store.versions import current_version, open_version

pytestmark = pytest.mark.spark

MAPPINGS = [
    "TIME\tUID\tPUID\n1\t12345\tdef\n",
    "TIME\tUID\tPUID\n2\t67890\tghi\n2\t11111\tnone\n",  # 11111 has no node: dropped
    "TIME\tUID\tPUID\n3\t12345\tdef\n",
]


def _version(store: Path) -> int:
    return current_version(page_store_for(store))


def _loaded(store: Path) -> set[str]:
    """Where the files the store's version has loaded were when it was published."""
    return {location_of(k, e) for k, e in open_version(store).manifest.inputs.items()}


def _hits(store: Path) -> list[Any]:
    return sorted(treestore.open(store).query("root/+/+/+:+hits").to_list())


def _reference(spark: Any, demo_dir: Path, name: str = "reference") -> list[Any]:
    """The hits of a batch load of every file now in the demo's folders."""
    run_load(spark, load_job(demo_dir / "job.json"), demo_dir / name)
    return _hits(demo_dir / name)


def _follow(spark: Any, demo_dir: Path, store: Path, **options: Any) -> FollowSummary:
    lines: list[str] = []
    summary = follow_job(
        spark, load_job(demo_dir / "job.json"), store, on_event=as_lines(lines.append), **options
    )
    summary.lines = lines  # type: ignore[attr-defined]
    return summary


def test_available_now_loads_a_backlog_in_micro_batches_as_a_batch_load_does(
    spark: Any, demo_dir: Path
) -> None:
    for number, text in enumerate(MAPPINGS, 2):
        (demo_dir / "mapping" / f"mapping-000{number}.tsv").write_text(text)
    store = demo_dir / "followed"
    summary = _follow(spark, demo_dir, store, available_now=True, max_files=1)
    # one file of each source per micro-batch: 4 mapping files take 4 batches
    assert summary.batches == 4 and summary.versions == [1, 2, 3, 4]
    assert summary.reason == "every available file is loaded"
    assert _hits(store) == _reference(spark, demo_dir)
    loads = open_version(store).manifest.loads
    assert [load["stream"]["batch"] for load in loads] == [0, 1, 2, 3]
    assert any(line.startswith("batch 3: 1 file(s), 1 record(s)") for line in summary.lines)  # type: ignore[attr-defined]


def test_a_backlog_of_many_files_is_listed_in_the_driver_and_the_session_kept_as_it_was(
    spark: Any, demo_dir: Path
) -> None:
    """A micro-batch of more than 32 files (Spark's default) is listed in the driver, not
    in a Spark job of its own (about 1 s for 120 files): the follower sets Spark's
    threshold while it runs, and gives the session its own value back after."""
    for number in range(40):
        (demo_dir / "mapping" / f"mapping-{number + 2:04d}.tsv").write_text(
            MAPPINGS[number % len(MAPPINGS)]
        )
    spark.conf.set(LISTING_SETTING, "48")
    during: list[str] = []

    def on_line(line: str) -> None:
        if line.startswith("batch "):
            during.append(spark.conf.get(LISTING_SETTING))

    try:
        summary = follow_job(
            spark, load_job(demo_dir / "job.json"), demo_dir / "followed",
            on_event=as_lines(on_line), available_now=True,
        )  # fmt: skip
        assert spark.conf.get(LISTING_SETTING) == "48"
    finally:
        spark.conf.unset(LISTING_SETTING)
    assert summary.files == 42 and during == [str(LOCAL_LISTING_PATHS)]
    assert _hits(demo_dir / "followed") == _reference(spark, demo_dir)


def test_load_and_follow_share_the_files_already_loaded(spark: Any, demo_dir: Path) -> None:
    store = demo_dir / "store"
    assert run_load(spark, load_job(demo_dir / "job.json"), store).version == 1
    (demo_dir / "mapping" / "mapping-0002.tsv").write_text(MAPPINGS[0])
    # a first follower is offered every file: the loaded ones are known, one is new
    first = _follow(spark, demo_dir, store, available_now=True)
    assert first.versions == [2] and first.files == 1 and first.records == 1
    batch = [line for line in first.lines if line.startswith("batch ")]  # type: ignore[attr-defined]
    assert batch[0].startswith("batch 0: 1 file(s) (and 2 offered that were loaded before), 1 ")
    assert run_load(spark, load_job(demo_dir / "job.json"), store).version is None
    assert _hits(store) == _reference(spark, demo_dir)


def _wait_until(condition: Any, what: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.2)


def test_a_follower_loads_files_as_they_arrive_and_stops_when_asked(
    spark: Any, demo_dir: Path
) -> None:
    store = demo_dir / "followed"
    stop = threading.Event()
    done: list[Any] = []
    follower = threading.Thread(
        target=lambda: done.append(_follow(spark, demo_dir, store, trigger_seconds=0.5, stop=stop)),
        daemon=True,
    )
    follower.start()
    try:
        _wait_until(lambda: store.exists() and _version(store) == 1, "the first batch")
        reader = treestore.open(store, spark=spark)
        (demo_dir / "mapping" / "mapping-0002.tsv").write_text(MAPPINGS[0])
        _wait_until(lambda: _version(store) == 2, "the dropped file loaded")
        assert _hits(store) == _reference(spark, demo_dir)
        # a reader keeps its version until it moves to the newest
        assert (reader.version, reader.newest_version()) == (1, 2)
        assert ("12345", "def") not in reader.query("root/+/M/+").to_list()
        assert reader.refresh() and reader.version == 2 and not reader.refresh()
        assert ("12345", "def") in reader.query("root/+/M/+").to_list()
        with pytest.raises(StoreError, match=r"locked by a follower of .*job\.json \(--follow\)"):
            run_load(spark, load_job(demo_dir / "job.json"), store)
        shown = io.StringIO()
        write_info(str(store), shown)
        assert re.search(
            r"followed by a follower of .*job\.json \(--follow\): pid \d+ on .* since .*; its "
            r"last micro-batch 1 published version 2 at .* \(its newest file landed at ",
            shown.getvalue(),
        ), shown.getvalue()
    finally:
        stop.set()
        follower.join(timeout=120)
    assert not follower.is_alive()
    (summary,) = done
    assert summary.reason == "asked to stop" and summary.versions == [1, 2]
    shown = io.StringIO()
    write_info(str(store), shown)
    assert "no follower now; the last one's micro-batch 1 published version 2" in shown.getvalue()
    (demo_dir / "mapping" / "mapping-0003.tsv").write_text(MAPPINGS[2])  # after the stop
    assert run_load(spark, load_job(demo_dir / "job.json"), store).version == 3  # lock free


def test_bad_records_are_set_aside_and_the_stream_goes_on(spark: Any, demo_dir: Path) -> None:
    (demo_dir / "mapping" / "mapping-0002.tsv").write_text(
        "TIME\tUID\tPUID\n1\t12345\n2\t67890\tgood\n"
    )
    store = demo_dir / "followed"
    summary = _follow(spark, demo_dir, store, available_now=True)
    assert summary.versions == [1]
    report = open_version(store).manifest.loads[-1]
    assert report["rejected"]["count"] == 1
    assert ("67890", "M", "good", 1) in _hits(store)


def test_a_file_that_cannot_be_read_is_skipped_and_read_again_once_it_changes(
    spark: Any, demo_dir: Path
) -> None:
    broken = demo_dir / "mapping" / "mapping-0002.tsv.gz"
    broken.write_bytes(b"not gzip at all\n")
    (demo_dir / "mapping" / "mapping-0003.tsv").write_text(MAPPINGS[0])
    store = demo_dir / "followed"
    first = _follow(spark, demo_dir, store, available_now=True)
    assert first.versions == [1]  # the rest of the micro-batch is loaded
    warned = [line for line in first.lines if "read again once it changes" in line]  # type: ignore[attr-defined]
    assert warned == [
        f"warning: batch 0: {broken} cannot be read as tsv (zlib inflate failed: incorrect "
        "header check): skipped, and read again once it changes (the rest of the micro-batch "
        "is loaded)"
    ]
    kept = json.loads((store / "stream" / "unreadable.json").read_text())
    assert list(kept) == [str(broken)] and "zlib inflate failed" in kept[str(broken)]["error"]
    shown = io.StringIO()
    write_info(str(store), shown)
    assert "1 file(s) the follower could not read, skipped until they change" in shown.getvalue()
    assert str(broken) not in _loaded(store)

    (demo_dir / "mapping" / "mapping-0004.tsv").write_text(MAPPINGS[2])
    unchanged = _follow(spark, demo_dir, store, available_now=True)
    assert unchanged.versions == [2]  # not retried while it is the same file
    assert str(broken) not in _loaded(store)

    import gzip

    broken.write_bytes(gzip.compress(MAPPINGS[1].encode()))  # fixed: read with the next batch
    (demo_dir / "mapping" / "mapping-0005.tsv").write_text(MAPPINGS[0])
    fixed = _follow(spark, demo_dir, store, available_now=True)
    assert fixed.versions == [3]
    assert str(broken) in _loaded(store)
    assert json.loads((store / "stream" / "unreadable.json").read_text()) == {}
    assert _hits(store) == _reference(spark, demo_dir)


def test_a_changed_job_and_what_cannot_be_followed_are_refused(spark: Any, demo_dir: Path) -> None:
    store = demo_dir / "followed"
    _follow(spark, demo_dir, store, available_now=True)
    job = json.loads((demo_dir / "job.json").read_text())
    job["tree"]["root"][0]["value"] = "top"
    (demo_dir / "job.json").write_text(json.dumps(job))
    with pytest.raises(LoadError, match=r"The job changed since this store's follower started"):
        _follow(spark, demo_dir, store, available_now=True)
    with pytest.raises(LoadError, match="the store must be a folder"):
        _follow(spark, demo_dir, "s3://bucket/store", available_now=True)  # type: ignore[arg-type]
    job["source"][0]["path"] = "s3://bucket/attributes/"
    (demo_dir / "job.json").write_text(json.dumps(job))
    with pytest.raises(LoadError, match="--follow watches folders Spark reads itself"):
        _follow(spark, demo_dir, demo_dir / "other", available_now=True)
    with pytest.raises(LoadError, match="is not a duration"):
        parse_trigger("soon")
    assert parse_trigger("500ms") == 0.5 and parse_trigger("2m") == 120


def test_the_command_line_follows_until_every_file_is_loaded(
    spark: Any, demo_dir: Path, capsys: Any
) -> None:
    store = str(demo_dir / "followed")
    argv = ["load", str(demo_dir / "job.json"), "--store", store, "--follow", "--available-now"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "batch 0: 2 file(s), 8 record(s), version 1, " in out  # no pending elements: no
    assert "pending" not in out  # pending counters
    assert out.rstrip().endswith(
        "followed 1 micro-batch(es): 2 file(s), 8 record(s), version 1; "
        "stopped: every available file is loaded"
    )
    assert main([*argv[:-2], "--follow", "--trigger", "soon"]) == 2
    assert "--trigger 'soon' is not a duration" in capsys.readouterr().err


def test_a_job_with_pending_elements_counts_them_in_each_batch_line(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    (tmp_path / "job.json").write_text(json.dumps(PENDING_JOB))
    (tmp_path / "a").mkdir()
    (tmp_path / "m").mkdir()
    (tmp_path / "a" / "first.csv").write_text("U\nu1\n")
    (tmp_path / "m" / "first.csv").write_text("U,P\nu1,p1\nu2,p2\n")  # u2: no node yet
    argv = ["load", str(tmp_path / "job.json"), "--store", str(tmp_path / "s")]
    assert main([*argv, "--follow", "--available-now"]) == 0
    out = capsys.readouterr().out
    assert "batch 0: 2 file(s), 3 record(s), pending kept 1 / applied 0 / expired 0, " in out


KILL_POINTS = {"after-manifest": 0, "between-data-and-index": 1, "follow-after-publish": 1}
"""Where a follower is killed, and the version its store is left at."""


@pytest.mark.slow  # three followers' JVMs at once, then three restarts: about 20 s
def test_a_follower_killed_in_a_batch_is_exact_after_a_restart(
    spark: Any, demo_dir: Path, tmp_path: Path
) -> None:
    """Killed after writing its manifest (not published), between publishing the version
    and its dedup index, or after publishing (Spark has not noted the batch: it replays
    it): the restarted follower ends with a clean load's answer, nothing lost and nothing
    counted twice. The three followers run at once, each on its own store."""
    processes = {}
    for point in KILL_POINTS:
        marker = tmp_path / f"marker-{point}"
        env = {
            **os.environ,
            "TREESTORE_FAILPOINT": point,
            "TREESTORE_FAILPOINT_MARKER": str(marker),
        }
        command = [
            sys.executable, "-m", "treestore", "load", str(demo_dir / "job.json"),
            "--store", str(demo_dir / point), "--follow", "--available-now", "--master", "local[1]",
        ]  # fmt: skip
        processes[point] = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
    try:
        for point, process in processes.items():
            wait_for(tmp_path / f"marker-{point}", process)
            kill_all(process)
    finally:
        for process in processes.values():
            kill_all(process)
    assert {point: _version(demo_dir / point) for point in KILL_POINTS} == KILL_POINTS
    (demo_dir / "mapping" / "mapping-0002.tsv").write_text(MAPPINGS[0])
    reference = _reference(spark, demo_dir)
    for point in KILL_POINTS:
        summary = _follow(spark, demo_dir, demo_dir / point, available_now=True)
        assert any("taking over the lock" in line for line in summary.lines), point  # type: ignore[attr-defined]
        assert _hits(demo_dir / point) == reference, point


def test_sigterm_stops_the_command_after_its_micro_batch(demo_dir: Path) -> None:
    store = demo_dir / "followed"
    command = [
        sys.executable, "-m", "treestore", "load", str(demo_dir / "job.json"),
        "--store", str(store), "--follow", "--trigger", "500ms", "--master", "local[1]",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        _wait_until(lambda: store.exists() and _version(store) == 1, "the first batch")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        kill_all(process)
    assert process.returncode == 0, err[-2000:]
    assert "stopping after the current micro-batch" in out
    assert out.rstrip().endswith("version 1; stopped: asked to stop")
    assert "Traceback" not in err
