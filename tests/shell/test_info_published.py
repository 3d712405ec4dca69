"""treestore info lists only published versions: a manifest a load killed before
publishing left behind is named as not published, never as kept; check says the same
as a note, not a problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from shell.cli import main
from treestore.storage.pagestore import FilePageStore
from treestore.storage.tree import build_tree
from treestore.store.layout import manifest_name
from treestore.store.lock import store_lock
from treestore.store.versions import StoreWriter

REPORT = {"sources": {}, "started": "2025-01-01 00:00:00", "seconds": 1.0}


def test_info_lists_only_published_versions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pages = FilePageStore(tmp_path / "store")
    with store_lock(pages, "a load"):
        writer = StoreWriter(pages, shards=1)
        writer.publish({0: build_tree(pages, [["a"]]).state}, {}, REPORT)
        writer.publish({0: build_tree(pages, [["b"]]).state}, {}, REPORT)
        pages.write(manifest_name(3), b"{}")  # a load killed between its manifest and CURRENT
    assert main(["info", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out
    assert "version 2 (kept: 1, 2), 1 shards" in out
    assert "not published: version(s) 3 (a load stopped before publishing" in out
    assert main(["check", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out
    assert "note: " in out and "versions/000003.json was never published" in out
    assert out.rstrip().endswith("store is sound")
