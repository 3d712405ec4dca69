"""``treestore demo --workdir``: never deletes a user's files (no Spark needed)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from shell.cli import main
from shell.demo import DEMO_MARKER, prepare_demo_folder, write_demo_inputs
from treestore.errors import TreestoreError


def _earlier_demo(folder: Path, version: str = "1") -> None:
    """A folder as ``treestore demo`` leaves it (its store faked: CURRENT only)."""
    prepare_demo_folder(folder, False, io.StringIO())
    write_demo_inputs(folder)
    (folder / "store").mkdir()
    (folder / "store" / "CURRENT").write_text(version)
    (folder / DEMO_MARKER).write_text('{"made_by": "treestore demo", "store_version": "1"}\n')


def test_a_users_folder_is_refused_and_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("precious")
    assert main(["demo", "--workdir", str(mine), "--force"]) == 2
    assert "was not made by `treestore demo`" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert (mine / "notes.txt").read_text() == "precious"


def test_a_new_or_empty_folder_is_marked(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for folder in (tmp_path / "new", tmp_path / "empty"):
        prepare_demo_folder(folder, False, io.StringIO())
        assert (folder / DEMO_MARKER).is_file()


def test_an_unchanged_demo_folder_is_rebuilt_after_saying_so(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    _earlier_demo(folder)
    out = io.StringIO()
    prepare_demo_folder(folder, False, out)
    assert out.getvalue() == f"# rebuilding the earlier demo in {folder}/\n"
    assert sorted(p.name for p in folder.iterdir()) == [DEMO_MARKER]


def test_a_demo_store_loaded_into_again_needs_force(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    _earlier_demo(folder, version="2")  # the user loaded more into the demo's store
    (folder / "attributes" / "more.tsv").write_text("TIME\tUID\tATTRIBUTE_IDS\n")
    with pytest.raises(TreestoreError) as caught:
        prepare_demo_folder(folder, False, io.StringIO())
    assert str(caught.value) == (
        f"{folder} holds an earlier demo that changed since (attributes/more.tsv was added; "
        "its store is at version 2, the demo left version 1); rebuilding it would delete "
        "that, so nothing was deleted: add --force to rebuild it anyway, or pick another "
        "folder with --workdir"
    )
    assert (folder / "store" / "CURRENT").read_text() == "2"
    out = io.StringIO()
    prepare_demo_folder(folder, True, out)
    assert "deleting your changes: attributes/more.tsv was added" in out.getvalue()
    assert sorted(p.name for p in folder.iterdir()) == [DEMO_MARKER]


def test_the_demo_shows_commands_a_user_can_paste(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It printed `$ treestore ...`, which a fresh shell after `make demo` cannot run."""
    from shell.demo import pasteable_command, path_hint

    script = tmp_path / ".venv" / "bin" / "treestore"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert pasteable_command(str(script)) == (".venv/bin/treestore", False)
    assert path_hint(".venv/bin/treestore") == 'export PATH="$PWD/.venv/bin:$PATH"'
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    assert pasteable_command(str(script)) == ("treestore", True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert pasteable_command(str(script)) == (str(script), False)
