"""The text of ``treestore info`` (and the shell's ``\\info``): versions, shards, loads."""

from __future__ import annotations

import io
import json
import time
from typing import TYPE_CHECKING, Any, TextIO

from loaders.tree.pending import PendingState
from shell.output.formats import write_rows
from treestore.errors import StoreError
from treestore.store.dedup_index import read_dedup_manifest
from treestore.store.layout import STREAM_UNREADABLE
from treestore.store.lock import lock_holder
from treestore.store.versions import manifest_versions, open_version

if TYPE_CHECKING:
    from treestore.storage.pagestore import PageStore

__all__ = ["write_info"]

RECENT_LOADS = 5
"""How many of the newest loads the summary lists."""


def write_info(store: str, out: TextIO) -> None:
    """Write the store's summary: its version, each shard's nodes and bytes, recent loads."""
    version = open_version(store)
    manifest = version.manifest
    listed = manifest_versions(version.pages)
    kept = [v for v in listed if v <= manifest.version]  # published: a later one is not
    states = manifest.trees
    print(f"store {version.location}", file=out)
    print(
        f"version {manifest.version} (kept: {', '.join(map(str, kept)) or 'none'}), "
        f"{manifest.shards} shards, {sum(s.nodes for s in states.values()):,} nodes, "
        f"{sum(s.bytes for s in states.values()):,} bytes of pages, "
        f"{len(manifest.inputs)} input files loaded",
        file=out,
    )
    for shard in range(manifest.shards):
        state = states.get(shard)
        if state is None:
            print(f"  shard {shard}: empty", file=out)
            continue
        pending = PendingState.of(state)
        waiting = (
            f", {pending.records:,} pending update-only record(s) waiting" if pending.files else ""
        )
        print(
            f"  shard {shard}: {state.nodes:,} nodes, {state.bytes:,} bytes, "
            f"{len(state.runs)} run(s){waiting}",
            file=out,
        )
    unpublished = [v for v in listed if v > manifest.version]
    if unpublished and lock_holder(version.pages) is None:  # else a load may be publishing it
        print(
            f"  not published: version(s) {', '.join(map(str, unpublished))} (a load stopped "
            "before publishing; the next load removes its manifest)",
            file=out,
        )
    _write_follower(version.pages, manifest, out)
    _write_dedup_index(version.pages, manifest.version, out)
    for load in manifest.loads[-RECENT_LOADS:]:
        expired = load.get("expired", {}).get("files", [])
        where = (
            f"; expired pending records in {', '.join(f'{version.location}/{e}' for e in expired)}"
            if expired
            else ""
        )
        print(
            f"  load -> version {load['version']} at {load['started']} "
            f"({load['seconds']} s){where}",
            file=out,
        )
        _write_sources(load.get("sources", {}), out)


def _write_sources(sources: dict[str, dict[str, Any]], out: TextIO) -> None:
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


def _write_follower(pages: PageStore, manifest: Any, out: TextIO) -> None:
    """Whether a follower (``load --follow``) holds the store, its last micro-batch and lag."""
    holder = lock_holder(pages)
    streamed = [load for load in manifest.loads if "stream" in load]
    _write_set_aside(pages, out)
    if holder is None or "--follow" not in str(holder.get("purpose", "")):
        if streamed:
            last = streamed[-1]
            print(
                f"  no follower now; the last one's micro-batch {last['stream']['batch']} "
                f"published version {last['version']}",
                file=out,
            )
        return
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(holder.get("since", 0))))
    line = (
        f"  followed by {holder.get('purpose')}: pid {holder.get('pid')} on "
        f"{holder.get('host')} since {since}"
    )
    if streamed:
        last = streamed[-1]
        newest = last["stream"].get("newest_file_ns")
        clock = time.strftime("%H:%M:%S", time.localtime(newest / 1e9)) if newest else ""
        landed = f" (its newest file landed at {clock})" if newest else ""
        line += (
            f"; its last micro-batch {last['stream']['batch']} published version "
            f"{last['version']} at {last.get('started', '?')}{landed}"
        )
    print(line, file=out)


def _write_set_aside(pages: PageStore, out: TextIO) -> None:
    """The files a follower could not read at all, set aside until they change."""
    if not pages.exists(STREAM_UNREADABLE):
        return
    kept = json.loads(pages.read(STREAM_UNREADABLE))
    if kept:
        shown = ", ".join(sorted(kept)[:3]) + (" ..." if len(kept) > 3 else "")
        print(
            f"  {len(kept)} file(s) the follower could not read, skipped until they change "
            f"({pages.location}/{STREAM_UNREADABLE}): {shown}",
            file=out,
        )


def _write_dedup_index(pages: PageStore, version: int, out: TextIO) -> None:
    """The dedup index's sources, runs and the version it covers."""
    try:
        index = read_dedup_manifest(pages)
    except StoreError as exc:
        print(f"dedup index: {exc} The next load rebuilds it.", file=out)
        return
    if index is None:
        return
    behind = "" if index.covers == version else " (behind: the next load catches it up)"
    if index.covers > version:
        behind = " (ahead: CURRENT was rolled back; the next load rebuilds it)"
    print(f"dedup index covers version {index.covers}{behind}", file=out)
    for name in sorted(index.sources):
        runs = index.runs(name)
        print(
            f"  source {name} (keys {', '.join(index.keys(name) or ())}): "
            f"{sum(len(r) for r in runs.values())} run(s) in {len(runs)} shard(s)",
            file=out,
        )
