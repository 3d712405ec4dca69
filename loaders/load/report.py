"""The load report: what a load read, rejected, dropped and changed, and how long it took.

Per source: files, records read, rejected, duplicates (within the load and of
earlier loads), dropped by the map's filters, applied, and update-only records
that found no node. Per shard: nodes created and updated, bytes written. The
time of each phase. Rejected records are kept in the store under ``rejected/``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from loaders.job.model import JobSpec
from loaders.load.inputs import InputFile
from loaders.load.protocol import PendingCounts, ShardResult, SourceCounts, TaskTotals
from loaders.load.timing import Timer
from treestore.storage.pagestore import PageStore
from treestore.storage.state import ShardState
from treestore.store.versions import RecordFiles

__all__ = [
    "LoadReport",
    "RejectedRecords",
    "StreamBatch",
    "Summary",
    "first_rejected",
    "format_load_report",
    "summarize",
]


@dataclass(frozen=True)
class RejectedRecords:
    """A load's rejected records: how many, and the files that keep the first of them."""

    count: int = 0
    files: tuple[str, ...] = ()

    @property
    def folder(self) -> str | None:
        """The folder of :attr:`files` (None: no file was written)."""
        return self.files[0].rsplit("/", 1)[0] if self.files else None

    def to_json(self) -> dict[str, Any]:
        """As the published report keeps it."""
        doc: dict[str, Any] = {"count": self.count, "files": list(self.files)}
        if self.folder is not None:
            doc["folder"] = self.folder
        return doc


@dataclass(frozen=True)
class StreamBatch:
    """The follower's micro-batch a load was (``load --follow``), kept in its report."""

    batch: int
    newest_file_ns: int


@dataclass(frozen=True)
class LoadReport:
    """What a load read, rejected, dropped and changed, and how long it took: the report a
    version keeps (as :meth:`to_json`) and ``treestore load`` prints.

    Attributes:
        started: when the load began (seconds since the epoch).
        seconds: how long it took, up to its tasks' end.
        sources: each source's counts, in the job's order.
        shards: what the tasks did to each shard's tree, by shard.
        rejected: the rejected records.
        expired: the files of pending records that expired in this load.
        phases: the time of each phase.
        changed_files: per source, files found changed after they were loaded.
        stream: the follower's micro-batch this load was, if any.
        version: the version it published (once published).
        gc: what the gc after publishing removed (once run).
    """

    started: float
    seconds: float
    sources: Mapping[str, SourceCounts]
    shards: tuple[ShardResult, ...] = ()
    rejected: RejectedRecords = RejectedRecords()
    expired: tuple[str, ...] = ()
    phases: Mapping[str, float] = field(default_factory=dict)
    changed_files: Mapping[str, list[str]] = field(default_factory=dict)
    stream: StreamBatch | None = None
    version: int | None = None
    gc: Mapping[str, int] | None = None

    @property
    def pending(self) -> PendingCounts:
        """The shards' pending records, summed."""
        total = PendingCounts()
        for shard in self.shards:
            total = total + shard.pending
        return total

    def record_files(self) -> RecordFiles:
        """The files of records the load set aside, which its version keeps."""
        return RecordFiles(self.rejected.files, self.expired)

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON, as versions keep it (``version`` and ``gc`` only once
        known)."""
        doc: dict[str, Any] = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "seconds": self.seconds,
            "sources": {name: asdict(counts) for name, counts in self.sources.items()},
            "shards": {str(result.shard): result.report() for result in self.shards},
            "rejected": self.rejected.to_json(),
            "pending": asdict(self.pending),
            "expired": {"files": list(self.expired)},
            "phases": dict(self.phases),
            "changed_files": dict(self.changed_files),
        }
        if self.stream is not None:
            doc["stream"] = asdict(self.stream)
        if self.version is not None:
            doc["version"] = self.version
        if self.gc is not None:
            doc["gc"] = dict(self.gc)
        return doc


@dataclass(frozen=True)
class Summary:
    """The tasks' results folded: the load's report, and what the driver publishes with it."""

    report: LoadReport
    trees: dict[int, ShardState]
    """Each shard's new state."""
    file_records: dict[str, int]
    """Records read per input file."""
    index_runs: dict[int, dict[str, list[str]]]
    """The new dedup index runs: shard -> source -> runs."""


def summarize(
    job: JobSpec,
    fresh: dict[int, list[InputFile]],
    results: tuple[list[ShardResult], list[TaskTotals]],
    phases: Timer,
) -> Summary:
    """Fold the tasks' results into the load's report and what the driver publishes."""
    shard_results, task_totals = results
    files: dict[str, int] = {}
    sources = {s.name: SourceCounts() for s in job.sources}
    index_runs: dict[int, dict[str, list[str]]] = {}
    rejected_count, rejected_files = 0, []
    for totals in task_totals:
        for path, count in totals.files.items():
            files[path] = files.get(path, 0) + count
        for name, counts in totals.sources.items():
            sources[name] = sources[name] + counts
        for shard, runs in totals.dedup.items():
            index_runs.setdefault(int(shard), {}).update(runs)
        rejected_count += totals.rejected_count
        if totals.rejected_file:
            rejected_files.append(totals.rejected_file)
    for index, new in fresh.items():
        name = job.sources[index].name
        sources[name] = replace(sources[name], files=len(new))
    shards = tuple(sorted(shard_results, key=lambda result: result.shard))
    report = LoadReport(
        started=phases.started,
        seconds=round(time.time() - phases.started, 3),
        sources=sources,
        shards=shards,
        rejected=RejectedRecords(rejected_count, tuple(sorted(rejected_files))),
        expired=tuple(sorted(r.expired_file for r in shards if r.expired_file)),
        phases=dict(phases.seconds),
    )
    trees = {r.shard: ShardState.from_json(r.state) for r in shards}
    return Summary(report, trees, files, index_runs)


def first_rejected(pages: PageStore, rejected: RejectedRecords, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` rejected records (by file and line) of a load's ``rejected``."""
    found: list[dict[str, Any]] = []
    for name in rejected.files:
        for line in pages.read(name).decode().splitlines():
            found.append(json.loads(line))
    found.sort(key=lambda r: (r["file"] or "", r["line"] or 0))
    return found[:limit]


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def format_load_report(report: dict[str, Any], store: str, shard_lines: int = 16) -> list[str]:
    """The report as lines for people: per source, per shard, rejects, changed files, phases."""
    lines = [f"published version {report['version']} in {report['seconds']} s"]
    for name, c in report["sources"].items():
        if not c.get("files"):
            lines.append(f"  source {name}: no new files")
            continue
        lines.append(
            f"  source {name}: {_plural(c['files'], 'file')}, {c['read']:,} read, "
            f"{c['rejected']:,} rejected, {c['duplicates_in_load']:,} duplicates in the load, "
            f"{c['duplicates_of_earlier_loads']:,} of earlier loads, "
            f"{c['dropped']:,} dropped by filters, {c['applied']:,} applied, "
            f"{c['missed_updates']:,} update-only found no node"
            + (f", {c['pending']:,} kept pending" if c.get("pending") else "")
        )
    shards = report["shards"]
    for shard, s in list(shards.items())[:shard_lines]:
        lines.append(
            f"  shard {shard}: {_plural(s['nodes_created'], 'node')} created, "
            f"{s['nodes_updated']:,} updated, {s['bytes_written']:,} bytes written"
        )
    if len(shards) > shard_lines:
        rest = list(shards.values())[shard_lines:]
        created = sum(s["nodes_created"] for s in rest)
        lines.append(
            f"  {_plural(len(rest), 'more shard')}: {_plural(created, 'node')} created, "
            f"{sum(s['nodes_updated'] for s in rest):,} updated"
        )
    rejected = report.get("rejected", {})
    if rejected.get("count"):
        lines.append(
            f"  rejected: {_plural(rejected['count'], 'record')}, with file and line in "
            f"{store}/{rejected['folder']}/"
        )
    pending = report.get("pending", {})
    if any(pending.values()):
        lines.append(
            f"  pending update-only records: {pending['buffered']:,} kept for later loads, "
            f"{pending['applied']:,} of earlier loads applied, {pending['expired']:,} expired, "
            f"{pending['waiting']:,} waiting"
        )
    expired = report.get("expired", {}).get("files", [])
    if expired:
        lines.append(
            "  expired pending records, with their fields, where they were read and why: "
            + ", ".join(f"{store}/{name}" for name in expired)
        )
    for name, paths in report.get("changed_files", {}).items():
        lines.append(
            f"  source {name}: {_plural(len(paths), 'file')} changed after loading: "
            + ", ".join(paths[:3])
            + (" ..." if len(paths) > 3 else "")
        )
    phases = report.get("phases", {})
    if phases:
        lines.append("  phases: " + ", ".join(f"{k} {v} s" for k, v in phases.items()))
    return lines
