"""On a real Spark standalone cluster (secured: Spark's authentication and network
encryption on, so every query's rows travel over TLS), treestore gives exactly the
answers local[*] gives:
from the Python API with a user's own SparkSession, and from the command line with
``--master`` or ``TREESTORE_SPARK_MASTER``. Executors never get a path only the driver has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import treestore
from shell.demo import DEMO_OPS, DEMO_PATH
from tests.support.cluster_scenario import QUERIES, run_scenario
from tests.support.spark_cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
# Each test drives applications on the cluster, each starting its executors: a minute or more.
pytestmark = pytest.mark.slow


def _driver_env(cluster: Cluster, folder: Path, **extra: str) -> dict[str, str]:
    """A driver's environment: its temporary files in a folder only the driver has."""
    (folder / "tmp").mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT),
        "TMPDIR": str(folder / "tmp"),
        **cluster.driver_env(),
        **extra,
    }


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def test_every_feature_gives_the_local_answers_on_the_cluster_and_s3(
    spark: Any, spark_cluster: Cluster, s3_bucket: str, tmp_path: Path
) -> None:
    """Loads (incremental, dedup, pending), queries (rows, Arrow, pandas, one Spark job
    each; DataFrames read by the store's source, and one joined with a table), both
    sweep plans, info, check and gc: the same answers, compared whole, from
    local folders on local[*] and from inputs and stores on the S3 server on the cluster
    (whose workers have no AWS settings of their own: the tasks carry the driver's).

    In the same driver, a path only the driver has never reaches a task: ``treestore
    load`` of a job file, and ``treestore sweep`` of inputs, in the driver's own folder
    fail, saying so, and publish nothing."""
    driver = spark_cluster.driver_only / "scenario"
    out = tmp_path / "cluster.json"
    command = [
        sys.executable, "-m", "tests.support.cluster_scenario", "--master", spark_cluster.url,
        "--inputs", f"{s3_bucket}/in", "--stores", f"{s3_bucket}/stores",
        "--work", str(driver / "work"),
        "--out", str(out),
        "--driver-only", str(driver / "own"), "--local-stores", str(tmp_path / "refused"),
    ]  # fmt: skip
    # the cluster's driver runs while the local session answers (the two mostly wait on
    # different things: executors starting, the S3 server; the local tasks)
    with subprocess.Popen(
        command, cwd=driver, env=_driver_env(spark_cluster, driver), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as running:  # fmt: skip
        try:
            local = run_scenario(
                spark, str(tmp_path / "local-in"), str(tmp_path / "local-stores"),
                tmp_path / "local-work",
            )  # fmt: skip
            _, stderr = running.communicate(timeout=600)
        finally:
            running.kill()
    assert running.returncode == 0, stderr[-4000:]
    on_cluster = json.loads(out.read_text())
    refused = on_cluster.pop("refused")
    channels = on_cluster.pop("channels")  # a secured cluster: every query's rows over TLS
    assert channels["authenticate"] == "true" and channels["tls"] and all(channels["tls"])
    assert on_cluster == local
    own = driver / "own"
    said = {"load": "which only the driver has", "sweep": "events.csv, which only the driver has"}
    for command_said in refused:
        assert command_said["code"] == 2, command_said
        assert said[command_said["command"]] in command_said["stderr"], command_said
        assert str(own) in command_said["stderr"] and "Traceback" not in command_said["stderr"]
        assert not command_said["published"]
    assert [r["command"] for r in refused] == ["load", "sweep"]
    assert all(q["jobs"] == 1 for q in on_cluster["demo"]["queries"].values())
    frames = on_cluster["demo"]["frames"]  # DataFrames read from the store on S3 by the tasks
    assert all(frames[path]["equal"] and frames[path]["rows"] for path, _ in QUERIES)
    assert frames["join"] and all(len(row) == 4 for row in frames["join"])


def _cli(cluster: Cluster, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    driver = cluster.driver_only / "cli"
    return _run(
        [sys.executable, "-m", "treestore", *args], driver, _driver_env(cluster, driver, **env)
    )


def _tsv(rows: Any) -> str:
    """The rows as the CLI prints tsv: a header of their column names, then the rows."""
    lines = ["\t".join(rows.column_names()) + "\n"]
    lines += ["\t".join("" if v is None else str(v) for v in row) + "\n" for row in rows]
    return "".join(lines)


def test_the_command_line_on_the_cluster_gives_the_local_answers(
    spark: Any, spark_cluster: Cluster, demo_dir: Path, demo_store: Path
) -> None:
    store = demo_dir / "cluster-store"
    loaded = _cli(
        spark_cluster, "load", str(demo_dir / "job.json"), "--store", str(store),
        "--master", spark_cluster.url,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    local = treestore.open(demo_store, spark=spark)
    master = {"TREESTORE_SPARK_MASTER": spark_cluster.url, "TREESTORE_LOCAL_QUERY_LIMIT": "-1"}
    # one driver for both queries: each application on the cluster starts its executors
    shell = _cli(
        spark_cluster, "shell", str(store), "-e", f"{DEMO_PATH} | rops {DEMO_OPS}",
        "-e", "root/+:+hits", **master,
    )  # fmt: skip
    assert shell.returncode == 0, shell.stderr[-3000:]
    expected = _tsv(local.query(DEMO_PATH, rops=DEMO_OPS)) + _tsv(local.query("root/+:+hits"))
    assert shell.stdout == expected


@pytest.fixture(autouse=True)
def _driver_folders(spark_cluster: Cluster) -> None:
    (spark_cluster.driver_only / "cli").mkdir(parents=True, exist_ok=True)
    (spark_cluster.driver_only / "scenario").mkdir(parents=True, exist_ok=True)
