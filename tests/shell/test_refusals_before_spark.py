"""Refusals that need no Spark are answered before a JVM starts (and item 4's load case)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import treestore.spark
from loaders.job.model import load_job
from shell.cli import main
from shell.demo import write_demo_inputs
from treestore.storage.pagestore import page_store_for
from treestore.store.layout import STREAM_JOB
from treestore.store.lock import store_lock
from treestore.store.versions import StoreWriter


class SparkStarted(Exception):
    """Raised by the patched session factory: the command asked for Spark."""


@pytest.fixture(autouse=True)
def _no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise SparkStarted("a Spark session was asked for")

    monkeypatch.setattr(treestore.spark, "get_session", refuse)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_shard_count_mismatch_is_refused_without_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_demo_inputs(tmp_path)
    StoreWriter(tmp_path / "store", shards=3)
    status, _, err = _run(["load", str(job), "--store", str(tmp_path / "store")], capsys)
    assert status == 2
    assert "was created with 3 shards" in err and "this job asks for 8 shards" in err


def test_nothing_new_to_load_is_said_without_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in").mkdir()
    job = tmp_path / "job.json"
    job.write_text(
        json.dumps(
            {
                "shards": 2,
                "source": [{"name": "s", "path": "in/", "format": "tsv", "shard_by": "K"}],
                "tree": {"root": [{"type": "value", "key": "K"}]},
            }
        )
    )
    status, out, err = _run(["load", str(job), "--store", str(tmp_path / "store")], capsys)
    assert (status, err) == (0, "")
    assert "source s: 0 new file(s)" in out
    assert f"warning: source s: its path {tmp_path / 'in'} matches no file" in out
    assert "nothing new to load: the store is unchanged" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "job.json"]


def test_a_load_into_a_file_is_one_line_without_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_demo_inputs(tmp_path)
    (tmp_path / "afile").write_text("x\n")
    status, _, err = _run(["load", str(job), "--store", str(tmp_path / "afile")], capsys)
    assert status == 2
    assert err == (
        f"treestore load: {tmp_path / 'afile'} is a file, not a store folder: give the "
        "folder of a store, or a new folder to create one in.\n"
    )


@pytest.mark.parametrize(
    ("events", "extra", "expected"),
    [
        ("events.txt", [], "Cannot tell the format of {events}: name it .csv"),
        ("missing.csv", [], "{events} does not exist: give a csv, tsv, json or parquet"),
        ("events.csv", ["--name", "a/b"], "A sweep's name must be a non-empty node name"),
        ("events.csv", ["--out", "{tmp}/taken.parquet"], "--out {tmp}/taken.parquet exists"),
    ],
)
def test_sweep_refusals_need_no_spark(
    events: str,
    extra: list[str],
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("events.txt", "events.csv", "intervals.csv", "taken.parquet"):
        (tmp_path / name).write_text("id,time\n1,2\n")
    argv = ["sweep", "--events", str(tmp_path / events), "--intervals"]
    argv += [str(tmp_path / "intervals.csv"), "--store", str(tmp_path / "store")]
    argv += [a.format(tmp=tmp_path) for a in extra]
    if "--name" not in extra:
        argv += ["--name", "s"]
    status, _, err = _run(argv, capsys)
    assert status == 2
    assert expected.format(events=tmp_path / events, tmp=tmp_path) in err, err
    assert not (tmp_path / "store").exists()


def _follow_store(tmp_path: Path) -> tuple[Path, Path]:
    """The demo's job, and a store made for it (no version yet)."""
    job = write_demo_inputs(tmp_path)
    StoreWriter(tmp_path / "store", 8, load_job(job).hash)
    return job, tmp_path / "store"


def _changed_job(tmp_path: Path) -> str:
    (tmp_path / "store" / STREAM_JOB).parent.mkdir()
    (tmp_path / "store" / STREAM_JOB).write_text('{"digest": "other", "job": "old.json"}')
    return "The job changed since this store's follower started (old.json)"


def _locked(tmp_path: Path) -> str:
    return f"The store {tmp_path / 'store'} is locked by a test's holder (pid {os.getpid()}"


def _source_gone(tmp_path: Path) -> str:
    shutil.rmtree(tmp_path / "mapping")
    return "The folder must exist before following it."


def _uri_store(tmp_path: Path) -> str:
    return "so the store must be a folder (local or mounted), not file://"


@pytest.mark.parametrize("refusal", [_changed_job, _locked, _source_gone, _uri_store])
def test_a_followers_refusals_from_the_stores_files_need_no_spark(
    refusal: Callable[[Path], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each once came after Spark's start (11-14 s on a follower of a store at a URI)."""
    job, store = _follow_store(tmp_path)
    expected = refusal(tmp_path)
    location = f"file://{store}" if refusal is _uri_store else str(store)
    argv = ["load", str(job), "--store", location, "--follow", "--available-now"]
    holding = store_lock(page_store_for(str(store)), "a test's holder")
    with holding if refusal is _locked else contextlib.nullcontext():
        status, _, err = _run(argv, capsys)
    assert status == 2
    assert expected in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("first_load", [True, False])
def test_a_load_while_another_holds_the_lock_is_refused_without_spark(
    first_load: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It once waited for Spark's start (44 s) before the lock said no; the same for a
    store's first load, whose folder the holder created."""
    job = write_demo_inputs(tmp_path)
    store = tmp_path / "store"
    if not first_load:
        StoreWriter(store, shards=load_job(job).shards)
    with store_lock(page_store_for(str(store)), "treestore load"):
        status, out, err = _run(["load", str(job), "--store", str(store)], capsys)
    assert status == 2, out + err
    assert "is locked by treestore load (pid" in err and "Wait for it to finish" in err
    assert len(err.strip().splitlines()) == 1, err
