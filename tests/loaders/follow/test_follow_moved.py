"""A follower over a store and inputs that moved: Spark's stream offers every file again
under its new path, and the follower reads none of them (files are known by their path
relative to their source's root); broken links among its inputs are reported."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from loaders import load_job
from loaders.follow import follow_job
from treestore.events import as_lines
from treestore.storage.pagestore import page_store_for
from treestore.store.versions import current_version

pytestmark = pytest.mark.spark


def test_a_follower_reads_no_moved_file_and_reports_broken_links(
    spark: Any, demo_store: Path, tmp_path: Path
) -> None:
    moved = tmp_path / "moved"  # the demo's job, inputs and store (version 1), elsewhere
    shutil.copytree(demo_store.parent, moved, copy_function=shutil.copy2)
    os.symlink("mapping-0009.tsv", moved / "mapping" / "mapping-0008.tsv")
    lines: list[str] = []
    summary = follow_job(
        spark,
        load_job(moved / "job.json"),
        moved / "store",
        available_now=True,
        on_event=as_lines(lines.append),
    )
    assert summary.versions == [] and current_version(page_store_for(moved / "store")) == 1
    assert summary.batches == 1 and summary.files == 0 and summary.records == 0
    assert (
        f"warning: source 'mapping': {moved}/mapping/mapping-0008.tsv is a symbolic link to "
        f"mapping-0009.tsv ({moved}/mapping/mapping-0009.tsv), which does not exist: skipped"
    ) in lines
    for source in ("attributes", "mapping"):
        was, now = demo_store.parent / source, moved / source
        assert any(
            line.startswith(f"warning: source {source}: its files were loaded from {was} and "
                            f"are now under {now}")
            for line in lines
        )  # fmt: skip
    assert lines[-1] == "batch 0: 2 file(s) offered, nothing new to load"
