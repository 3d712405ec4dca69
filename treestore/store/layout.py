"""A store's layout: the name of every file and folder a store keeps, in one place.

A store is a folder (or a URI) of named blobs, names being ``/``-separated relative
paths in its :class:`~treestore.storage.pagestore.PageStore`. Storage reads and writes
the names it is given; this module decides them, and every module that builds a path
in a store takes it from here. A store holds::

    store.json                        shard count and shard hash, fixed for life; the
                                      version from which the store seals its documents
                                      (treestore.store.sealed.sealed_from); the store's
                                      identity (its runs carry it)
    CURRENT                           the published version number
    locks/000012.json                 the lock's leases: the newest says who holds the
                                      store while a load (or gc) runs (treestore.store.lock)
    versions/000007.json              a version's manifest: per shard its runs (with
                                      their sizes and checksums), next node id, node
                                      count and bytes; the loaded input files; recent
                                      load reports and the files of records they set
                                      aside; the shard hash (store.json's, checked
                                      against it); its own checksum
                                      (treestore.store.sealed)
    trees/shard-0003/<run>.pages      a run's pages (see treestore.storage.runs)
    trees/shard-0003/<run>.index      a run's page index
    trees/shard-0003/<name>.arrow     side files a version keeps with the shard's tree
                                      (see treestore.storage.state; pending records)
    dedup/INDEX                       the dedup index's manifest (treestore.store.dedup_index)
    dedup/<source>/shard-0003/<run>   a source's dedup index runs for one shard
    rejected/<load>/part-*.jsonl      a load's rejected records, with file and line
    expired/<load>.parquet            pending records that expired in a load
    expired/<load>-shards/            the shards' parts of it, until the driver merges them
    routed/<load>/shard-0003/<file>.arrow  a load's records of one input file for one shard,
                                      as its reading task routed them (Arrow IPC), until
                                      the load's shard tasks have applied them
    stream/checkpoint/                a follower's Spark checkpoint (load --follow)
    stream/job.json                   the job the follower's checkpoint is tied to
    stream/unreadable.json            the files a follower could not read, set aside
    sweeps/<name>/                    an interval sweep's results, as Parquet

>>> manifest_name(7), number_of(manifest_name(7)), tree_folder(3)
('versions/000007.json', 7, 'trees/shard-0003')
>>> dedup_folder("clicks/eu", 3)
'dedup/clicks%2Feu/shard-0003'
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = [
    "CONFIG",
    "CURRENT",
    "DEDUP",
    "DEDUP_INDEX",
    "EXPIRED",
    "LOCKS",
    "REJECTED",
    "ROUTED",
    "STREAM",
    "STREAM_CHECKPOINT",
    "STREAM_JOB",
    "STREAM_UNREADABLE",
    "SWEEPS",
    "TOP_LEVEL",
    "TREES",
    "VERSIONS",
    "dedup_folder",
    "expired_file",
    "expired_parts_folder",
    "lease_name",
    "manifest_name",
    "number_of",
    "rejected_folder",
    "routed_folder",
    "routed_piece",
    "sweep_folder",
    "tree_folder",
]

CONFIG = "store.json"
"""The store's configuration: its format, shard count and shard hash, fixed for life."""
CURRENT = "CURRENT"
"""The number of the published version (the file readers resolve first)."""
LOCKS = "locks"
"""The folder of the lock's leases, one numbered JSON file each (:func:`lease_name`)."""
VERSIONS = "versions"
"""The folder of the versions' manifests, one numbered JSON file each (:func:`manifest_name`)."""
TREES = "trees"
"""The folder of the shards' trees: their runs and side files, a folder per shard
(:func:`tree_folder`)."""
DEDUP = "dedup"
"""The folder of the dedup index: its manifest and a folder of runs per source and shard."""
DEDUP_INDEX = f"{DEDUP}/INDEX"
"""The dedup index's manifest: which runs each source's index has, which version it covers."""
REJECTED = "rejected"
"""The folder of rejected records, a folder per load (:func:`rejected_folder`)."""
EXPIRED = "expired"
"""The folder of expired pending records, a Parquet file per load (:func:`expired_file`)."""
ROUTED = "routed"
"""The folder of the records loads routed to their shards, a folder per running load
(:func:`routed_folder`): only a load holding the lock uses it, so any left is a killed
load's and goes with the next gc."""
STREAM = "stream"
"""A follower's folder (``load --follow``): Spark's checkpoint, its job, set-aside files."""
STREAM_CHECKPOINT = f"{STREAM}/checkpoint"
"""Spark's streaming checkpoint of a follower: which files its stream has offered."""
STREAM_JOB = f"{STREAM}/job.json"
"""What a follower's checkpoint is tied to: the job's digest and file."""
STREAM_UNREADABLE = f"{STREAM}/unreadable.json"
"""The files a follower could not read at all, skipped until they change."""
SWEEPS = "sweeps"
"""The folder of interval sweeps' results, a folder per sweep (:func:`sweep_folder`)."""

TOP_LEVEL = (
    CONFIG,
    CURRENT,
    LOCKS,
    VERSIONS,
    TREES,
    DEDUP,
    REJECTED,
    EXPIRED,
    ROUTED,
    STREAM,
    SWEEPS,
)
"""Every name a store keeps at its top level."""


def manifest_name(version: int) -> str:
    """The file of version ``version``'s manifest."""
    return f"{VERSIONS}/{version:06d}.json"


def lease_name(number: int) -> str:
    """The file of the lock's lease number ``number``."""
    return f"{LOCKS}/{number:06d}.json"


def number_of(name: str) -> int | None:
    """The number a manifest or lease file is named by (None: not such a file)."""
    stem = name.rsplit("/", 1)[-1].removesuffix(".json")
    return int(stem) if stem.isdigit() else None


def tree_folder(shard: int) -> str:
    """The folder of ``shard``'s tree: its runs and side files."""
    return f"{TREES}/shard-{shard:04d}"


def dedup_folder(source: str, shard: int) -> str:
    """The folder of ``source``'s dedup index runs for ``shard`` (the name URL-quoted)."""
    return f"{DEDUP}/{quote(source, safe='')}/shard-{shard:04d}"


def rejected_folder(load: str) -> str:
    """The folder of the records load ``load`` (its stamp) rejected."""
    return f"{REJECTED}/{load}"


def routed_folder(load: str) -> str:
    """The folder of the records load ``load`` (its stamp) routed to their shards."""
    return f"{ROUTED}/{load}"


def routed_piece(folder: str, shard: int, file: int) -> str:
    """The piece of ``folder`` (:func:`routed_folder`) that holds input file number ``file``'s
    records for ``shard``: the names of a shard's pieces sort in file number order."""
    return f"{folder}/shard-{shard:04d}/{file:08d}.arrow"


def expired_file(load: str) -> str:
    """The file of the pending records that expired in load ``load`` (its stamp)."""
    return f"{EXPIRED}/{load}.parquet"


def expired_parts_folder(load: str) -> str:
    """Where the shards of load ``load`` write their expired records, before the driver
    merges them into :func:`expired_file`."""
    return f"{EXPIRED}/{load}-shards"


def sweep_folder(name: str) -> str:
    """The folder of the results of the interval sweep called ``name``."""
    return f"{SWEEPS}/{name}"
