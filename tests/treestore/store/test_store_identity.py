"""A store's identity: given to a new store, kept by a copy, and given under the lock to
a store written before stores had one (which still opens)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from treestore.storage.pagestore import FilePageStore
from treestore.store.layout import CONFIG
from treestore.store.versions import StoreWriter, open_version, read_config, store_identity

REPORT = {"sources": {}, "started": "2025-01-01 00:00:00", "seconds": 1.0}


def test_a_new_store_has_an_identity_that_a_copy_keeps(tmp_path: Path) -> None:
    first = StoreWriter(FilePageStore(tmp_path / "a"), shards=2).pages
    second = StoreWriter(FilePageStore(tmp_path / "b"), shards=2).pages
    found = store_identity(first)
    assert found and len(found) == 32 and found != store_identity(second)
    shutil.copytree(tmp_path / "a", tmp_path / "copy")
    assert store_identity(FilePageStore(tmp_path / "copy")) == found


def test_a_store_written_before_identities_opens_and_gets_one(tmp_path: Path) -> None:
    pages = FilePageStore(tmp_path / "store")
    StoreWriter(pages, shards=2).publish({}, {}, REPORT)
    old = {"format": 2, "shards": 2, "hash": read_config(pages)["hash"]}
    (tmp_path / "store" / CONFIG).write_text(json.dumps(old, indent=1))  # as written before
    assert open_version(pages).version == 1 and store_identity(pages) is None
    given = store_identity(pages, assign=True)
    assert given and store_identity(pages) == given == store_identity(pages, assign=True)
    assert json.loads((tmp_path / "store" / CONFIG).read_text()) == {**old, "id": given}
    assert StoreWriter(pages, shards=2).base.version == 1
