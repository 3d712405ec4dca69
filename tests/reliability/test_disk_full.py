"""Disk full (see :mod:`tests.support.reliability.diskfull`): a load that runs out of space fails in
one line naming the cause and the file, leaves the previous version exact and no partial
files, and the next load after freeing space succeeds. On a real tmpfs where this process
may mount one (root), else on the ENOSPC wrapper of :mod:`treestore.faults`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.reliability.diskfull import SECOND_BATCH_ROWS, disk_full_trial, tmpfs_available
from tests.support.reliability.scenario import prepare_scenario
from treestore.errors import StoreError
from treestore.faults import DISK_BYTES_VARIABLE, DISK_FOLDER_VARIABLE, folder_bytes
from treestore.storage.pagestore import FilePageStore


def test_the_enospc_wrapper_fails_writes_past_its_capacity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = tmp_path / "disk"
    monkeypatch.setenv(DISK_FOLDER_VARIABLE, str(disk))
    monkeypatch.setenv(DISK_BYTES_VARIABLE, "10000")
    store = FilePageStore(disk / "store")
    store.write("a", b"x" * 6000)
    assert store.create("manifest", b"y" * 3000)
    with pytest.raises(
        StoreError, match=r"/store/big cannot be written: .*No space left on device"
    ):
        store.write("big", b"z" * 2000)
    with pytest.raises(StoreError, match="No space left on device"):
        store.create("other", b"z" * 2000)
    # nothing of the failed writes is left, and what fitted is whole
    assert sorted(os.listdir(disk / "store")) == ["a", "manifest"]
    assert folder_bytes(disk) == 9000
    assert store.read("a") == b"x" * 6000
    # a folder outside the small disk is not limited
    FilePageStore(tmp_path / "elsewhere").write("big", b"z" * 20000)


@pytest.mark.spark
def test_a_load_on_a_full_disk_fails_in_one_line_and_leaves_the_store_exact(
    spark: object, tmp_path: Path
) -> None:
    scenario = prepare_scenario(spark, tmp_path / "scenario", SECOND_BATCH_ROWS, seed=2)
    kind = "tmpfs" if tmpfs_available(tmp_path / "probe") else "wrapper"
    outcome = disk_full_trial(spark, scenario, tmp_path / "trial", kind, via_cli=False)
    assert outcome.clean, outcome
