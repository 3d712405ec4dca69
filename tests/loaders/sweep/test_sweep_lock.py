"""A sweep holds the store's lock from its "name already taken" check to the load of its
results: of two sweeps of one name only one writes, the other is refused as a second
load is. The name is taken by a published version that loaded a sweep of that name:
results that no version loaded (a sweep killed or failed before publishing) are
removed. No case gets as far as Spark (the session given is a stand-in that fails if
used)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import loaders.sweep.command as sweep_command
from loaders.sweep.command import check_sweep, run_sweep
from loaders.sweep.options import SweepOptions
from treestore.errors import LoadError, StoreError
from treestore.events import as_lines
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


def _publish_results(pages: PageStore, name: str, data: bytes) -> None:
    """What a finished sweep leaves: its results file, and a version that loaded it."""
    part = "part-00000.parquet"
    pages.write(f"sweeps/{name}/{part}", data)
    entry = {"source": f"sweep-{name}", "size": len(data), "mtime_ns": 1, "records": 1}
    StoreWriter(pages, 8).publish({}, {f"sweep-{name}/{part}": {**entry, "version": 1}}, {})


def _dead_sweep(pages: PageStore, name: str) -> None:
    """A sweep of ``name`` killed after writing its results, before its load published
    them: its lease names a process that is gone."""
    with store_lock(pages, f"a sweep called {name!r}") as lease:
        pages.write(f"sweeps/{name}/part-00000.parquet", b"half the results")
        lease_file = f"locks/{lease.number:06d}.json"
        body = json.loads(pages.read(lease_file))
    pages.write(lease_file, json.dumps({**body, "pid": 2**22 + 1, "start": 1}).encode())


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
            _publish_results(pages, "twin", rivals)
        with real_lock(pages, purpose, on_event) as lease:
            yield lease

    monkeypatch.setattr(sweep_command, "store_lock", rival_wins_first)
    with pytest.raises(StoreError, match="already holds a sweep called 'twin'"):
        run_sweep(NoSpark(), events, intervals, str(store), "twin")  # type: ignore[arg-type]
    assert pages.list("sweeps") == ["sweeps/twin/part-00000.parquet"]
    assert pages.read("sweeps/twin/part-00000.parquet") == rivals
    assert lock_holder(pages) is None


def test_the_results_of_a_sweep_killed_before_publishing_do_not_take_its_name(
    tmp_path: Path,
) -> None:
    """The same sweep again takes the dead sweep's lock over, removes the results no
    version loaded, and goes on (to Spark: the stand-in stops it there)."""
    events, intervals = _inputs(tmp_path)
    store = tmp_path / "store"
    StoreWriter(store, 8)
    pages = page_store_for(store)
    _dead_sweep(pages, "twin")
    check_sweep(events, intervals, str(store), "twin", SweepOptions())  # before Spark: no refusal
    lines: list[str] = []
    with pytest.raises(AssertionError, match="the sweep used Spark"):
        run_sweep(NoSpark(), events, intervals, str(store), "twin", on_event=as_lines(lines.append))  # type: ignore[arg-type]
    assert pages.list("sweeps") == []
    assert any("taking over the lock of a sweep called 'twin'" in line for line in lines)
    assert any("that a sweep called 'twin' wrote but never loaded" in line for line in lines)


def test_a_sweep_that_fails_removes_its_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events, intervals = _inputs(tmp_path)
    store = tmp_path / "store"
    StoreWriter(store, 8)
    pages = page_store_for(store)

    def fails_after_writing(*args: Any) -> None:
        pages.write("sweeps/twin/part-00000.parquet", b"some of the results")
        raise LoadError("the results' load failed")

    monkeypatch.setattr(sweep_command, "_sweep_locked", fails_after_writing)
    with pytest.raises(LoadError, match="the results' load failed"):
        run_sweep(NoSpark(), events, intervals, str(store), "twin")  # type: ignore[arg-type]
    assert pages.list("sweeps") == []
    assert lock_holder(pages) is None
