"""A run's index (``NAME.index``): where each page of the run lies, and its key filter.

Runs never change once written, so an index parsed once serves every later reader in
the process: :func:`parsed_index` keeps the latest parses by the index file's bytes
(its length and a 128-bit hash of them), so a query's tasks read each index file but
decode it once per worker, not once per query; a file that changed is parsed again.

An index written since runs carried their owner says, inside its checksummed body, what
the run belongs to (``belongs_to``: the shard and, when the store has one, the store's
identity, its *owner*), so a reader can refuse a run copied or moved from another shard or
store; an index written before has none (:attr:`RunIndex.shard` and :attr:`RunIndex.owner`
are None) and reads as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import NamedTuple

import msgpack
import numpy as np
import xxhash

from treestore.errors import CorruptPageError
from treestore.storage.entries import Key
from treestore.storage.keyfilter import KeyFilter, LegacyFilter, load_filter

__all__ = [
    "INDEX_FORMAT",
    "INDEX_FORMATS",
    "PageInfo",
    "RunIndex",
    "check_belongs",
    "checksum",
    "parsed_index",
]

INDEX_FORMAT = "treestore-run-index-2"
INDEX_FORMATS = ("treestore-run-index-1", INDEX_FORMAT)  # 1: a legacy key filter
KEPT_INDEXES = 512
"""How many parsed indexes a process keeps (the least recently used go first)."""


def checksum(data: bytes | memoryview) -> int:
    """The XXH64 checksum runs carry for their pages and index bodies."""
    return xxhash.xxh64_intdigest(data)


def checksums(data: memoryview, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """:func:`checksum` of each stretch ``starts[i]:ends[i]`` of ``data`` (uint64)."""
    digest = xxhash.xxh64_intdigest
    found = (digest(data[a:b]) for a, b in zip(starts.tolist(), ends.tolist(), strict=True))
    return np.fromiter(found, np.uint64, len(starts))


class PageInfo(NamedTuple):
    """One page's place in its run."""

    first: Key
    last: Key
    offset: int
    length: int
    entries: int
    checksum: int


@dataclass(frozen=True)
class RunIndex:
    """A run's index, decoded (shared by readers: never changed)."""

    pages: list[PageInfo]
    entries: int
    keys: KeyFilter | LegacyFilter
    checksum: int
    """The checksum the index carries over its body."""
    lasts: list[Key]
    first_parents: np.ndarray
    last_parents: np.ndarray
    spans: np.ndarray
    """Each page's (offset, length) in the pages file."""
    checksums: np.ndarray
    """Each page's checksum (uint64), to check many pages at once."""
    pages_bytes: int
    """The encoded size of the run's pages."""
    shard: int | None = None
    """The shard the run says it belongs to (None: written before runs said so)."""
    owner: str | None = None
    """The identity of the store the run says it belongs to (None: none was given, or
    written before runs said so)."""


_parsed: OrderedDict[tuple[int, bytes], RunIndex] = OrderedDict()
_lock = threading.Lock()


def parsed_index(data: bytes) -> RunIndex:
    """The index whose file holds ``data``, decoded and checked (its checksum, its
    format); raises ValueError, TypeError, KeyError or msgpack's errors if it is not one."""
    key = (len(data), xxhash.xxh3_128_digest(data))
    with _lock:
        found = _parsed.get(key)
        if found is not None:
            _parsed.move_to_end(key)
            return found
    index = _parse(data)
    with _lock:
        _parsed[key] = index
        while len(_parsed) > KEPT_INDEXES:
            _parsed.popitem(last=False)
    return index


def _parse(data: bytes) -> RunIndex:
    index_body, carried = msgpack.unpackb(data)
    if checksum(index_body) != carried:
        raise ValueError("checksum mismatch")
    index = msgpack.unpackb(index_body)
    if index.get("format") not in INDEX_FORMATS:
        raise ValueError("not a run index")
    pages = [PageInfo((p[0], p[1]), (p[2], p[3]), *p[4:]) for p in index["pages"]]
    belongs = index.get("belongs_to") or {}
    if not isinstance(belongs, dict):
        raise ValueError("its belongs_to is not a map")
    shard, owner = belongs.get("shard"), belongs.get("owner")
    return RunIndex(
        pages=pages,
        entries=int(index["entries"]),
        keys=load_filter(index),
        checksum=carried,
        lasts=[p.last for p in pages],
        first_parents=np.array([p.first[0] for p in pages], dtype=np.int64),
        last_parents=np.array([p.last[0] for p in pages], dtype=np.int64),
        spans=np.array([(p.offset, p.length) for p in pages], np.int64).reshape(-1, 2),
        checksums=np.array([p.checksum for p in pages], np.uint64),
        pages_bytes=sum(p.length for p in pages),
        shard=None if shard is None else int(shard),
        owner=None if owner is None else str(owner),
    )


def check_belongs(index: RunIndex, where: str, shard: int | str, owner: str | None) -> None:
    """Raise :class:`CorruptPageError` if the run whose index (the file ``where``) is
    ``index`` says it belongs to another shard than ``shard`` or another store than
    ``owner`` (what is not known, on either side, is not compared)."""
    other_shard = index.shard is not None and isinstance(shard, int) and index.shard != shard
    other_store = index.owner is not None and owner is not None and index.owner != owner
    if not (other_shard or other_store):
        return
    if other_store:
        says = f"shard {index.shard} of store {index.owner}, not to this store ({owner})"
        whence = "another store"
    else:
        says = f"shard {index.shard}, not to shard {shard}"
        whence = "another shard"
    raise CorruptPageError(
        f"Shard {shard}: the run {where} says it belongs to {says}: it was copied or moved "
        f"here from {whence}; put this shard's own run back (from a backup); "
        "run 'treestore check' on the store."
    )
