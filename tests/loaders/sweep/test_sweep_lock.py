"""A sweep holds the store's lock from its "name already taken" check to the load of its
results: of two sweeps of one name only one writes, the other is refused as a second
load is. Neither case gets as far as Spark (the session given is a stand-in that fails
if used)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import loaders.sweep.command as sweep_command
from loaders.sweep.command import run_sweep
from treestore.errors import StoreError
from treestore.storage.pagestore import PageStore, page_store_for
from treestore.store.lock import Lease, lock_holder, store_lock
from treestore.store.versions import StoreWriter


class NoSpark:
    """A session stand-in: any use of it fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the sweep used Spark ({name}) before refusing")


def _inputs(folder: Path) -> tuple[str, str]:
    (folder / "events.csv").write_text("id,time\n1,5\n")
    (folder / "intervals.csv").write_text("id,start,end,points\n1,0,9,3\n")
    return str(folder / "events.csv"), str(folder / "intervals.csv")


def test_a_sweep_is_refused_while_another_holds_the_store(tmp_path: Path) -> None:
    events, intervals = _inputs(tmp_path)
    store = tmp_path / "store"
    StoreWriter(store, 8)
    pages = page_store_for(store)
    with store_lock(pages, "a sweep called 'twin'"):
        with pytest.raises(StoreError, match="is locked by a sweep called 'twin'"):
            run_sweep(NoSpark(), events, intervals, str(store), "twin")  # type: ignore[arg-type]
        assert not pages.list("sweeps")
    assert lock_holder(pages) is None  # the refused sweep left the holder's lock alone


def test_the_name_is_checked_again_once_the_lock_is_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rival sweep of the same name finishes between this sweep's first check (no lock)
    and its taking the lock: the check under the lock refuses, and the rival's results
    stay as they are."""
    events, intervals = _inputs(tmp_path)
    store = tmp_path / "store"
    StoreWriter(store, 8)
    pages = page_store_for(store)
    rivals = b"the rival sweep's results"
    real_lock = sweep_command.store_lock

    @contextmanager
    def rival_wins_first(pages: PageStore, purpose: str, on_event: Any) -> Iterator[Lease]:
        with real_lock(pages, "the rival sweep"):
            pages.write("sweeps/twin/part-00000.parquet", rivals)
        with real_lock(pages, purpose, on_event) as lease:
            yield lease

    monkeypatch.setattr(sweep_command, "store_lock", rival_wins_first)
    with pytest.raises(StoreError, match="already holds a sweep called 'twin'"):
        run_sweep(NoSpark(), events, intervals, str(store), "twin")  # type: ignore[arg-type]
    assert pages.list("sweeps") == ["sweeps/twin/part-00000.parquet"]
    assert pages.read("sweeps/twin/part-00000.parquet") == rivals
    assert lock_holder(pages) is None
