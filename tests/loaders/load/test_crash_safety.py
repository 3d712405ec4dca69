"""Crash safety and locking: a load killed with SIGKILL at any point leaves the previous
version intact, and the next load finishes the job with exact hit counts."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import treestore
from loaders import load_job, run_load
from shell.cli import main
from tests.support.load_processes import NEW_MAPPING, kill_all, start_load, wait_for
from treestore.events import as_lines
from treestore.storage.pagestore import page_store_for
from treestore.store.lock import lock_holder

pytestmark = pytest.mark.spark


def _tree_dump(store: Path) -> list[tuple[int, tuple[str, ...], int, int]]:
    version = treestore.open(store).store_version
    return sorted(
        (shard, path, node.hits, node.child_count)
        for shard in version.manifest.trees
        for path, node in version.tree(shard).walk()
    )


@pytest.fixture
def reference(
    spark: object, demo_dir: Path, tmp_path: Path
) -> list[tuple[int, tuple[str, ...], int, int]]:
    """The tree dump of a store that loaded both mapping files without any crash."""
    (demo_dir / "mapping" / "mapping-0002.tsv").write_text(NEW_MAPPING)
    store = tmp_path / "reference"
    run_load(spark, load_job(demo_dir / "job.json"), store)  # type: ignore[arg-type]
    dump = _tree_dump(store)
    (demo_dir / "mapping" / "mapping-0002.tsv").unlink()
    return dump


DRIVER_KILL_POINTS = ("after-tasks", "after-manifest")


def test_driver_killed_before_publishing(
    spark: object, demo_dir: Path, reference: list[object]
) -> None:
    """Killed after its tasks or after writing its manifest (two loads at once, each on
    its own store): the previous version is intact and the next load finishes the job.
    While the first one waits at its point, holding the lock, a second load is refused
    at once, naming it."""
    job = demo_dir / "job.json"
    stores = {point: demo_dir / f"store-{point}" for point in DRIVER_KILL_POINTS}
    for store in stores.values():
        run_load(spark, load_job(job), store)  # type: ignore[arg-type]
    before = _tree_dump(stores["after-tasks"])
    (demo_dir / "mapping" / "mapping-0002.tsv").write_text(NEW_MAPPING)
    markers = {point: demo_dir / f"marker-{point}" for point in DRIVER_KILL_POINTS}
    processes = {p: start_load(job, stores[p], p, markers[p]) for p in DRIVER_KILL_POINTS}
    try:
        for point, process in processes.items():
            holder = wait_for(markers[point], process)
            if point == "after-tasks":
                _a_second_load_is_refused(spark, job, stores[point], holder)
            kill_all(process)
    finally:
        for process in processes.values():
            kill_all(process)
    for store in stores.values():
        _finishes_the_dead_loads_job(spark, job, store, before, reference)


def _finishes_the_dead_loads_job(
    spark: object, job: Path, store: Path, before: list[object], reference: list[object]
) -> None:
    """The previous version is intact and queryable; the dead load's lock is left behind.
    The next load takes it over and finishes the job, counting nothing twice."""
    assert treestore.open(store).version == 1
    assert _tree_dump(store) == before
    assert lock_holder(page_store_for(store)) is not None
    rows = treestore.open(store, spark=spark).query("root/+/M/+").to_list()  # type: ignore[arg-type]
    assert sorted(rows) == [("12345", "abc"), ("67890", "xyz"), ("67890", "zzz")]
    lines: list[str] = []
    result = run_load(spark, load_job(job), store, on_event=as_lines(lines.append))  # type: ignore[arg-type]
    assert result.version == 2
    assert any("taking over the lock" in line for line in lines)
    assert _tree_dump(store) == reference
    assert main(["check", str(store)]) == 0
    # what the dead load wrote is garbage, and gone
    from treestore.store.versions import open_version, published_versions

    kept = published_versions(open_version(store).pages)
    referenced = set().union(*(open_version(store, v).manifest.runs() for v in kept))
    files = [p for p in (store / "trees").rglob("*") if p.is_file()]
    on_disk = {str(p.relative_to(store)).rsplit(".", 1)[0] for p in files}
    assert on_disk == referenced
    assert lock_holder(page_store_for(store)) is None


def test_task_killed_fails_the_load_and_the_next_one_completes(
    spark: object, demo_dir: Path, reference: list[object]
) -> None:
    store = demo_dir / "store"
    job = demo_dir / "job.json"
    run_load(spark, load_job(job), store)  # type: ignore[arg-type]
    (demo_dir / "mapping" / "mapping-0002.tsv").write_text(NEW_MAPPING)
    process = start_load(job, store, "in-task", demo_dir / "marker")
    try:
        worker = wait_for(demo_dir / "marker", process)
        os.kill(worker, signal.SIGKILL)
        out, err = process.communicate(timeout=180)
        assert process.returncode == 2, (out, err)
        # treestore's own report is one line and the last; the JVM prints no stack trace.
        # (PySpark's worker daemon may print its own broken-pipe trace when a sibling
        # worker is killed from outside: that text is PySpark's, not treestore's.)
        assert (
            err.strip().splitlines()[-1].startswith("treestore load: The load's Spark job failed")
        )
        assert "a Python worker died" in err and "\tat org." not in err, err
    finally:
        kill_all(process)
    assert treestore.open(store).version == 1
    assert run_load(spark, load_job(job), store).version == 2  # type: ignore[arg-type]
    assert _tree_dump(store) == reference


def _a_second_load_is_refused(spark: object, job: Path, store: Path, holder: int) -> None:
    """A load of ``store`` while process ``holder`` holds its lock fails at once."""
    started = time.time()
    with pytest.raises(
        treestore.StoreError, match=f"locked by a load of .* \\(pid {holder} on host"
    ):
        run_load(spark, load_job(job), store)  # type: ignore[arg-type]
    assert time.time() - started < 5
    assert treestore.open(store).version == 1
