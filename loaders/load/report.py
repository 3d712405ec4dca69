"""The load report: what a load read, rejected, dropped and changed, and how long it took.

Per source: files, records read, rejected, duplicates (within the load and of
earlier loads), dropped by the map's filters, applied, and update-only records
that found no node. Per shard: nodes created and updated, bytes written. The
time of each phase. Rejected records are kept in the store under ``rejected/``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

from loaders.job.model import JobSpec
from loaders.load.inputs import InputFile
from loaders.load.protocol import ShardResult, TaskTotals
from loaders.load.timing import Timer
from treestore.storage.pagestore import PageStore

__all__ = ["first_rejected", "format_load_report", "summarize"]

SOURCE_COUNTS = (
    "files",
    "read",
    "rejected",
    "duplicates_in_load",
    "duplicates_of_earlier_loads",
    "kept",
    "dropped",
    "applied",
    "missed_updates",
    "pending",
)
PENDING_COUNTS = ("buffered", "applied", "expired", "waiting")


def summarize(
    job: JobSpec,
    fresh: dict[int, list[InputFile]],
    results: tuple[list[ShardResult], list[TaskTotals]],
    phases: Timer,
) -> dict[str, Any]:
    """Fold the tasks' results into the published load report (plus ``states``, ``files``,
    ``dedup``, which the driver takes out before publishing)."""
    shard_results, task_totals = results
    files: Counter[str] = Counter()
    sources: dict[str, Counter[str]] = {s.name: Counter() for s in job.sources}
    shards: dict[str, Any] = {}
    states: list[dict[str, Any]] = []
    index_runs: dict[int, dict[str, list[str]]] = {}
    rejected: dict[str, Any] = {"count": 0, "files": []}
    for totals in task_totals:
        files.update(totals.files)
        for name, counts in totals.sources.items():
            sources[name].update(counts)
        for shard, runs in totals.dedup.items():
            index_runs.setdefault(int(shard), {}).update(runs)
        rejected["count"] += totals.rejected_count
        if totals.rejected_file:
            rejected["files"].append(totals.rejected_file)
    expired_files = sorted(r.expired_file for r in shard_results if r.expired_file)
    for result in shard_results:
        states.append({"shard": result.shard, "state": result.state})
        shards[str(result.shard)] = result.report()
    for index, new in fresh.items():
        sources[job.sources[index].name]["files"] = len(new)
    if rejected["files"]:
        rejected["folder"] = rejected["files"][0].rsplit("/", 1)[0]
        rejected["files"].sort()
    pending = {
        key: sum(s.get("pending", {}).get(key, 0) for s in shards.values())
        for key in PENDING_COUNTS
    }
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(phases.started)),
        "seconds": round(time.time() - phases.started, 3),
        "sources": {
            name: {key: counts.get(key, 0) for key in SOURCE_COUNTS}
            for name, counts in sources.items()
        },
        "shards": dict(sorted(shards.items(), key=lambda item: int(item[0]))),
        "rejected": rejected,
        "pending": pending,
        "expired": {"files": expired_files},
        "phases": phases.seconds,
        "files": dict(files),
        "dedup": index_runs,
        "states": states,
    }


def first_rejected(pages: PageStore, rejected: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` rejected records (by file and line) of a load report's ``rejected``."""
    found: list[dict[str, Any]] = []
    for name in rejected.get("files", []):
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
            f"  shard {shard}: {s['nodes_created']:,} nodes created, "
            f"{s['nodes_updated']:,} updated, {s['bytes_written']:,} bytes written"
        )
    if len(shards) > shard_lines:
        rest = list(shards.values())[shard_lines:]
        lines.append(
            f"  {len(rest)} more shards: {sum(s['nodes_created'] for s in rest):,} nodes created, "
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
