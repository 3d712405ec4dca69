"""``treestore query ... --out FILE.parquet``: the rows go to a Parquet file (or a folder of
part files), one line says how many went where; refusals and errors are one line with
status 2; a write killed or interrupted leaves no file under its name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from query.driver.runner import open_store
from shell.cli import main

SCAN = "root/+/+:+hits"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _sorted_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(row.values()) for row in table.to_pylist()), key=repr)


def test_rows_go_to_the_file_and_one_line_says_so(
    demo_store: Path,
    spark: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TREESTORE_LOCAL_QUERY_LIMIT", "-1")  # a Spark job, rows streamed
    out = tmp_path / "out.parquet"
    assert _run(["query", str(demo_store), SCAN, "--out", str(out)], capsys) == (
        0,
        f"wrote 6 rows to {out} (3 columns)\n",
        "",
    )
    expected = open_store(str(demo_store), spark).query(SCAN).to_arrow()
    written = pq.read_table(out)
    assert written.schema.equals(expected.schema)
    assert _sorted_rows(written) == _sorted_rows(expected)
    status, printed, err = _run(
        ["query", str(demo_store), "root/+:+hits", "--out", str(out)], capsys
    )
    assert (status, printed) == (2, "")
    assert err == (
        f"treestore query: {out} exists: pass --replace to replace it, or choose another name.\n"
    )
    argv = ["query", str(demo_store), "root/+:+hits", "--out", str(out), "--replace"]
    assert _run(argv, capsys) == (0, f"wrote 4 rows to {out} (2 columns)\n", "")
    hits = open_store(str(demo_store), spark).query("root/+:+hits").to_arrow()
    assert _sorted_rows(pq.read_table(out)) == _sorted_rows(hits)
    folder = f"file://{tmp_path}/parts/"
    argv = ["query", str(demo_store), "root/+/+/+:+hits", "--out", folder]
    assert _run(argv, capsys) == (0, f"wrote 12 rows to {folder} (4 columns, 1 part file)\n", "")
    assert os.listdir(tmp_path / "parts") == ["part-00000.parquet"]
    assert sorted(os.listdir(tmp_path)) == ["out.parquet", "parts"]


def test_an_out_that_is_not_parquet_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nowhere = str(tmp_path / "no-store")  # not even the store is looked at
    status, out, err = _run(["query", nowhere, "root/+", "--out", "rows.csv"], capsys)
    assert (status, out) == (2, "")
    assert err == (
        "treestore query: --out writes Parquet: name a .parquet file, a folder (ending in /) "
        "or a folder URI (s3://bucket/results/), not rows.csv. For tsv, csv or json, send the "
        "printed rows to a file: > rows.csv\n"
    )
    assert os.listdir(tmp_path) == []


def test_a_place_that_cannot_be_written_is_one_line(
    demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "out.parquet"
    status, printed, err = _run(["query", str(demo_store), SCAN, "--out", str(out)], capsys)
    assert (status, printed) == (2, "")
    assert err == (
        f"treestore query: Cannot write {out}: {tmp_path / 'file'} is a file, not a folder.\n"
    )


def _start(demo_store: Path, out: Path, marker: Path) -> subprocess.Popen[str]:
    """``treestore query`` of a driver walk (no JVM) into ``out``, stopped after its first
    row group is written (still under a temporary name)."""
    env = {
        **os.environ,
        "TREESTORE_FAILPOINT": "parquet-row-group-written",
        "TREESTORE_FAILPOINT_MARKER": str(marker),
    }
    command = [sys.executable, "-m", "treestore", "query", str(demo_store), "root/12345/+/+"]
    return subprocess.Popen(
        [*command, "--out", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(marker: Path, process: subprocess.Popen[str]) -> None:
    for _ in range(1200):
        if marker.exists() and marker.read_text().strip():
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    raise AssertionError("the write never reached its failpoint")


@pytest.mark.parametrize("stop", ["Ctrl-C", "kill"])
def test_a_stopped_write_leaves_no_file_under_its_name(
    stop: str, demo_store: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    process = _start(demo_store, folder / "x.parquet", tmp_path / "reached")
    try:
        _wait_for(tmp_path / "reached", process)
        (temp,) = os.listdir(folder)  # the rows so far, under a hidden temporary name
        assert temp.startswith(".x.parquet.") and temp.endswith(".tmp")
        assert (folder / temp).stat().st_size > 0
        process.send_signal(signal.SIGINT if stop == "Ctrl-C" else signal.SIGKILL)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if stop == "Ctrl-C":  # the temporary file is removed
        assert (process.returncode, out, err) == (130, "", "interrupted\n")
        assert os.listdir(folder) == []
    else:  # killed: at most the hidden temporary file is left, never x.parquet
        assert process.returncode == -signal.SIGKILL
        assert os.listdir(folder) == [temp]
