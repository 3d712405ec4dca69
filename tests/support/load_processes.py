"""Loads in a child process, stopped at a failpoint and killed there.

:func:`start_load` runs ``treestore load`` in a process group of its own with a
failpoint set (see :mod:`treestore.failpoints`), :func:`wait_for` waits until the load
reaches it (the failpoint writes a pid to its marker file), and :func:`kill_all` kills
the whole group by pid. :data:`NEW_MAPPING` is the demo's second mapping file, the new
input such a load reads.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["NEW_MAPPING", "kill_all", "start_load", "wait_for"]

NEW_MAPPING = "TIME\tUID\tPUID\n1419441800000\t11111\tqqq\n1419441800000\t12345\tdef\n"


def start_load(job: Path, store: Path, failpoint: str, marker: Path) -> subprocess.Popen[str]:
    """Start ``treestore load JOB --store STORE`` on ``local[2]`` with ``failpoint`` set;
    the failpoint writes its pid to ``marker`` when the load reaches it."""
    env = {
        **os.environ,
        "TREESTORE_FAILPOINT": failpoint,
        "TREESTORE_FAILPOINT_MARKER": str(marker),
    }
    command = [sys.executable, "-m", "treestore", "load", str(job), "--store", str(store)]
    return subprocess.Popen(
        [*command, "--master", "local[2]"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for(marker: Path, process: subprocess.Popen[str], seconds: float = 180) -> int:
    """Wait until the load writes ``marker``; the pid written there. Fails when the load
    ends first, or ``seconds`` pass."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if marker.exists() and marker.read_text().strip():
            return int(marker.read_text())
        if process.poll() is not None:
            raise AssertionError(f"the load ended before its failpoint: {process.communicate()}")
        time.sleep(0.2)
    raise AssertionError("the load never reached its failpoint")


def kill_all(process: subprocess.Popen[str]) -> None:
    """Kill ``process``'s process group (the load, its JVM, Spark's Python workers)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
