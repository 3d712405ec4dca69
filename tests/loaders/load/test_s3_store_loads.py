"""Loads into a store on S3 (a real S3-compatible server): two loads started together
never both publish, and a load killed after writing its manifest leaves the previous
version readable and the next load able to finish the job."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import treestore
from loaders import load_job, run_load
from tests.support.load_processes import NEW_MAPPING, kill_all, start_load, wait_for
from treestore.events import as_lines
from treestore.storage.pagestore import page_store_for
from treestore.store.lock import lock_holder
from treestore.store.versions import published_versions

pytestmark = pytest.mark.spark


def _load_process(job: Path, store: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "treestore", "load", str(job), "--store", store]
    return subprocess.Popen(
        [*command, "--master", "local[1]"],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _hits(spark: Any, store: str | Path) -> list[Any]:
    return treestore.open(store, spark=spark).query("root/+/+/+:+hits").to_list()


def _reference(spark: Any, demo_dir: Path) -> list[Any]:
    """The hits of a local-folder store that loaded the same files without any trouble."""
    store = demo_dir / "reference-store"
    run_load(spark, load_job(demo_dir / "job.json"), store)
    return _hits(spark, store)


def test_two_loads_started_together_never_both_publish(
    spark: Any, demo_dir: Path, s3_bucket: str
) -> None:
    store = f"{s3_bucket}/store"
    job = demo_dir / "job.json"
    run_load(spark, load_job(job), store)
    (demo_dir / "mapping" / "mapping-0002.tsv").write_text(NEW_MAPPING)
    racers = [_load_process(job, store) for _ in range(2)]
    outcomes = [(racer.wait(timeout=300), *racer.communicate()) for racer in racers]
    codes = sorted(code for code, _, _ in outcomes)
    refused = [err for code, _, err in outcomes if code != 0]
    assert len(refused) <= 1, outcomes
    if codes == [0, 2]:  # they overlapped: one took the lock, the other was refused
        assert "is locked by a load of" in refused[0]
    # either way exactly one of them loaded the new file, once
    pages = page_store_for(store)
    assert published_versions(pages)[-1] == 2
    assert _hits(spark, store) == _reference(spark, demo_dir)
    assert lock_holder(pages) is None


def test_a_load_killed_after_its_manifest_leaves_the_previous_version(
    spark: Any, demo_dir: Path, s3_bucket: str, tmp_path: Path
) -> None:
    store = f"{s3_bucket}/store"
    job = demo_dir / "job.json"
    run_load(spark, load_job(job), store)
    before = treestore.open(store, spark=spark).query("root/+/+/+").to_list()
    (demo_dir / "mapping" / "mapping-0002.tsv").write_text(NEW_MAPPING)
    process = start_load(job, store, "after-manifest", tmp_path / "marker")  # type: ignore[arg-type]
    try:
        wait_for(tmp_path / "marker", process)
    finally:
        kill_all(process)
    pages = page_store_for(store)
    assert treestore.open(store).version == 1
    assert treestore.open(store, spark=spark).query("root/+/+/+").to_list() == before
    assert lock_holder(pages) is not None  # the dead load's lease is left behind
    lines: list[str] = []
    result = run_load(spark, load_job(job), store, on_event=as_lines(lines.append))
    assert result.version == 2
    assert any("taking over the lock" in line and "which died" in line for line in lines)
    assert _hits(spark, store) == _reference(spark, demo_dir)
    assert lock_holder(pages) is None
