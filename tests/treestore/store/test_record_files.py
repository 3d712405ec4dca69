"""The files of records loads set aside (rejected, expired) are a typed record of each
version: gc keeps those kept versions name, whatever their load reports say; manifests
written before versions kept that record name them in their load reports, and still
read, publish and gc the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.old_stores import as_before_sealing
from treestore.storage.pagestore import FilePageStore, MemoryPageStore, PageStore
from treestore.storage.state import ShardState
from treestore.store.layout import manifest_name
from treestore.store.lock import store_lock
from treestore.store.maintenance import check_store, collect_garbage
from treestore.store.sealed import seal, unseal
from treestore.store.versions import (
    Manifest,
    RecordFiles,
    StoreWriter,
    open_version,
)

REPORT = {"sources": {}, "started": "2025-01-01 00:00:00", "seconds": 1.0}


@pytest.fixture(params=["memory", "disk"])
def pages(request: pytest.FixtureRequest, tmp_path: Path) -> PageStore:
    """Every test runs against the in-memory and the on-disk page store."""
    return MemoryPageStore() if request.param == "memory" else FilePageStore(tmp_path / "store")


def _load(pages: PageStore, n: int) -> Manifest:
    """Load ``n``: writes a rejected and an expired file and publishes a version naming them."""
    rejected, expired = f"rejected/load-{n}/part-0.jsonl", f"expired/load-{n}.parquet"
    with store_lock(pages, f"load {n}"):
        writer = StoreWriter(pages, shards=1)
        pages.write(rejected, b'{"line": 1}\n')
        pages.write(expired, b"PAR1")
        files = RecordFiles((rejected,), (expired,))
        return writer.publish({0: ShardState()}, {}, REPORT, record_files=files)


def _set_aside(pages: PageStore) -> set[str]:
    return {n for n in pages.list() if n.startswith(("rejected/", "expired/"))}


def _gc(pages: PageStore, keep: int) -> dict[str, int]:
    with store_lock(pages, "gc"):
        return collect_garbage(pages, keep)


def test_gc_keeps_the_files_kept_versions_name_and_no_others(pages: PageStore) -> None:
    for n in (1, 2, 3):
        _load(pages, n)
    assert open_version(pages).manifest.record_files == {
        n: RecordFiles((f"rejected/load-{n}/part-0.jsonl",), (f"expired/load-{n}.parquet",))
        for n in (1, 2, 3)
    }
    pages.write("rejected/a-failed-load/part-0.jsonl", b"{}\n")  # no version names it
    _gc(pages, keep=3)
    assert _set_aside(pages) == {
        name for n in (1, 2, 3) for name in (f"rejected/load-{n}/part-0.jsonl",
                                              f"expired/load-{n}.parquet")
    }  # fmt: skip
    _gc(pages, keep=1)  # version 3 keeps the reports, and files, of loads 1-3
    assert len(_set_aside(pages)) == 6
    assert check_store(pages) == []


def test_a_version_keeps_the_record_files_of_the_loads_whose_reports_it_keeps(
    pages: PageStore,
) -> None:
    for n in range(1, 103):
        with store_lock(pages, f"load {n}"):
            files = RecordFiles((f"rejected/{n}/part-0.jsonl",)) if n in (1, 2, 3) else None
            manifest = StoreWriter(pages, shards=1).publish(
                {0: ShardState()}, {}, REPORT, record_files=files
            )
    assert len(manifest.loads) == 100 and manifest.loads[0]["version"] == 3
    assert list(manifest.record_files) == [3]


def _old_form(pages: PageStore, version: int, sealed: bool) -> None:
    """Rewrite a manifest as stores written before kept record files: the files named only
    by its load reports (``rejected.files``, ``expired.files``); sealed or older still."""

    def before_record_files(doc: dict[str, Any]) -> None:
        kept = doc.pop("record_files")
        for load in doc["loads"]:
            files = kept.get(str(load["version"]), {"rejected": [], "expired": []})
            load["rejected"] = {"count": len(files["rejected"]), "files": files["rejected"]}
            load["expired"] = {"files": files["expired"]}

    if not sealed:
        as_before_sealing(pages, version, before_record_files)
        return
    doc, _ = unseal(pages.read(manifest_name(version)))
    before_record_files(doc)
    pages.write(manifest_name(version), seal(json.dumps(doc, indent=1, sort_keys=True).encode()))


@pytest.mark.parametrize("sealed", [True, False])
def test_a_store_written_before_reads_its_record_files_from_its_load_reports(
    pages: PageStore, sealed: bool
) -> None:
    for n in (1, 2):
        _load(pages, n)
    for version in (1, 2):
        _old_form(pages, version, sealed)
    assert b'"record_files"' not in pages.read(manifest_name(2))
    old = open_version(pages).manifest
    assert old.set_aside_files() == {
        "rejected/load-1/part-0.jsonl",
        "expired/load-1.parquet",
        "rejected/load-2/part-0.jsonl",
        "expired/load-2.parquet",
    }
    pages.write("expired/a-failed-load.parquet", b"PAR1")
    _gc(pages, keep=1)
    assert _set_aside(pages) == old.set_aside_files()

    third = _load(pages, 3)  # the next load carries the old versions' files forward, typed
    assert sorted(third.record_files) == [1, 2, 3]
    assert b'"record_files"' in pages.read(manifest_name(3))
    _gc(pages, keep=1)
    assert len(_set_aside(pages)) == 6
    assert check_store(pages) == []
