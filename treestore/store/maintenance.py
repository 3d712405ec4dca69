"""Keeping a store tidy and sound: garbage collection, a failed load's files, the check.

``gc`` (:func:`collect_garbage`) deletes versions beyond the retention count and every
file no kept version uses; :func:`remove_partial_files` deletes what a load that failed
cleanly wrote (its lock's exit calls it); ``check`` (:func:`inspect_store`) reads what
readers read (``store.json``, ``CURRENT``, the manifests, each verified against its
checksum) and then every byte of every run and side file of every published version
against the sizes and checksums its manifest records, and the dedup index.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from treestore.errors import CorruptPageError, StoreError
from treestore.failpoints import failpoint
from treestore.storage.pagestore import PageStore, page_store_for
from treestore.storage.runs import RunReader, RunSum
from treestore.storage.state import FileSum
from treestore.store.dedup_index import check_dedup_index, unused_dedup_runs
from treestore.store.layout import (
    CONFIG,
    CURRENT,
    EXPIRED,
    REJECTED,
    ROUTED,
    TREES,
    VERSIONS,
    manifest_name,
)
from treestore.store.rollback import check_rollback
from treestore.store.versions import (
    DEFAULT_RETENTION,
    Manifest,
    config_disagreement,
    current_version,
    manifest_versions,
    published_versions,
    read_config,
    read_manifest,
    read_store_manifest,
    store_owner,
)

__all__ = [
    "CheckReport",
    "check_store",
    "collect_garbage",
    "inspect_store",
    "remove_partial_files",
]


def collect_garbage(
    location: str | os.PathLike[str] | PageStore, keep: int = DEFAULT_RETENTION
) -> dict[str, int]:
    """Delete versions beyond the newest ``keep`` and every file no kept version uses.

    Runs, side files, dedup index runs and files of rejected and of expired records (kept
    while a kept version names them, see :class:`~treestore.store.versions.RecordFiles`; a
    failed load's are removed) go, and manifests a load left unpublished.

    Call it while holding the store's lock. Returns counts of what was removed.
    """
    pages = page_store_for(location)
    config = read_config(pages)
    kept = published_versions(pages)[-max(1, keep) :]
    manifests = [read_store_manifest(pages, v, config) for v in kept]
    removed = {"versions": 0, "files": 0}
    for version in manifest_versions(pages):
        if version not in kept:
            pages.delete(manifest_name(version))
            removed["versions"] += 1
    pages.sync(VERSIONS)  # a power cut must not bring back a manifest whose files are gone
    failpoint("gc-after-manifests")  # old manifests gone, not one of their files yet
    removed["files"] = _remove_unused(pages, manifests, failpoint=failpoint)
    return removed


def remove_partial_files(
    location: str | os.PathLike[str] | PageStore,
    keep: Callable[[str], bool] = lambda name: False,
    still_held: Callable[[], None] = lambda: None,
) -> int:
    """Delete what a load that published nothing wrote: runs, side files, dedup runs, files
    of rejected and expired records, and a manifest it did not get to publish. Nothing a
    published version uses is touched (every published version's manifest is read first;
    one that cannot be read stops the removal), nor files for which ``keep`` is true (the
    rejected records a failed load's message points to).

    Call it only while holding the store's lock; ``still_held`` raises if the lock was lost
    (called before each kind of file). Returns how many files were removed.
    """
    pages = page_store_for(location)
    config = read_config(pages)
    current = current_version(pages)
    manifests = [read_store_manifest(pages, v, config) for v in published_versions(pages, current)]
    still_held()
    removed = 0
    for version in manifest_versions(pages):
        if version > current:
            pages.delete(manifest_name(version))
            removed += 1
    return removed + _remove_unused(pages, manifests, keep, still_held)


def _remove_unused(
    pages: PageStore,
    manifests: Iterable[Manifest],
    keep: Callable[[str], bool] = lambda name: False,
    still_held: Callable[[], None] = lambda: None,
    failpoint: Callable[[str], None] | None = None,
) -> int:
    """Delete the files under ``trees/``, ``dedup/``, ``rejected/`` and ``expired/`` that
    none of ``manifests`` uses, and everything under ``routed/``; return how many.
    ``failpoint`` (gc's, for the kill tests) is called after the first tree file removed
    and after the last."""
    referenced: set[str] = set()
    set_aside: set[str] = set()  # files of rejected and expired records kept versions name
    for manifest in manifests:
        referenced |= manifest.runs()
        referenced |= {name.rsplit(".", 1)[0] for name in manifest.side_files()}
        set_aside |= manifest.set_aside_files()
    unused = [
        name
        for name in pages.list(TREES)
        if name.rsplit(".", 1)[0] not in referenced or name.rsplit("/", 1)[-1].startswith(".")
    ]
    still_held()
    for number, name in enumerate(unused):
        pages.delete(name)
        if failpoint and number == 0:
            failpoint("gc-in-runs")  # one unused tree file removed, the others not yet
    if failpoint:
        failpoint("gc-after-runs")  # unused tree files gone; dedup runs, record files not yet
    still_held()
    dedup = unused_dedup_runs(pages)
    for name in dedup:
        pages.delete(name)
    still_held()
    records = [
        name
        for name in [*pages.list(REJECTED), *pages.list(EXPIRED)]
        if name not in set_aside and not keep(name)
    ]
    records += pages.list(ROUTED)  # a killed load's routed records (a live load holds the lock)
    for name in records:
        pages.delete(name)
    return len(unused) + len(dedup) + len(records)


@dataclass
class CheckReport:
    """What ``check`` found.

    Attributes:
        problems: damage, one line each (naming the file); empty when the store is sound.
        notes: what is worth knowing but is no damage (files that cannot be verified
            because they were written before treestore kept checksums, a manifest a load
            left unpublished).
    """

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_store(location: str | os.PathLike[str] | PageStore) -> list[str]:
    """The problems :func:`inspect_store` finds (empty: the store is sound)."""
    return inspect_store(location).problems


@dataclass
class _Use:
    """A file of a run or a side file, the versions that use it and its recorded sum."""

    shard: int
    versions: list[int] = field(default_factory=list)
    sum: RunSum | FileSum | None = None
    group: str = ""

    def add(self, version: int, recorded: RunSum | FileSum | None) -> None:
        self.versions.append(version)
        self.sum = self.sum or recorded


def inspect_store(location: str | os.PathLike[str] | PageStore) -> CheckReport:
    """Check what readers read (``store.json``, ``CURRENT``, each published version's
    manifest) and every byte of each run and side file those versions use, against the
    sizes and checksums the manifests record; then the dedup index. Raises
    :class:`StoreError` only when the location is not a store at all."""
    pages = page_store_for(location)
    report = CheckReport()
    config = _config(pages, report)
    owner = None if config is None else store_owner(config)
    listed = manifest_versions(pages)
    try:
        current: int | None = current_version(pages)
    except StoreError as exc:
        report.problems.append(str(exc))
        current = None
    versions = listed if current is None else published_versions(pages, current)
    if current and current not in listed:
        versions.append(current)  # its manifest is missing: read_manifest says so
    rollback, published = (None, 0) if current is None else check_rollback(pages, current, listed)
    if rollback:
        report.problems.append(rollback)
    for version in listed:
        if current is not None and version > max(current, published):
            report.notes.append(
                f"{pages.location}/{manifest_name(version)} was never published (a load "
                f"stopped between writing it and {CURRENT}); the next load removes it."
            )
    runs: dict[tuple[str, int], _Use] = {}  # by run and shard: a run is one shard's
    sides: dict[str, _Use] = {}
    unsealed = []
    disagreement: str | None = None
    for version in versions:
        try:
            manifest = read_manifest(pages, version, None)
        except StoreError as exc:
            report.problems.append(str(exc))
            continue
        if config is not None and not disagreement:
            where = f"{pages.location}/{manifest_name(version)}"
            disagreement = config_disagreement(
                pages, where, manifest, int(config["shards"]), str(config["hash"])
            )
            if disagreement:  # said once: every manifest would say it
                report.problems.append(disagreement)
        if not manifest.sealed:
            unsealed.append(version)
        for shard, state in sorted(manifest.trees.items()):
            for run in state.runs:
                runs.setdefault((run, shard), _Use(shard)).add(version, state.run_sums.get(run))
            for group, side in sorted(state.side.items()):
                for name in side.files:
                    use = sides.setdefault(name, _Use(shard, group=group))
                    use.add(version, state.side_sums.get(name))
    _note_unverifiable(pages, report, unsealed, runs, sides)
    _note_stray_files(pages, report, {run for run, _ in runs} | set(sides))
    for (run, _), use in sorted(runs.items()):
        problem = _check_run(pages, run, use, owner)
        if problem:
            report.problems.append(problem)
    for name, use in sorted(sides.items()):
        problem = _check_side_file(pages, name, use)
        if problem:
            report.problems.append(f"Shard {use.shard}: {problem}")
    report.problems += check_dedup_index(pages, report.notes)
    return report


def _config(pages: PageStore, report: CheckReport) -> dict[str, Any] | None:
    """The store's ``store.json`` (None, and a problem, if it is damaged); raises
    :class:`StoreError` if the location is not a store."""
    try:
        return read_config(pages)
    except StoreError as exc:
        if not pages.exists(CONFIG):
            raise
        report.problems.append(str(exc))
        return None


def _note_unverifiable(
    pages: PageStore,
    report: CheckReport,
    unsealed: list[int],
    runs: dict[tuple[str, int], _Use],
    sides: dict[str, _Use],
) -> None:
    """Say which manifests, runs and side files were written before checksums were kept."""
    if unsealed:
        names = ", ".join(manifest_name(v) for v in unsealed[:3]) + (
            ", ..." if len(unsealed) > 3 else ""
        )
        report.notes.append(
            f"{len(unsealed)} manifest(s) ({names}) were written before treestore sealed "
            "manifests with a checksum: they are not verifiable (the next load writes a "
            "sealed one)."
        )
    old_runs = sum(use.sum is None for use in runs.values())
    old_sides = sum(use.sum is None for use in sides.values())
    if old_runs or old_sides:
        report.notes.append(
            f"{old_runs} run(s) and {old_sides} side file(s) were written before treestore "
            "recorded their sizes and checksums: their pages were checked one by one, a "
            "change that keeps them readable cannot be found."
        )


def _note_stray_files(pages: PageStore, report: CheckReport, named: set[str]) -> None:
    """Say which files under ``trees/`` no version checked names (``named``: its runs,
    without their extensions, and side files): a load that stopped before publishing left
    them, or they were put there by hand; readers never open them, ``gc`` removes them."""
    stray = [
        name
        for name in pages.list(TREES)
        if name not in named
        and (name.rsplit(".", 1)[0] not in named or name.rsplit("/", 1)[-1].startswith("."))
    ]
    if stray:
        shown = ", ".join(stray[:3]) + (", ..." if len(stray) > 3 else "")
        report.notes.append(
            f"{len(stray)} file(s) under {pages.location}/{TREES}/ are named by no published "
            f"version ({shown}): a load that stopped before publishing left them, or they were "
            "put there by hand. Readers never open them; 'treestore gc' removes them."
        )


def _used_by(use: _Use) -> str:
    versions = sorted(set(use.versions))
    shown = ", ".join(map(str, versions[:5])) + (", ..." if len(versions) > 5 else "")
    return f"(used by version{'s' if len(versions) > 1 else ''} {shown})"


def _check_run(pages: PageStore, run: str, use: _Use, owner: str | None) -> str | None:
    """Why run ``run`` is damaged, or belongs to another shard or store than ``use``'s and
    ``owner`` (one line naming the file), or None."""
    expected = use.sum if isinstance(use.sum, RunSum) else None
    where = f"Shard {use.shard}: {pages.location}/{run}"
    for suffix in (".index", ".pages"):
        if not pages.exists(run + suffix):
            return f"{where}{suffix} is missing {_used_by(use)}."
    if expected is not None:
        for suffix, recorded in (
            (".pages", expected.pages_bytes),
            (".index", expected.index_bytes),
        ):
            size = pages.size(run + suffix)
            if size != recorded:
                return (
                    f"{where}{suffix} is {size:,} bytes, its manifest says {recorded:,} (the file "
                    f"was cut short or added to) {_used_by(use)}."
                )
    try:
        RunReader(pages, run, use.shard, expected, owner).check()
    except (CorruptPageError, StoreError) as exc:
        text = str(exc).replace("; run 'treestore check' on the store", "").rstrip(".")
        return f"{text} {_used_by(use)}."
    return None


def _check_side_file(pages: PageStore, name: str, use: _Use) -> str | None:
    """Why the side file ``name`` (an Arrow IPC stream) is damaged, or None."""
    where = f"the side file {pages.location}/{name} ({use.group})"
    if not pages.exists(name):
        return f"{where} is missing {_used_by(use)}."
    if isinstance(use.sum, FileSum):
        found = FileSum.of(pages.read(name))
        if found.size != use.sum.size:
            return (
                f"{where} is {found.size:,} bytes, its manifest says {use.sum.size:,} (the file "
                f"was cut short or added to) {_used_by(use)}."
            )
        if found.checksum != use.sum.checksum:
            return f"{where} fails its checksum (the file was changed) {_used_by(use)}."
        return None
    try:
        pages.read_table(name)
    except (OSError, pa.ArrowException) as exc:
        return f"{where} cannot be read ({exc}) {_used_by(use)}."
    return None
