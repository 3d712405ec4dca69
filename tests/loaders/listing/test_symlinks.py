"""Symbolic links among a load's inputs: a link that leads nowhere (a missing target, links
that loop) is reported, never skipped without a word, and a source that is nothing but
such links is refused like a missing file. None of this starts Spark."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loaders import load_job
from loaders.job.model import SourceSpec
from loaders.listing.files import list_input_files
from shell.cli import main
from treestore.events import as_lines
from treestore.store.versions import StoreWriter


def _listed(path: Path) -> tuple[list[str], list[str]]:
    """The relative paths of a source at ``path`` and what its listing said."""
    lines: list[str] = []
    files = list_input_files(
        SourceSpec(name="s", path=str(path), format="tsv"), as_lines(lines.append)
    )
    return [f.relative for f in files], lines


def test_links_that_lead_nowhere_are_reported_and_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.tsv").write_text("K\n1\n")
    os.symlink("../nowhere.tsv", folder / "dangling.tsv")
    os.symlink("self.tsv", folder / "self.tsv")
    os.symlink("y.tsv", folder / "x.tsv")
    os.symlink("x.tsv", folder / "y.tsv")
    os.symlink("a.tsv", folder / "link.tsv")  # a link to a file is an input like any file
    os.symlink("nowhere", folder / ".hidden")  # hidden: never an input, nothing to say
    files, lines = _listed(folder)
    assert files == ["a.tsv", "link.tsv"]
    assert sorted(lines) == [
        f"warning: source 's': {folder}/dangling.tsv is a symbolic link to ../nowhere.tsv "
        f"({tmp_path}/nowhere.tsv), which does not exist: skipped",
        f"warning: source 's': {folder}/self.tsv is a symbolic link to self.tsv "
        f"({folder}/self.tsv), which ends in a loop of links: skipped",
        f"warning: source 's': {folder}/x.tsv is a symbolic link to y.tsv ({folder}/y.tsv), "
        "which ends in a loop of links: skipped",
        f"warning: source 's': {folder}/y.tsv is a symbolic link to x.tsv ({folder}/x.tsv), "
        "which ends in a loop of links: skipped",
    ]
    assert _listed(Path(f"{folder}/*.tsv")) == (files, lines)  # a glob says the same


def test_a_glob_does_not_follow_a_link_back_to_a_folder_that_holds_it(tmp_path: Path) -> None:
    (tmp_path / "in" / "sub").mkdir(parents=True)
    (tmp_path / "in" / "a.tsv").write_text("K\n1\n")
    (tmp_path / "in" / "sub" / "b.tsv").write_text("K\n2\n")
    for name in ("up", "up2"):  # two loops: glob's own walk lists 2**40 paths
        os.symlink("..", tmp_path / "in" / "sub" / name)
    files, lines = _listed(tmp_path / "in" / "**" / "*.tsv")
    assert files == ["a.tsv", "sub/b.tsv"]  # each once
    assert lines == [
        f"warning: source 's': {tmp_path}/in/sub/{name} is a symbolic link to .. "
        f"({tmp_path}/in), a folder that holds it: not followed (a loop)"
        for name in ("up", "up2")
    ]


def _job(folder: Path, path: str) -> Path:
    doc = {"shards": 1, "source": [{"name": "s", "path": path, "format": "tsv"}],
           "tree": {"root": [{"type": "value", "key": "K"}]}}  # fmt: skip
    (folder / "job.json").write_text(json.dumps(doc))
    return folder / "job.json"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = main(list(args))
    said = capsys.readouterr()
    return status, said.out + said.err


def test_a_source_that_is_only_broken_links_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.symlink("nowhere.tsv", tmp_path / "in.tsv")
    job = _job(tmp_path, "in.tsv")  # a relative path keeps the link: the link is named
    status, said = _run(capsys, "load", str(job), "--store", str(tmp_path / "st"))
    assert status == 2
    assert (
        f"Source 's': {tmp_path}/in.tsv is a symbolic link to nowhere.tsv "
        f"({tmp_path}/nowhere.tsv), which does not exist. Fix the link, or give a file, a "
        "folder or a glob in the job's 'path'."
    ) in said
    (tmp_path / "in").mkdir()
    os.symlink("in", tmp_path / "in" / "x.tsv")
    status, said = _run(capsys, "load", str(_job(tmp_path, "in/")), "--store", str(tmp_path / "st"))
    assert status == 2
    assert (
        f"Source 's': {tmp_path}/in/x.tsv is a symbolic link to in ({tmp_path}/in/in), which "
        "does not exist, and it has no other file. Fix the link, or give a file, a folder or "
        "a glob in the job's 'path'."
    ) in said
    assert not (tmp_path / "st").exists()


def test_a_load_says_which_links_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.tsv").write_text("K\n1\n")
    os.symlink("gone.tsv", tmp_path / "in" / "b.tsv")
    job = load_job(_job(tmp_path, "in/"))
    store = str(tmp_path / "store")
    listed = list_input_files(job.sources[0])
    inputs = {"s/a.tsv": {"source": "s", "root": listed[0].root, "relative": "a.tsv",
                          "size": listed[0].size, "mtime_ns": listed[0].mtime_ns,
                          "records": 1, "version": 1}}  # fmt: skip
    StoreWriter(store, job.shards, job.hash).publish({}, inputs, {})  # a.tsv is loaded
    status, said = _run(capsys, "load", str(tmp_path / "job.json"), "--store", store)
    assert status == 0
    assert said.splitlines() == [
        f"warning: source 's': {tmp_path}/in/b.tsv is a symbolic link to gone.tsv "
        f"({tmp_path}/in/gone.tsv), which does not exist: skipped",
        "source s: 0 new file(s)",
        "nothing new to load: the store is unchanged",
    ]
