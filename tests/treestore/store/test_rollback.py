"""A rolled-back ``CURRENT`` is told from a manifest a load left unpublished: by the dedup
index that covers a later version, or by a later manifest built on it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from shell.output.info import write_info
from treestore.storage.pagestore import FilePageStore
from treestore.store.dedup_index import DedupManifest, publish_dedup_manifest
from treestore.store.layout import CURRENT, DEDUP_INDEX, manifest_name
from treestore.store.maintenance import collect_garbage, inspect_store
from treestore.store.versions import Manifest, StoreWriter, open_version

REPORT = {"sources": {}, "started": "2025-01-01 00:00:00", "seconds": 1.0}


def _published(folder: Path, versions: int) -> FilePageStore:
    """A 2-shard store with ``versions`` versions, each load's dedup index covering it."""
    pages = FilePageStore(folder)
    writer = StoreWriter(pages, shards=2)
    for _ in range(versions):
        manifest = writer.publish({}, {}, REPORT)
        publish_dedup_manifest(pages, DedupManifest(manifest.version))
    return pages


def test_a_manifest_a_load_left_unpublished_is_a_note(tmp_path: Path) -> None:
    pages = _published(tmp_path / "store", 2)
    unpublished = Manifest(version=3, shards=2, loads=({**REPORT, "version": 3},))
    assert pages.create(manifest_name(3), unpublished.to_file())  # a load killed before CURRENT
    report = inspect_store(pages)
    assert report.problems == []
    assert any("000003.json was never published" in note for note in report.notes)


def test_current_rolled_back_is_named_with_what_to_do(tmp_path: Path) -> None:
    pages = _published(tmp_path / "store", 5)
    (tmp_path / "store" / CURRENT).write_text("3\n")
    report = inspect_store(pages)
    assert report.problems == [
        f"{pages.location}/CURRENT names version 3, but version 5 was published (its manifest "
        "is complete and the dedup index covers it): CURRENT was rolled back. If that was "
        "meant, the next load starts from version 3 and drops version(s) 4-5, reading their "
        "input files again; otherwise write 5 into CURRENT."
    ]
    assert not any("never published" in note for note in report.notes)
    assert open_version(pages).version == 3  # readers answer the version CURRENT names
    out = io.StringIO()
    write_info(str(pages.location), out)
    assert "dedup index covers version 5 (ahead: CURRENT was rolled back" in out.getvalue()


def test_without_a_dedup_index_a_later_manifest_tells(tmp_path: Path) -> None:
    """Written by treestore before every load wrote the index: version 4's manifest was
    built on version 3, so 3 was published; 4 itself may not have been."""
    pages = _published(tmp_path / "store", 4)
    (tmp_path / "store" / DEDUP_INDEX).unlink()
    (tmp_path / "store" / CURRENT).write_text("2\n")
    report = inspect_store(pages)
    assert len(report.problems) == 1
    assert (
        "names version 2, but version 3 was published (its manifest is complete and "
        "version 4's manifest was built on it)" in report.problems[0]
    )
    assert any("000004.json was never published" in note for note in report.notes)


@pytest.mark.parametrize("manifest", ["gone", "damaged"])
def test_a_rollback_whose_newer_manifest_is_gone_or_damaged(tmp_path: Path, manifest: str) -> None:
    pages = _published(tmp_path / "store", 3)
    (tmp_path / "store" / CURRENT).write_text("1\n")
    if manifest == "gone":
        collect_garbage(pages)  # gc keeps what CURRENT's version and those before use
    else:
        path = tmp_path / "store" / manifest_name(3)
        path.write_bytes(path.read_bytes().replace(b'"shards": 2', b'"shards": 3'))
    (problem,) = inspect_store(pages).problems
    assert f"but version 3 was published (its manifest is {manifest} and the dedup" in problem
    assert problem.endswith("reading their input files again.")
