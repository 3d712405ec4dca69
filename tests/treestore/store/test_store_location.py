"""A store location that cannot hold a store: one line, nothing created, nothing left."""

from __future__ import annotations

from pathlib import Path

import pytest

from shell.cli import main
from treestore.errors import StoreError
from treestore.storage.pagestore import page_store_for
from treestore.store.lock import store_lock
from treestore.store.versions import StoreWriter

NOT_A_FOLDER = "is a file, not a store folder: give the folder of a store"
OR_A_NEW_ONE = f"{NOT_A_FOLDER}, or a new folder to create one in."


@pytest.mark.parametrize(
    "argv",
    [
        ["info", "{store}"],
        ["query", "{store}", "root/+"],
        ["check", "{store}"],
        ["gc", "{store}"],
        ["shell", "{store}", "-e", "root/+"],
    ],
)
@pytest.mark.parametrize("below", [False, True])
def test_a_store_path_that_is_a_file_is_one_line(
    argv: list[str], below: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "afile"
    file.write_text("x\n")
    store = file / "sub" if below else file
    assert main([a.format(store=store) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(f"{NOT_A_FOLDER}.\n"), err  # no command here
    # of these creates a store: "or a new folder to create one in" would mislead
    assert err.startswith(f"treestore {argv[0]}: {store}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
    assert file.read_text() == "x\n"


def test_gc_of_a_missing_store_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gc", str(tmp_path / "nostore")]) == 2
    assert "does not exist or is empty: load a job into it first" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_lock_refuses_a_file_before_creating_anything(tmp_path: Path) -> None:
    file = tmp_path / "afile"
    file.write_text("x\n")
    with pytest.raises(StoreError, match=OR_A_NEW_ONE), store_lock(page_store_for(file), "t"):
        pass
    with pytest.raises(StoreError, match=OR_A_NEW_ONE):
        StoreWriter(file, shards=2)
    assert file.read_text() == "x\n"


def test_a_failed_first_load_leaves_no_folder(tmp_path: Path) -> None:
    pages = page_store_for(tmp_path / "new" / "store")
    with pytest.raises(RuntimeError, match="the load failed"), store_lock(pages, "t"):
        StoreWriter(pages, shards=2)
        assert (tmp_path / "new" / "store" / "store.json").exists()
        raise RuntimeError("the load failed")
    assert list((tmp_path / "new").iterdir()) == []


def test_a_failure_in_an_existing_folder_keeps_it(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    pages = page_store_for(tmp_path / "store")
    with pytest.raises(RuntimeError), store_lock(pages, "t"):
        raise RuntimeError("the load failed")
    assert (tmp_path / "store").is_dir()
