"""Ctrl-C at any moment of a command: one line, exit status 130, no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.spark_start_lines import without_spark_start

pytestmark = pytest.mark.spark


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def _wait_for(ready: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    for _ in range(1200):  # the moment comes long before this runs out
        if ready() or process.poll() is not None:
            return
        time.sleep(0.05)


@pytest.mark.parametrize("moment", ["at once", "while the JVM starts", "in a Spark task"])
def test_ctrl_c_is_one_line_and_130(moment: str, demo_store: Path, tmp_path: Path) -> None:
    marker = tmp_path / "reached"
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "TREESTORE_LOCAL_QUERY_LIMIT": "-1",  # the query runs as a Spark job
        "TREESTORE_FAILPOINT": "in-query-task",
        "TREESTORE_FAILPOINT_MARKER": str(marker),
    }
    env.pop("TREESTORE_VERBOSE", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "treestore", "query", str(demo_store), "root/+:+hits"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    jvms: list[str] = []
    try:
        if moment == "while the JVM starts":
            _wait_for(lambda: bool(_children(process.pid)), process)
            jvms = _children(process.pid)
        elif moment == "in a Spark task":
            _wait_for(marker.exists, process)
            assert marker.exists()
        else:
            time.sleep(0.3)
        assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert (process.returncode, without_spark_start(err)) == (130, "interrupted\n")
    assert out == ""
    # a JVM interrupted while it starts is killed, not left running on its own
    assert [pid for pid in jvms if _running(pid)] == []


def _running(pid: str) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


_INTERRUPT_WHILE_LOADING = """
import os, signal, sys

class InterruptOnLoad:
    def find_spec(self, name, path, target=None):
        if name == "shell.cli":
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, InterruptOnLoad())
from shell.entry import run
run()
"""


def test_ctrl_c_while_the_command_line_loads_is_one_line_and_130() -> None:
    """Ctrl-C while the command's modules load (before its own handling is in place)."""
    process = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_WHILE_LOADING, "info", "nowhere"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = without_spark_start(process.stderr)
    assert (process.returncode, said, process.stdout) == (130, "interrupted\n", "")


def test_a_command_line_that_ends_normally_keeps_its_status(tmp_path: Path) -> None:
    """Only Ctrl-C ends the process early: other statuses go through ``sys.exit``."""
    process = subprocess.run(
        [sys.executable, "-m", "treestore", "info", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == 2, process.stderr
    assert "Traceback" not in process.stderr
