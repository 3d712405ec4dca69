"""Bad remote settings give one clear line, within seconds, and change nothing: an
unreachable master, executors without the project's Python packages, a bucket that
does not exist (for a store or for inputs), wrong credentials, an endpoint that refuses."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shell.cli import main
from tests.support.spark_start_lines import without_spark_start
from treestore.errors import SparkSetupError
from treestore.spark import check_master


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _treestore(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treestore", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _one_line(stderr: str) -> str:
    said = without_spark_start(stderr).splitlines()
    lines = [line for line in said if not line.startswith("WARNING: Using")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "py4j" not in stderr
    return lines[0]


def test_an_unreachable_master_is_refused_at_once(demo_store: Path) -> None:
    master = f"spark://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(SparkSetupError, match="Cannot reach the Spark master"):
        check_master(master)
    with pytest.raises(SparkSetupError, match="not a valid URL"):
        check_master("spark://nowhere")
    done = _treestore(
        "query", str(demo_store), "root/+", "--master", master, TREESTORE_LOCAL_QUERY_LIMIT="-1"
    )
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert line.startswith(f"treestore query: Cannot reach the Spark master {master} (")
    assert "Connection refused" in line and "check the URL" in line
    assert time.monotonic() - started < 20


@pytest.mark.spark
def test_executors_without_the_projects_packages_are_named(
    demo_store: Path, tmp_path: Path
) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    done = _treestore(
        "query", str(demo_store), "root/+", "--master", "local[1]",
        PYSPARK_PYTHON=str(bare / "bin" / "python"), TREESTORE_LOCAL_QUERY_LIMIT="-1",
    )  # fmt: skip
    assert done.returncode == 2
    # local[1]'s executor is this machine: its Python daemon (the bare one) writes to the
    # same stderr, and may print its own ConnectionResetError when the JVM drops it. On a
    # cluster that goes to the executor's log; what treestore prints is checked whole.
    ours = re.sub(
        r"Traceback \(most recent call last\):\n  File \"[^\n]*pyspark/daemon\.py\".*?"
        r"\n(ConnectionResetError|BrokenPipeError)[^\n]*\n",
        "",
        done.stderr,
        flags=re.DOTALL,
    )
    line = _one_line(ours)
    assert "the executors' Python cannot import" in line
    assert "ship the project's environment" in line


def test_a_missing_bucket_and_a_refusing_endpoint_are_one_line(
    s3_bucket: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = "s3://no-such-bucket-here/store"
    commands = (["query", missing, "root/+"], ["info", missing], ["check", missing])
    for command in (*commands, ["gc", missing]):  # gc creates nothing where no store is
        assert main(command) == 2
        assert "s3://no-such-bucket-here/store does not exist or is empty" in _one_line(
            capsys.readouterr().err
        )
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_closed_port()}")
    started = time.monotonic()
    assert main(["info", f"{s3_bucket}/store"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "the endpoint refuses connections (check AWS_ENDPOINT_URL)" in line
    assert time.monotonic() - started < 20


@pytest.mark.spark
def test_wrong_credentials_and_missing_buckets_refuse_a_load_and_change_nothing(
    spark: object, s3_bucket: str, demo_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from tests.support.s3_server import start_s3_server

    job = demo_dir / "job.json"
    started = time.monotonic()
    assert main(["load", str(job), "--store", "s3://no-such-bucket-here/store"]) == 2
    assert "the bucket does not exist" in _one_line(capsys.readouterr().err)
    doc = json.loads(job.read_text())
    doc["source"][0]["path"] = "s3://no-such-bucket-here/attributes/"
    (demo_dir / "s3-inputs.json").write_text(json.dumps(doc))
    assert main(["load", str(demo_dir / "s3-inputs.json"), "--store", f"{s3_bucket}/store"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "s3://no-such-bucket-here/attributes/" in line and "does not exist" in line
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    strict = start_s3_server(tmp_path, checks_credentials=True)
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", strict.endpoint)
        for command in (
            ["info", "s3://any-bucket/store"],
            ["load", str(job), "--store", "s3://any-bucket/store"],
        ):
            assert main(command) == 2
            line = _one_line(capsys.readouterr().err)
            assert "access denied (check the credentials: AWS_ACCESS_KEY_ID" in line, line
            assert "testing" not in line  # no key in a message
    finally:
        strict.stop()
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    assert time.monotonic() - started < 60
    assert main(["info", f"{s3_bucket}/store"]) == 2  # the failed load made no store
    assert "does not exist or is empty" in _one_line(capsys.readouterr().err)
