"""What ``treestore info`` (and the shell's ``\\info``) says of a store: versions, shards, loads.

:func:`store_info` gathers the facts once, as a typed :class:`StoreInfo` (its
:meth:`~StoreInfo.to_json` is the service's ``GET /stores/NAME``); :func:`write_info`
writes them as text.
"""

from __future__ import annotations

import calendar
import io
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from loaders.tree.pending import PendingState
from shell.output.formats import write_rows
from treestore.errors import StoreError
from treestore.store.dedup_index import read_dedup_manifest
from treestore.store.layout import STREAM_UNREADABLE
from treestore.store.lock import lock_holder
from treestore.store.versions import Manifest, StoreVersion, manifest_versions, open_version

if TYPE_CHECKING:
    from treestore.storage.pagestore import PageStore

__all__ = [
    "DedupInfo",
    "FollowerInfo",
    "LoadInfo",
    "ShardInfo",
    "StoreInfo",
    "StreamedLoad",
    "store_info",
    "write_info",
    "write_store_info",
]

RECENT_LOADS = 5
"""How many of the newest loads the summary lists."""


@dataclass(frozen=True)
class ShardInfo:
    """One shard's tree: ``None`` counts for a shard no load has reached (empty)."""

    shard: int
    nodes: int | None = None
    bytes: int = 0
    runs: int = 0
    pending: int | None = None
    """Update-only records waiting for their node (``None``: the shard keeps none)."""

    def to_json(self) -> dict[str, Any]:
        """As plain JSON."""
        if self.nodes is None:
            return {"shard": self.shard, "empty": True}
        return {
            "shard": self.shard,
            "nodes": self.nodes,
            "bytes": self.bytes,
            "runs": self.runs,
            "pending": self.pending,
        }


@dataclass(frozen=True)
class StreamedLoad:
    """The last micro-batch a follower (``load --follow``) published."""

    batch: int
    version: int
    started: str | None
    newest_file_ns: int | None
    seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        """As plain JSON, with how long its newest file waited to be published (``lag``,
        seconds: from the file's modification time to the end of the load)."""
        lag = None
        if self.newest_file_ns and self.started and self.seconds is not None:
            try:
                began = calendar.timegm(time.strptime(self.started, "%Y-%m-%dT%H:%M:%SZ"))
            except ValueError:  # a report whose time is written otherwise: no lag
                began = None
            if began is not None:
                lag = round(max(0.0, began + self.seconds - self.newest_file_ns / 1e9), 3)
        return {
            "batch": self.batch,
            "version": self.version,
            "started": self.started,
            "newest_file_ns": self.newest_file_ns,
            "lag_seconds": lag,
        }


@dataclass(frozen=True)
class FollowerInfo:
    """The follower: who holds the store now (``holder``, the lease's fields, ``None`` when no
    follower runs) and its last micro-batch (``last``)."""

    holder: Mapping[str, Any] | None
    last: StreamedLoad | None

    def to_json(self) -> dict[str, Any]:
        """As plain JSON: ``running``, the holder's purpose, pid, host and start (seconds
        since the epoch), and the last micro-batch."""
        doc: dict[str, Any] = {"running": self.holder is not None}
        if self.holder is not None:
            doc.update(
                {k: self.holder.get(k) for k in ("purpose", "pid", "host", "since")},
            )
        doc["last"] = None if self.last is None else self.last.to_json()
        return doc


@dataclass(frozen=True)
class DedupSource:
    """One source of the dedup index: its key fields and its runs."""

    name: str
    keys: tuple[str, ...]
    runs: int
    shards: int


@dataclass(frozen=True)
class DedupInfo:
    """The dedup index: the version it covers and its sources, or why it cannot be read."""

    covers: int = 0
    sources: tuple[DedupSource, ...] = ()
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """As plain JSON."""
        if self.error is not None:
            return {"error": self.error}
        return {
            "covers": self.covers,
            "sources": [
                {"name": s.name, "keys": list(s.keys), "runs": s.runs, "shards": s.shards}
                for s in self.sources
            ],
        }


@dataclass(frozen=True)
class LoadInfo:
    """One load the version keeps: when, how long, its counts per source, expired files."""

    version: int
    started: str
    seconds: float
    sources: Mapping[str, Mapping[str, Any]]
    expired: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """As plain JSON."""
        return {
            "version": self.version,
            "started": self.started,
            "seconds": self.seconds,
            "sources": {name: dict(counts) for name, counts in sorted(self.sources.items())},
            "expired": list(self.expired),
        }


@dataclass(frozen=True)
class StoreInfo:
    """What ``treestore info`` says of one version of a store."""

    location: str
    version: int
    kept: tuple[int, ...]
    """The published versions the store keeps (up to this one)."""
    shards: tuple[ShardInfo, ...]
    inputs: int
    """Input files loaded."""
    unpublished: tuple[int, ...]
    """Manifests past ``version`` that a stopped load left (only when no one holds the lock:
    else a load may be publishing them)."""
    unreadable: tuple[str, ...]
    """Files a follower could not read at all, set aside until they change."""
    follower: FollowerInfo
    dedup: DedupInfo | None
    loads: tuple[LoadInfo, ...]
    """The newest loads (at most :data:`RECENT_LOADS`), oldest first."""

    @property
    def nodes(self) -> int:
        """Nodes in every shard."""
        return sum(s.nodes or 0 for s in self.shards)

    @property
    def bytes(self) -> int:
        """Bytes of pages in every shard."""
        return sum(s.bytes for s in self.shards)

    def to_json(self) -> dict[str, Any]:
        """As plain JSON (``shards`` is the count; ``shard_trees`` each shard's tree)."""
        return {
            "location": self.location,
            "version": self.version,
            "kept": list(self.kept),
            "shards": len(self.shards),
            "nodes": self.nodes,
            "bytes": self.bytes,
            "inputs": self.inputs,
            "shard_trees": [s.to_json() for s in self.shards],
            "unpublished": list(self.unpublished),
            "unreadable": list(self.unreadable),
            "follower": self.follower.to_json(),
            "dedup": None if self.dedup is None else self.dedup.to_json(),
            "loads": [load.to_json() for load in self.loads],
        }


def store_info(version: StoreVersion) -> StoreInfo:
    """The facts ``treestore info`` shows of ``version`` (the lock, the follower's set-aside
    files and the dedup index as they are now)."""
    manifest = version.manifest
    listed = manifest_versions(version.pages)
    holder = lock_holder(version.pages)
    unpublished = [v for v in listed if v > manifest.version]
    return StoreInfo(
        location=version.location,
        version=manifest.version,
        kept=tuple(v for v in listed if v <= manifest.version),  # a later one is not published
        shards=tuple(_shard(manifest, shard) for shard in range(manifest.shards)),
        inputs=len(manifest.inputs),
        unpublished=tuple(unpublished) if holder is None else (),
        unreadable=_set_aside(version.pages),
        follower=_follower(holder, manifest),
        dedup=_dedup(version.pages, version.version),
        loads=tuple(
            LoadInfo(
                load["version"],
                load["started"],
                load["seconds"],
                load.get("sources", {}),
                tuple(load.get("expired", {}).get("files", [])),
            )
            for load in manifest.loads[-RECENT_LOADS:]
        ),
    )


def _shard(manifest: Manifest, shard: int) -> ShardInfo:
    state = manifest.trees.get(shard)
    if state is None:
        return ShardInfo(shard)
    pending = PendingState.of(state)
    waiting = pending.records if pending.files else None
    return ShardInfo(shard, state.nodes, state.bytes, len(state.runs), waiting)


def _follower(holder: Mapping[str, Any] | None, manifest: Manifest) -> FollowerInfo:
    streamed = [load for load in manifest.loads if "stream" in load]
    last = None
    if streamed:
        load = streamed[-1]
        last = StreamedLoad(
            load["stream"]["batch"],
            load["version"],
            load.get("started"),
            load["stream"].get("newest_file_ns"),
            load.get("seconds"),
        )
    following = holder is not None and "--follow" in str(holder.get("purpose", ""))
    return FollowerInfo(holder if following else None, last)


def _set_aside(pages: PageStore) -> tuple[str, ...]:
    if not pages.exists(STREAM_UNREADABLE):
        return ()
    return tuple(sorted(json.loads(pages.read(STREAM_UNREADABLE)) or ()))


def _dedup(pages: PageStore, version: int) -> DedupInfo | None:
    try:
        index = read_dedup_manifest(pages)
    except StoreError as exc:
        return DedupInfo(error=str(exc))
    if index is None or (not index.sources and index.covers <= version):
        return None  # jobs without dedup keys: nothing to say, unless CURRENT was rolled back
    sources = []
    for name in sorted(index.sources):
        runs = index.runs(name)
        keys = tuple(index.keys(name) or ())
        sources.append(DedupSource(name, keys, sum(len(r) for r in runs.values()), len(runs)))
    return DedupInfo(index.covers, tuple(sources))


def write_info(store: str, out: TextIO) -> None:
    """Write the store's summary: its version, each shard's nodes and bytes, recent loads."""
    version = open_version(store)
    write_store_info(store_info(version), out)


def write_store_info(info: StoreInfo, out: TextIO) -> None:
    """Write ``info`` as ``treestore info`` shows it."""
    print(f"store {info.location}", file=out)
    print(
        f"version {info.version} (kept: {', '.join(map(str, info.kept)) or 'none'}), "
        f"{len(info.shards)} shards, {info.nodes:,} nodes, "
        f"{info.bytes:,} bytes of pages, "
        f"{info.inputs} input files loaded",
        file=out,
    )
    for shard in info.shards:
        if shard.nodes is None:
            print(f"  shard {shard.shard}: empty", file=out)
            continue
        waiting = (
            f", {shard.pending:,} pending update-only record(s) waiting"
            if shard.pending is not None
            else ""
        )
        print(
            f"  shard {shard.shard}: {shard.nodes:,} nodes, {shard.bytes:,} bytes, "
            f"{shard.runs} run(s){waiting}",
            file=out,
        )
    if info.unpublished:
        print(
            f"  not published: version(s) {', '.join(map(str, info.unpublished))} (a load "
            "stopped before publishing; the next load removes its manifest)",
            file=out,
        )
    _write_set_aside(info.unreadable, info.location, out)
    _write_follower(info.follower, out)
    if info.dedup is not None:
        _write_dedup_index(info.dedup, info.version, out)
    for load in info.loads:
        expired = ", ".join(f"{info.location}/{e}" for e in load.expired)
        where = f"; expired pending records in {expired}" if expired else ""
        print(
            f"  load -> version {load.version} at {load.started} ({load.seconds} s){where}",
            file=out,
        )
        _write_sources(load.sources, out)


def _write_sources(sources: Mapping[str, Mapping[str, Any]], out: TextIO) -> None:
    """A load's counts per source, as a table: a row per source, a column per count that
    is not 0 for every source."""
    keys = [
        key
        for key in dict.fromkeys(key for counts in sources.values() for key in counts)
        if any(counts.get(key) for counts in sources.values())
    ]
    if not keys:
        return
    rows = [
        [name, *(counts.get(key, 0) for key in keys)] for name, counts in sorted(sources.items())
    ]
    table = io.StringIO()
    write_rows(rows, table, "table", columns=["source", *keys])
    for line in table.getvalue().splitlines():
        print("      " + line, file=out)


def _write_follower(follower: FollowerInfo, out: TextIO) -> None:
    """Whether a follower (``load --follow``) holds the store, its last micro-batch and lag."""
    holder, last = follower.holder, follower.last
    if holder is None:
        if last is not None:
            print(
                f"  no follower now; the last one's micro-batch {last.batch} "
                f"published version {last.version}",
                file=out,
            )
        return
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(holder.get("since", 0))))
    line = (
        f"  followed by {holder.get('purpose')}: pid {holder.get('pid')} on "
        f"{holder.get('host')} since {since}"
    )
    if last is not None:
        newest = last.newest_file_ns
        clock = time.strftime("%H:%M:%S", time.localtime(newest / 1e9)) if newest else ""
        landed = f" (its newest file landed at {clock})" if newest else ""
        line += (
            f"; its last micro-batch {last.batch} published version "
            f"{last.version} at {last.started or '?'}{landed}"
        )
    print(line, file=out)


def _write_set_aside(kept: tuple[str, ...], location: str, out: TextIO) -> None:
    """The files a follower could not read at all, set aside until they change."""
    if kept:
        shown = ", ".join(kept[:3]) + (" ..." if len(kept) > 3 else "")
        print(
            f"  {len(kept)} file(s) the follower could not read, skipped until they change "
            f"({location}/{STREAM_UNREADABLE}): {shown}",
            file=out,
        )


def _write_dedup_index(index: DedupInfo, version: int, out: TextIO) -> None:
    """The dedup index's sources, runs and the version it covers."""
    if index.error is not None:
        print(f"dedup index: {index.error} The next load rebuilds it.", file=out)
        return
    behind = "" if index.covers == version else " (behind: the next load catches it up)"
    if index.covers > version:
        behind = " (ahead: CURRENT was rolled back; the next load rebuilds it)"
    print(f"dedup index covers version {index.covers}{behind}", file=out)
    for source in index.sources:
        print(
            f"  source {source.name} (keys {', '.join(source.keys)}): "
            f"{source.runs} run(s) in {source.shards} shard(s)",
            file=out,
        )
