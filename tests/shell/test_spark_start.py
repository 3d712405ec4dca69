"""Commands that start Spark say so at once and how long it took: no silent waits."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from shell.demo import write_demo_inputs
from shell.spark_start import SparkStart, _tick, started_spark


def test_the_terminal_line_counts_the_seconds_on_one_line() -> None:
    done = threading.Event()
    done.set()  # one tick, then stop
    err = io.StringIO()
    _tick(err, time.perf_counter() - 3.2, done)
    assert err.getvalue() == "\rstarting Spark… 3 s"


@pytest.mark.spark
def test_a_running_session_is_returned_without_a_word(spark: object) -> None:
    err, start = io.StringIO(), SparkStart()
    assert started_spark(None, err, terminal=False, start=start) is spark
    assert err.getvalue() == "" and start.seconds == 0.0


@pytest.mark.spark
def test_a_load_says_spark_is_starting_and_counts_it_in_its_time(tmp_path: Path) -> None:
    """Through a real process, stderr not a terminal: plain lines, then the whole time."""
    job = write_demo_inputs(tmp_path)
    command = [sys.executable, "-m", "treestore", "load", str(job), "--store", str(tmp_path / "s")]
    done = subprocess.run(
        [*command, "--master", "local[2]"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    said = done.stderr.splitlines()
    assert said[0] == "starting Spark…"
    assert re.fullmatch(r"Spark started in \d+\.\d s", said[1]), said
    (first,) = [line for line in done.stdout.splitlines() if line.startswith("published")]
    found = re.fullmatch(
        r"published version 1 in ([\d.]+) s \(([\d.]+) s in all, ([\d.]+) s of it starting Spark\)",
        first,
    )
    assert found, first
    load, whole, starting = (float(x) for x in found.groups())
    assert starting == float(said[1].split()[3]) and whole >= load + starting - 0.1
