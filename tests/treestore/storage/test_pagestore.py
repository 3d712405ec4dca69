"""Listing a page store's folder while other processes make or remove it."""

from __future__ import annotations

from pathlib import Path

import pytest

from treestore.errors import StoreError
from treestore.storage.pagestore import FilePageStore


class _Vanishing:
    """A filesystem whose listing fails the way a folder removed (or not yet made) while
    it is walked fails: ENOENT from inside the walk."""

    def __init__(self, error: OSError) -> None:
        self.error = error

    def get_file_info(self, selector: object) -> object:
        raise self.error


def test_a_folder_that_vanishes_while_listed_lists_as_empty(tmp_path: Path) -> None:
    store = FilePageStore(tmp_path / "store")
    store.write("locks/000001.json", b"{}")
    assert store.list("locks") == ["locks/000001.json"]
    store._fs = _Vanishing(FileNotFoundError(2, "Cannot list directory"))  # type: ignore[assignment]
    assert store.list("locks") == []


def test_other_listing_failures_say_what_cannot_be_listed(tmp_path: Path) -> None:
    store = FilePageStore(tmp_path / "store")
    store.write("locks/000001.json", b"{}")
    store._fs = _Vanishing(PermissionError(13, "Permission denied"))  # type: ignore[assignment]
    with pytest.raises(StoreError, match="locks cannot be listed"):
        store.list("locks")


def test_a_scratch_blob_appears_whole_unsynced_and_a_failed_one_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load's routed pieces: written without fsync, renamed into place whole; a write
    that fails leaves neither the blob nor its temporary file. A durable write syncs."""
    import os

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    pages = FilePageStore(tmp_path / "store")
    with pages.scratch_writer("routed/L/shard-0001/00000003.arrow") as out:
        out.write(b"abc")
    assert (tmp_path / "store/routed/L/shard-0001/00000003.arrow").read_bytes() == b"abc"
    assert synced == []
    pages.write("trees/a", b"x")
    assert synced
    with pytest.raises(RuntimeError), pages.scratch_writer("routed/L/shard-0001/x") as out:
        out.write(b"half")
        raise RuntimeError("task failed")
    assert sorted(p.name for p in (tmp_path / "store/routed/L/shard-0001").iterdir()) == [
        "00000003.arrow"
    ]
