"""On a real Spark standalone cluster, treestore gives the answers local[*] gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import treestore
from loaders import load_job, run_load
from shell.demo import DEMO_OPS, DEMO_PATH

QUERIES = [(DEMO_PATH, DEMO_OPS), ("root/+:+hits", None), ("root/+/+/+", None)]


def _cli(*args: str) -> str:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-m", "treestore", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_demo_load_and_queries_give_the_local_answers(
    spark: Any, spark_cluster: str, demo_dir: Path, demo_store: Path
) -> None:
    store = demo_dir / "cluster-store"
    _cli("load", str(demo_dir / "job.json"), "--store", str(store), "--master", spark_cluster)
    local = treestore.open(demo_store, spark=spark)
    for path, rops in QUERIES:
        options = ["--rops", rops] if rops else []
        on_cluster = _cli("query", str(store), path, *options, "--master", spark_cluster)
        expected = "".join(
            "\t".join("" if v is None else str(v) for v in row) + "\n"
            for row in local.query(path, rops=rops)
        )
        assert on_cluster == expected, path


def test_an_incremental_load_on_the_cluster_reads_only_new_files(
    spark: Any, spark_cluster: str, demo_dir: Path
) -> None:
    cluster_store, local_store = demo_dir / "cluster-store", demo_dir / "local-store"
    job = str(demo_dir / "job.json")
    _cli("load", job, "--store", str(cluster_store), "--master", spark_cluster)
    run_load(spark, load_job(job), local_store)
    (demo_dir / "mapping" / "mapping-0002.tsv").write_text("TIME\tUID\tPUID\n1\t67890\tnew\n")
    second = _cli("load", job, "--store", str(cluster_store), "--master", spark_cluster)
    assert (
        "source attributes: 0 new file(s)" in second and "source mapping: 1 new file(s)" in second
    )
    run_load(spark, load_job(job), local_store)
    on_cluster = _cli("query", str(cluster_store), "root/+/M/+", "--master", spark_cluster)
    local = treestore.open(local_store, spark=spark).query("root/+/M/+").to_list()
    assert on_cluster == "".join(f"{uid}\t{puid}\n" for uid, puid in local)
    assert ("67890", "new") in local
