"""The Spark session treestore creates: quiet unless asked, executors that can work, and a
failed Spark job's cause in one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from treestore.errors import LoadError, SparkSetupError
from treestore.spark import connect_session, spark_errors

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


def _undecodable(batches: Iterator[Any]) -> Iterator[Any]:
    for batch in batches:
        b"\x84abc".decode("utf-8")
        yield batch


def _refusing(batches: Iterator[Any]) -> Iterator[Any]:
    for batch in batches:
        try:
            b"\x84abc".decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LoadError("input file /in/a.tsv cannot be read as tsv (why)") from exc
        yield batch


@pytest.mark.parametrize(
    ("task", "said"),
    [
        (
            _undecodable,
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x84 in position 0: "
            "invalid start byte",
        ),
        (_refusing, "input file /in/a.tsv cannot be read as tsv (why)"),
    ],
    ids=["python", "treestore"],
)
def test_a_task_that_raises_says_its_own_exception(spark: Any, task: Any, said: str) -> None:
    with pytest.raises(LoadError) as caught, spark_errors(LoadError, "Reading"):
        spark.range(2).mapInArrow(task, "id long").collect()
    assert str(caught.value) == f"Reading failed: {said}"


def test_a_java_failure_says_its_root_cause(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    with pytest.raises(LoadError) as caught, spark_errors(LoadError, "Writing"):
        spark.range(2).write.parquet(str(tmp_path / "a_file" / "out"))
    assert str(caught.value) == (
        "Writing failed: org.apache.hadoop.fs.ParentNotDirectoryException: Parent path is "
        f"not a directory: file:{tmp_path / 'a_file'}"
    )


def test_a_java_failure_while_spark_reads_a_file_names_the_file(spark: Any, tmp_path: Path) -> None:
    broken = tmp_path / "a.csv.gz"
    broken.write_bytes(b"not gzip at all\n")
    with pytest.raises(LoadError) as caught, spark_errors(LoadError, "Reading"):
        spark.read.csv(str(broken)).collect()
    assert str(caught.value) == (
        f"Reading failed: java.io.IOException: not a gzip file (reading file://{broken})"
    )


def test_an_error_raised_while_a_ctrl_c_was_handled_is_the_ctrl_c() -> None:
    """py4j, cleaning up after a Ctrl-C while Spark starts, may raise its own error in the
    Ctrl-C's place: that error is still the Ctrl-C (exit 130), not a failed start."""
    from treestore.spark import _follows_ctrl_c

    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("Gateway must be connected to send cancel cmd.") from None
    except RuntimeError as exc:
        cleanup = exc
    assert _follows_ctrl_c(cleanup)
    try:
        raise ValueError("bad master") from OSError("refused")
    except ValueError as exc:
        assert not _follows_ctrl_c(exc)


@pytest.mark.spark
def test_sessions_started_by_two_threads_at_once_leave_the_launch_as_it_was(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shell starts Spark in the background while a first query may start it too: both
    get the one session, and PySpark's JVM launch is left as it was (not a wrapper of a
    finished start, whose log file is closed)."""
    import threading

    from pyspark import java_gateway
    from pyspark.core import context
    from pyspark.sql import SparkSession

    from treestore.spark import get_session

    original = context.launch_gateway
    slow = SparkSession.Builder.getOrCreate

    def slowly(self: Any) -> Any:  # the starts overlap, as a JVM's start would make them
        time.sleep(0.3)
        return slow(self)

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", slowly)
    barrier = threading.Barrier(4)
    got: list[Any] = []

    def start() -> None:
        barrier.wait()
        got.append(get_session())

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 4 and all(s.sparkContext is spark.sparkContext for s in got)
    assert context.launch_gateway is original
    assert java_gateway.Popen is subprocess.Popen


def test_column_functions_make_no_round_trips_of_their_own(spark: Any) -> None:
    """PySpark's DataFrame debugging sends each column function's call site to the JVM;
    treestore's session turns it off, so building a plan costs no round trips per
    function (a sweep's plan made 560 with it, 283 without)."""
    import py4j.clientserver
    from pyspark.sql import functions as F

    F.col("warm")  # PySpark reads the setting once, at the first column function
    sent = []
    original = py4j.clientserver.ClientServerConnection.send_command

    def counting(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(command)
        return original(self, command, *args, **kwargs)

    py4j.clientserver.ClientServerConnection.send_command = counting  # type: ignore[method-assign]
    try:
        F.col("a") + F.lit(1)
    finally:
        py4j.clientserver.ClientServerConnection.send_command = original  # type: ignore[method-assign]
    assert len(sent) <= 8, len(sent)
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"


def test_a_local_session_broadcasts_without_compressing(spark: Any) -> None:
    """A broadcast in a local session is read on the same machine: its blocks are not
    compressed (a cluster's session keeps Spark's default), and it still arrives whole."""
    assert spark.sparkContext.getConf().get("spark.broadcast.compress") == "false"
    shared = spark.sparkContext.broadcast(list(range(1000)))
    try:
        assert (
            spark.sparkContext.parallelize([0, 999], 2).map(lambda i: shared.value[i]).sum() == 999
        )
    finally:
        shared.unpersist()


def test_the_executors_python_workers_get_the_memory_settings(spark: Any) -> None:
    """The executors' Python workers keep freed Arrow memory for ten seconds, as the
    command's driver does, and ask numpy for huge pages (numpy's default on Linux), which
    only the command's driver turns off (tests/treestore/test_memory_settings.py)."""
    import os

    import pyarrow as pa

    from treestore.settings import HUGE_PAGES_ENV, MEMORY_SETTINGS, WORKER_HUGE_PAGES

    def read_env(batches: Any) -> Any:
        for _ in batches:
            yield pa.RecordBatch.from_pydict(
                {
                    "delay": [os.environ.get("MIMALLOC_PURGE_DELAY", "")],
                    "huge": [os.environ.get(HUGE_PAGES_ENV, "unset")],
                }
            )

    seen = spark.range(0, 2, 1, 2).mapInArrow(read_env, "delay string, huge string").collect()
    assert {row.delay for row in seen} == {"10000"}
    assert {row.huge for row in seen} == {WORKER_HUGE_PAGES}
    for name, value in MEMORY_SETTINGS.items():
        assert spark.conf.get(f"spark.executorEnv.{name}") == value


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed when the block ends


def test_a_connect_master_that_does_not_answer_is_one_line_at_once() -> None:
    # the port is asked first (the client would retry for minutes); no Connect client starts
    port = _closed_port()
    with pytest.raises(SparkSetupError) as refused:
        connect_session(f"sc://127.0.0.1:{port}")
    assert str(refused.value) == (
        f"Cannot reach the Spark Connect server sc://127.0.0.1:{port} (127.0.0.1:{port}: "
        "Connection refused): check the URL (--master or TREESTORE_SPARK_MASTER) and that "
        "the server runs."
    )
    with pytest.raises(SparkSetupError) as invalid:
        connect_session("sc://")
    assert str(invalid.value) == "The Spark Connect URL 'sc://' is not valid: write sc://HOST:PORT."
