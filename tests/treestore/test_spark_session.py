"""The Spark session treestore creates: quiet unless asked, and executors that can work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

START = "from treestore.spark import get_session; print(get_session('local[1]').range(3).count())"


@pytest.mark.spark
def test_the_jvm_says_nothing_on_stderr_unless_verbose() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TREESTORE_VERBOSE"}
    quiet = subprocess.run(
        [sys.executable, "-c", START], capture_output=True, text=True, env=env, timeout=300
    )
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "3\n", "")


USERS_SESSION = """
import sys
from pyspark.sql import SparkSession
import treestore
from loaders import load_job, run_load

spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
for name, call in [
    ("open", lambda: treestore.open(sys.argv[1], spark=spark)),
    ("load", lambda: run_load(spark, load_job(sys.argv[2]), sys.argv[1])),
]:
    try:
        call()
        print(name, "no error")
    except treestore.TreestoreError as exc:
        print(name, type(exc).__name__, exc)
"""


@pytest.mark.spark
def test_a_users_session_without_pyspark_python_is_refused_up_front(tmp_path: Path) -> None:
    from shell.demo import write_demo_inputs

    job = write_demo_inputs(tmp_path)
    bare = tmp_path / "bin"  # `python3` here is the base interpreter, without the venv
    bare.mkdir()
    (bare / "python3").symlink_to(os.path.realpath(getattr(sys, "_base_executable", "")))
    env = {k: v for k, v in os.environ.items() if k not in {"PYSPARK_PYTHON", "TREESTORE_VERBOSE"}}
    env["PATH"] = f"{bare}{os.pathsep}{env['PATH']}"
    script = tmp_path / "users.py"
    script.write_text(USERS_SESSION)
    run = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "store"), str(job)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = run.stdout.splitlines()
    assert [line.split(" ", 2)[:2] for line in lines] == [
        ["open", "SparkSetupError"],
        ["load", "SparkSetupError"],
    ], run.stdout + run.stderr
    for line in lines:
        assert f"The session's workers run {bare / 'python3'}: the executors' Python" in line
        assert "pyarrow" in line and "treestore" in line
        assert f"set PYSPARK_PYTHON={sys.executable} " in line
    assert not (tmp_path / "store").exists()
