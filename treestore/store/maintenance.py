"""Keeping a store tidy and sound: garbage collection and the check of every page.

``gc`` (:func:`collect_garbage`) deletes versions beyond the retention count and
every file no kept version uses; ``check`` (:func:`check_store`) reads every page
of every kept version, every side file, and the dedup index.
"""

from __future__ import annotations

import os

import pyarrow as pa

from treestore.errors import CorruptPageError, StoreError
from treestore.storage.pagestore import PageStore, page_store_for
from treestore.storage.reading import TreeReader
from treestore.store.dedup_index import check_dedup_index, unused_dedup_runs
from treestore.store.versions import (
    DEFAULT_RETENTION,
    current_version,
    manifest_name,
    published_versions,
    read_config,
    read_manifest,
)

__all__ = ["check_store", "collect_garbage"]


def collect_garbage(
    location: str | os.PathLike[str] | PageStore, keep: int = DEFAULT_RETENTION
) -> dict[str, int]:
    """Delete versions beyond the newest ``keep`` and every file no kept version uses.

    Runs, side files, dedup index runs and files of rejected and of expired records (kept
    while a kept version's load report names them; a failed load's are removed) go.

    Call it while holding the store's lock. Returns counts of what was removed.
    """
    store = page_store_for(location)
    current = current_version(store)
    versions = [v for v in published_versions(store) if v <= current]
    kept = versions[-max(1, keep) :]
    config = read_config(store)
    referenced: set[str] = set()
    rejected: set[str] = set()  # files of rejected records that kept load reports name
    for version in kept:
        manifest = read_manifest(store, version, int(config["shards"]))
        referenced |= manifest.runs()
        referenced |= {name.rsplit(".", 1)[0] for name in manifest.side_files()}
        for load in manifest.loads:
            rejected.update(load.get("rejected", {}).get("files", []))
            rejected.update(load.get("expired", {}).get("files", []))
    removed = {"versions": 0, "files": 0}
    for version in published_versions(store):
        if version not in kept:
            store.delete(manifest_name(version))
            removed["versions"] += 1
    for name in store.list("trees"):
        run = name.rsplit(".", 1)[0]
        if run not in referenced or name.rsplit("/", 1)[-1].startswith("."):
            store.delete(name)
            removed["files"] += 1
    for name in unused_dedup_runs(store):
        store.delete(name)
        removed["files"] += 1
    for name in [*store.list("rejected"), *store.list("expired")]:
        if name not in rejected:
            store.delete(name)
            removed["files"] += 1
    return removed


def _check_side_file(store: PageStore, name: str, group: str) -> str | None:
    """Why the side file ``name`` of ``group`` (an Arrow IPC file) cannot be read, or None."""
    try:
        store.read_table(name)
    except (OSError, pa.ArrowException) as exc:
        return f"the side file {store.location}/{name} ({group}) cannot be read ({exc})"
    return None


def check_store(location: str | os.PathLike[str] | PageStore) -> list[str]:
    """Verify every page and side file of every kept version, and the dedup index; return the
    problems found (empty: all good)."""
    store = page_store_for(location)
    problems: list[str] = []
    config = read_config(store)
    checked: set[str] = set()
    for version in published_versions(store):
        try:
            manifest = read_manifest(store, version, int(config["shards"]))
        except StoreError as exc:
            problems.append(str(exc))
            continue
        for shard, state in sorted(manifest.trees.items()):
            for run in state.runs:
                if run in checked:
                    continue
                checked.add(run)
                try:
                    TreeReader(store, (run,), shard=shard).check()
                except (CorruptPageError, StoreError) as exc:
                    problems.append(str(exc))
            for group, side in sorted(state.side.items()):
                for name in sorted(set(side.files) - checked):
                    checked.add(name)
                    problem = _check_side_file(store, name, group)
                    if problem:
                        problems.append(f"Shard {shard}: {problem}")
    return problems + check_dedup_index(store)
