"""The shell in a real terminal (a pty driven by pexpect): type a query and see its rows,
Tab completes a node name, Ctrl-C during a running query returns to a working prompt,
reverse search finds an earlier line, Ctrl-D leaves, and the history is kept on disk."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.spark


def test_shell_in_a_terminal(spark: Any, demo_store: Path, tmp_path: Path) -> None:
    store = demo_store
    marker = tmp_path / "query-task-reached"
    env = {
        **os.environ,
        "TERM": "xterm",
        "PROMPT_TOOLKIT_NO_CPR": "1",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        # the first query's Spark task stops (sleeps) at this point until cancelled
        "TREESTORE_FAILPOINT": "in-query-task",
        "TREESTORE_LOCAL_QUERY_LIMIT": "-1",  # the query must run in a Spark task
        "TREESTORE_FAILPOINT_MARKER": str(marker),
        "TREESTORE_FAILPOINT_ONCE": "1",
        "PYSPARK_PYTHON": sys.executable,
    }
    command = [sys.executable, "-m", "treestore", "shell", str(store), "--master", "local[2]"]
    child = pexpect.spawn(
        command[0], command[1:], env=env, encoding="utf-8", timeout=120, dimensions=(40, 120)
    )
    try:
        child.expect("store> ")
        # Ctrl-C while a query runs cancels its Spark job and returns to the prompt
        child.sendline("root/+:+hits")
        for _ in range(600):
            if marker.exists():
                break
            child.expect([pexpect.TIMEOUT], timeout=0.1)
        assert marker.exists(), "the query never reached its Spark task"
        child.sendcontrol("c")
        child.expect("cancelled")
        child.expect("store> ")
        # the prompt works: a query prints its rows as an aligned table, then count and time
        child.sendline("root/+:nodes>1/+/+:+hits")
        child.expect(r"name\s+name2\s+name3\s+hits")  # the header names the columns
        child.expect(r"12345\s+A\s+1\s+1")
        child.expect(r"9 rows in [0-9.]+ s")
        child.expect("store> ")
        # Tab completes a node name from the store
        child.send("root/+123")
        child.send("\t")
        child.sendline("/+")
        child.expect(r"12345  A")
        child.expect(r"12345  M")
        child.expect(r"2 rows in")
        child.expect("store> ")
        # Ctrl-R searches the history backwards; Enter takes the line found, Enter runs it
        child.sendcontrol("r")
        child.send("nodes>1")
        child.expect("nodes>1")
        child.sendline("")
        child.sendline("")
        child.expect(r"9 rows in")
        child.expect("store> ")
        child.sendcontrol("d")  # Ctrl-D at an empty prompt leaves
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    history = (tmp_path / "config" / "treestore" / "history").read_text()
    assert "root/+:nodes>1/+/+:+hits" in history and "root/+12345/+" in history
