"""Opened runs are reused in a process only while their files are the same files."""

from __future__ import annotations

import shutil
from pathlib import Path

from treestore.storage.pagestore import FilePageStore, MemoryPageStore
from treestore.storage.reading import opened_run
from treestore.storage.tree import build_tree


def test_a_local_run_is_opened_once_until_its_files_change(tmp_path: Path) -> None:
    store = FilePageStore(tmp_path / "store")
    tree = build_tree(store, [["root", "a"], ["root", "b"]])
    (name,) = tree.state.runs
    first = opened_run(store, name, 0)
    assert opened_run(store, name, 0) is first
    other = build_tree(FilePageStore(tmp_path / "other"), [["root", "c"]])
    (other_name,) = other.state.runs
    for suffix in (".index", ".pages"):  # another run's files put in its place
        target = tmp_path / "store" / f"{name}{suffix}"
        target.unlink()
        shutil.copy(tmp_path / "other" / f"{other_name}{suffix}", target)
    again = opened_run(store, name, 0)
    assert again is not first
    assert again.all_columns().names.to_pylist()[1:] == ["root", "c"]  # after the root entry


def test_runs_in_memory_are_never_reused() -> None:
    store = MemoryPageStore()
    tree = build_tree(store, [["root", "a"]])
    (name,) = tree.state.runs
    assert opened_run(store, name, 0) is not opened_run(store, name, 0)
