"""A store at a path only the driver has: the load's tasks write their files where the
driver cannot see them (the executors' own disks, :mod:`tests.support.driver_only_store`).
The load fails before ``CURRENT`` moves, in one line naming the first missing file and
the likely cause; nothing is published, the previous version stays exact and checks
clean, and the next load into a store every process sees publishes the right answer."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import treestore
from loaders import load_job, run_load
from tests.support.driver_only_store import DriverOnlyStore
from tests.support.jobs import CLICKS_FIRST, CLICKS_SECOND, load_clicks, write_clicks
from treestore.errors import LoadError
from treestore.store.maintenance import check_store

pytestmark = pytest.mark.spark


def _files(store: Path) -> set[str]:
    return {
        str(p.relative_to(store))
        for p in store.rglob("*")
        if p.is_file() and not str(p.relative_to(store)).startswith("locks/")
    }


def _refused(spark: Any, clicks: Path, disks: Path) -> str:
    """Load the clicks job into a store only the driver has; its one-line refusal."""
    store = DriverOnlyStore(clicks / "store", disks)
    with pytest.raises(LoadError) as failed:
        run_load(spark, load_job(clicks / "job.json"), store)
    said = str(failed.value)
    assert "\n" not in said and said.startswith(f"{clicks / 'store'}/"), said
    assert "which a task of this load wrote, is missing" in said
    assert "put the store on a filesystem every executor and the driver share" in said
    assert said.endswith("Nothing was published.")
    return said


def test_a_load_into_a_store_only_the_driver_has_publishes_nothing(
    spark: Any, clicks: Path
) -> None:
    disks = clicks / "executors-disks"
    write_clicks(clicks, "c1.tsv", CLICKS_FIRST)
    said = _refused(spark, clicks, disks)  # a first load: no store is left behind
    assert "/trees/shard-" in said or "/dedup/clicks/shard-" in said
    assert not (clicks / "store").exists() and any(disks.rglob("*.pages"))
    load_clicks(spark, clicks)  # version 1, where every process sees it
    shutil.rmtree(disks)
    shutil.copytree(clicks / "store", disks)  # what the executors' disks hold of it
    before = _files(clicks / "store")
    write_clicks(clicks, "c2.tsv", CLICKS_SECOND)
    _refused(spark, clicks, disks)
    assert (clicks / "store" / "CURRENT").read_text().strip() == "1"
    assert _files(clicks / "store") == before and check_store(clicks / "store") == []
    counts = load_clicks(spark, clicks)["sources"]["clicks"]
    assert (counts["duplicates_of_earlier_loads"], counts["kept"]) == (2, 1)
    rows = treestore.open(clicks / "store", spark=spark).query("root/+/+:+hits").to_list()
    assert sorted(rows) == [
        ("u1", "a", 1),
        ("u1", "b", 1),
        ("u1", "d", 1),
        ("u2", "a", 1),
        ("u3", "c", 1),
    ]
    assert check_store(clicks / "store") == []
