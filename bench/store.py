"""Benchmark of the paged tree store: one shard in the seed-004 shape.

Prints (asserts nothing): nodes/s written by a full build, full-scan nodes/s,
point-lookup latency, the peak RSS of a scan with a 64 MB page cache against
the shard's bytes, and the bytes an incremental load touching 1% of the UIDs
writes, as a fraction of the store's bytes (goal: under 10%).

    .venv/bin/python bench/store.py [--nodes 5000000]

Each phase runs in its own process so that its peak RSS is its own.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from treestore.storage import page_cache
from treestore.storage.pagestore import FilePageStore
from treestore.storage.tree import ShardState, ShardTree

NODES_PER_UID = 7.5  # UID, A, ~3 attribute ids, M, ~1.5 PUIDs


def _visit_path(tree: ShardTree, names: list[str], create: bool = True) -> None:
    handle = tree.root_handle
    for name in names:
        found = tree.visit(handle, name, create)
        if found is None:
            return
        handle = found


def _uid(i: int) -> str:
    return f"{(i * 2654435761) % 10**10:010d}"


def phase_build(store_dir: str, uids: int) -> dict[str, float]:
    """Build the shard: attribute records, then mapping records (update-only)."""
    rng = random.Random(7)
    tree = ShardTree(FilePageStore(store_dir))
    started = time.perf_counter()
    for i in range(uids):
        for attribute in rng.sample(range(1, 40), rng.randint(1, 5)):
            _visit_path(tree, ["root", _uid(i), "A", str(attribute)])
    for i in range(uids):
        for puid in range(1 + (i % 2)):
            _visit_path(tree, ["root", _uid(i), "M", f"p{i}-{puid}"])
    state = tree.commit()
    seconds = time.perf_counter() - started
    Path(store_dir, "state.json").write_text(json.dumps(state.to_json()))
    return {"nodes": state.nodes, "seconds": seconds, "bytes": state.bytes, "rss": _rss()}


def phase_scan(store_dir: str, uids: int) -> dict[str, float]:
    """Full scan and point lookups with the cache budget of the environment."""
    state = ShardState.from_json(json.loads(Path(store_dir, "state.json").read_text()))
    tree = ShardTree(FilePageStore(store_dir), state)
    started = time.perf_counter()
    scanned = sum(1 for _ in tree.walk())
    scan_seconds = time.perf_counter() - started
    rng = random.Random(11)
    root = tree.child(tree.root, "root")
    assert root is not None
    scan_cache_peak = page_cache.cache().peak_bytes
    page_cache.cache().clear()
    probes = [_uid(rng.randrange(uids)) for _ in range(2000)]
    started = time.perf_counter()
    for uid in probes:
        assert tree.child(root, uid) is not None
    lookup_seconds = (time.perf_counter() - started) / len(probes)
    return {
        "scanned": scanned,
        "scan_seconds": scan_seconds,
        "lookup_ms": lookup_seconds * 1000,
        "cache_peak": max(scan_cache_peak, page_cache.cache().peak_bytes),
        "cache_budget": page_cache.cache().budget,
        "rss": _rss(),
    }


def phase_incremental(store_dir: str, uids: int) -> dict[str, float]:
    """New mapping rows for 1% of the UIDs, applied as one load."""
    state = ShardState.from_json(json.loads(Path(store_dir, "state.json").read_text()))
    tree = ShardTree(FilePageStore(store_dir), state)
    rng = random.Random(13)
    touched = rng.sample(range(uids), max(1, uids // 100))
    started = time.perf_counter()
    for i in touched:
        _visit_path(tree, ["root", _uid(i), "M", f"new{i}"], create=True)
    new_state = tree.commit()
    return {
        "touched": len(touched),
        "seconds": time.perf_counter() - started,
        "bytes_written": tree.stats.bytes_written,
        "store_bytes": new_state.bytes,
        "compacted": tree.stats.compacted,
    }


def _rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MB on Linux


PHASES = {"build": phase_build, "scan": phase_scan, "incremental": phase_incremental}


def _run_phase(
    name: str, store_dir: str, uids: int, cache_mb: int | None = None
) -> dict[str, float]:
    env = dict(os.environ)
    if cache_mb is not None:
        env["TREESTORE_CACHE_MB"] = str(cache_mb)
    done = subprocess.run(
        [sys.executable, __file__, "--phase", name, "--dir", store_dir, "--uids", str(uids)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5_000_000)
    parser.add_argument("--phase", choices=sorted(PHASES))
    parser.add_argument("--dir")
    parser.add_argument("--uids", type=int)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(PHASES[args.phase](args.dir, args.uids)))
        return
    uids = int(args.nodes / NODES_PER_UID)
    with tempfile.TemporaryDirectory(prefix="treestore-bench-") as folder:
        build = _run_phase("build", folder, uids)
        scan = _run_phase("scan", folder, uids, cache_mb=64)
        incremental = _run_phase("incremental", folder, uids)
    mb = 1024 * 1024
    print(
        f"shard: {build['nodes']:,.0f} nodes ({uids:,} UIDs), {build['bytes'] / mb:,.1f} MB of pages"
    )
    print(
        f"build:        {build['nodes'] / build['seconds']:,.0f} nodes/s ({build['seconds']:.1f} s), "
        f"peak RSS {build['rss']:,.0f} MB (default 256 MB cache)"
    )
    print(
        f"full scan:    {scan['scanned'] / scan['scan_seconds']:,.0f} nodes/s ({scan['scan_seconds']:.1f} s)"
    )
    print(
        f"point lookup: {scan['lookup_ms']:.3f} ms per child lookup (cold cache, 2000 random UIDs)"
    )
    print(
        f"memory:       peak RSS {scan['rss']:,.0f} MB with a 64 MB cache "
        f"(cache peak {scan['cache_peak'] / mb:.1f} MB) for a shard of {build['bytes'] / mb:,.1f} MB "
        f"encoded, ~{build['bytes'] * 8 / mb:,.0f} MB decoded"
    )
    fraction = incremental["bytes_written"] / incremental["store_bytes"]
    print(
        f"incremental:  {incremental['touched']:,} UIDs (1%) in {incremental['seconds']:.2f} s wrote "
        f"{incremental['bytes_written'] / mb:.2f} MB = {fraction:.2%} of the store's bytes "
        f"(goal < 10%; compaction: {incremental['compacted']})"
    )


if __name__ == "__main__":
    main()
