"""The per-shard dedup index: which record keys a shard has already loaded.

Seed 002's HashSet of composite keys per partition, made persistent and
incremental. One index per (dedup source, shard) is a list of *runs*; a run is
an Arrow IPC file of two columns sorted by the first:

- ``hash``: a 64-bit hash of the key (Spark's ``xxhash64`` of the key text),
  which orders the run and narrows a lookup to one or a few rows;
- ``key``: the exact key (the JSON array of the key fields as text).

A record is a duplicate only if a run holds its *exact* key: the hash only
finds the candidates, so two different keys that share a hash are both kept
(the chance of a wrong drop is zero, not merely small). Runs are memory-mapped
and searched with vectorized ``numpy.searchsorted`` over the sorted batch
hashes, so a batch touches only the pages its keys fall in; a load adds its
new keys as one new run and never rewrites the old ones, except that runs are
merged when a newer run grows to a quarter of the one before it (size-tiered,
so a key is rewritten O(log n) times over the life of the store and a shard
keeps a handful of runs).

A run carries the XXH3 checksum of its columns in its schema's metadata (taken from
the columns in memory as it is written), verified whenever the run is opened: a
damaged run is found before a load trusts it, and the load rebuilds the index. A run
also says what it belongs to (:class:`RunOwner`: the store's identity, the source and
the shard), sealed with the columns' checksum, so a run moved to another shard's,
source's or store's place is found as it is opened. The index's manifest
(``dedup/INDEX``) is sealed with its checksum (:mod:`treestore.store.sealed`); one
without it is refused where the store seals (it covers a version from which
``store.json`` says the store seals), and so is one that names a run twice. Runs and
manifests written before treestore kept checksums, runs checksummed with XXH64, and runs
written before runs said what they belong to read as before (``check`` counts the last).

>>> from treestore.storage.pagestore import MemoryPageStore
>>> import pyarrow as pa
>>> index = ShardIndex(MemoryPageStore(), "dedup/clicks/shard-0000", ())
>>> keys = pa.array(['["a"]', '["b"]', '["a"]'])
>>> hashes = np.array([7, 9, 7])
>>> index.seen(hashes, keys).tolist()
[False, False, False]
>>> index.first_of_batch(hashes, keys).tolist()
[True, True, False]
>>> index.add(hashes[:2], keys[:2])
>>> runs = index.commit()
>>> reopened = ShardIndex(index.pages, index.folder, runs)
>>> reopened.seen(np.array([7, 7]), pa.array(['["a"]', '["z"]'])).tolist()
[True, False]
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import xxhash

from treestore import native
from treestore.errors import StoreError
from treestore.storage.pagestore import PageStore
from treestore.store.layout import CONFIG, DEDUP, DEDUP_INDEX
from treestore.store.sealed import seal, sealed_from, unseal
from treestore.store.versions import read_config, store_owner

__all__ = [
    "RUN_SCHEMA",
    "DedupManifest",
    "IndexRun",
    "RunOwner",
    "ShardIndex",
    "check_dedup_index",
    "publish_dedup_manifest",
    "read_dedup_manifest",
    "sorted_run",
    "unused_dedup_runs",
]

RUN_SCHEMA = pa.schema(
    [pa.field("hash", pa.int64(), nullable=False), pa.field("key", pa.large_binary())]
)
_CHECKSUM_KEYS = {b"treestore.xxh3": xxhash.xxh3_64, b"treestore.xxh64": xxhash.xxh64}
"""The schema metadata keys of a run's checksum (of its columns, see :func:`_run_checksum`)
and their hashes: runs are written with XXH3 (about twice XXH64's speed here, and a
load verifies every run it opens); runs written before with XXH64 read as before."""
_CHECKSUM_KEY = b"treestore.xxh3"
_OWNER_KEY, _OWNER_SEAL_KEY = b"treestore.owner", b"treestore.owner.xxh3"
"""The schema metadata keys of what a run belongs to (:class:`RunOwner` as JSON) and of
its seal: the XXH3 of those bytes and the columns' checksum, so the owner cannot change
(nor move to other columns) unnoticed; readers of before ignore both keys."""
MERGE_RATIO = 4
"""Merge the newest run into the one before it once it is at least 1/MERGE_RATIO its size."""


@dataclass(frozen=True)
class RunOwner:
    """What a dedup run belongs to: a store (its identity, see
    :func:`~treestore.store.versions.store_owner`; None: a store without one), a
    source and a shard."""

    store: str | None
    source: str
    shard: int

    def to_bytes(self) -> bytes:
        """As a run's metadata keeps it (JSON)."""
        doc = {"store": self.store, "source": self.source, "shard": self.shard}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> RunOwner:
        """Read back :meth:`to_bytes`; ``ValueError`` if it is not such a document."""
        try:
            doc = json.loads(data)
            store = doc["store"]
            if store is not None and not isinstance(store, str):
                raise TypeError(f"store {store!r}")
            return cls(store, str(doc["source"]), int(doc["shard"]))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"its owner {data[:80]!r} is not valid ({exc})") from exc

    def accepts(self, found: RunOwner) -> bool:
        """Whether a run that says ``found`` may serve as this owner's (the stores are
        compared when both have an identity)."""
        same_store = self.store is None or found.store is None or self.store == found.store
        return same_store and (found.source, found.shard) == (self.source, self.shard)

    def differs_from(self, other: RunOwner) -> str:
        """This owner in words, saying its store when ``other``'s differs."""
        where = f"shard {self.shard} of source {self.source!r}"
        stores = self.store and other.store and self.store != other.store
        return f"{where} of store {self.store}" if stores else where


@dataclass(frozen=True)
class IndexRun:
    """One sorted run, opened (memory-mapped where the store is local); ``owner``: what it
    says it belongs to (None: written before runs said so, or not yet written)."""

    name: str
    hashes: np.ndarray
    keys: pa.Array
    owner: RunOwner | None = None

    @classmethod
    def open(cls, pages: PageStore, name: str, expected: RunOwner | None = None) -> IndexRun:
        """Open run ``name``, verifying its checksum and, when ``expected`` is given, that it
        belongs there; :class:`StoreError` if it is missing, unreadable, damaged or
        another shard's, source's or store's."""
        where = f"{pages.location}/{name}"
        if not pages.exists(name):
            raise StoreError(f"The dedup index run {where} is missing.")
        try:
            local = pages.local_path(name)
            if local is not None:
                source: pa.NativeFile = pa.memory_map(str(local))
            else:
                source = pa.BufferReader(pages.read(name))
            reader = ipc.open_file(source)
            table = reader.read_all()
            if table.schema != RUN_SCHEMA:
                raise ValueError(f"unexpected columns {table.schema.names}")
            hashes = _one_array(table.column("hash")).to_numpy(zero_copy_only=False)
            keys = _one_array(table.column("key"))
            metadata = reader.schema.metadata or {}
            checksum = None
            for key, hasher in _CHECKSUM_KEYS.items():
                recorded = metadata.get(key)
                if recorded is None:
                    continue
                checksum = _run_checksum(hashes, keys, hasher)
                if int(recorded, 16) != checksum:
                    raise ValueError("its columns fail their checksum")
                break
            owner = _read_owner(metadata, checksum)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise StoreError(f"The dedup index run {where} is damaged ({exc}).") from exc
        if expected is not None and owner is not None and not expected.accepts(owner):
            raise StoreError(
                f"The dedup index run {where} belongs to {owner.differs_from(expected)}, not to "
                f"{expected.differs_from(owner)}: it was moved or copied from elsewhere."
            )
        return cls(name, hashes, keys, owner)

    def __len__(self) -> int:
        return len(self.hashes)

    def contains(self, hashes: np.ndarray, keys: pa.Array, order: np.ndarray) -> np.ndarray:
        """Which (hash, key) pairs this run holds; ``order`` sorts ``hashes``."""
        found = np.zeros(len(hashes), dtype=bool)
        if not len(self.hashes) or not len(hashes):
            return found
        ordered = hashes[order]
        low = np.empty(len(hashes), dtype=np.int64)
        high = np.empty(len(hashes), dtype=np.int64)
        low[order] = np.searchsorted(self.hashes, ordered, side="left")
        high[order] = np.searchsorted(self.hashes, ordered, side="right")
        width = high - low
        single = np.flatnonzero(width == 1)
        if len(single):
            same = pc.equal(self.keys.take(pa.array(low[single])), keys.take(pa.array(single)))
            found[single] = pc.fill_null(same, False).to_numpy(zero_copy_only=False)
        for row in np.flatnonzero(width > 1):  # hash collisions: compare every candidate
            wanted = keys[int(row)]
            found[row] = any(self.keys[i] == wanted for i in range(low[row], high[row]))
        return found


def sorted_run(hashes: np.ndarray, keys: pa.Array) -> pa.Table:
    """A run's table: the pairs sorted by hash (and by key among equal hashes)."""
    table = pa.table({"hash": pa.array(hashes, pa.int64()), "key": keys.cast(pa.large_binary())})
    return table.take(pa.array(hash_order(np.asarray(hashes, np.int64), table.column("key")))).cast(
        RUN_SCHEMA
    )


def hash_order(hashes: np.ndarray, keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The order that sorts pairs by hash, then key, then position: numpy's quicksort of
    the hashes (4x its stable sort); stretches of equal hashes (repeats) put back in
    position order; and only the rare stretches whose keys differ (collisions) sorted
    by key."""
    order = np.argsort(hashes)
    ordered = hashes[order]
    ties = np.flatnonzero(ordered[1:] == ordered[:-1])
    if not len(ties):
        return order
    tied = np.zeros(len(order), dtype=bool)
    tied[ties] = tied[ties + 1] = True
    members = np.flatnonzero(tied)
    order[members] = order[members][np.lexsort((order[members], ordered[members]))]
    differ = pc.fill_null(
        pc.not_equal(keys.take(pa.array(order[ties + 1])), keys.take(pa.array(order[ties]))),
        True,
    ).to_numpy(zero_copy_only=False)
    done = 0  # the end of the last stretch sorted: a stretch is sorted once
    for tie in ties[differ].tolist():  # a collision: sort its stretch of equal hashes
        if tie < done:
            continue
        start, end = tie, tie + 2
        while start > 0 and ordered[start - 1] == ordered[tie]:
            start -= 1
        while end < len(ordered) and ordered[end] == ordered[tie]:
            end += 1
        done = end
        rows = order[start:end]
        texts = keys.take(pa.array(rows)).to_pylist()
        order[start:end] = [row for _, row in sorted(zip(texts, rows.tolist(), strict=True))]
    return order


def _run_checksum(
    hashes: np.ndarray, keys: pa.Array, hasher: Callable[[], Any] = xxhash.xxh3_64
) -> int:
    """The checksum (XXH3 unless ``hasher`` says) of a run's columns: the hashes, then the
    keys' offsets (from 0) and bytes."""
    digest = hasher()
    digest.update(np.ascontiguousarray(hashes, dtype=np.int64).data)
    keys = keys.cast(pa.large_binary())
    buffers = keys.buffers()
    offsets = np.frombuffer(buffers[1], np.int64)[keys.offset : keys.offset + len(keys) + 1]
    if len(offsets):
        # offsets usually start at 0: hash them in place (rebasing a 100M-key index's
        # offsets allocated 800 MB on every open)
        digest.update((offsets if offsets[0] == 0 else offsets - offsets[0]).data)
        if buffers[2] is not None:
            digest.update(memoryview(buffers[2])[int(offsets[0]) : int(offsets[-1])])
    return digest.intdigest()


def _owner_seal(owner: bytes, checksum: int) -> str:
    """The seal of a run's owner: the XXH3 of its bytes and of its columns' checksum."""
    return xxhash.xxh3_64_hexdigest(owner + f"/{checksum:016x}".encode())


def _read_owner(metadata: Mapping[bytes, bytes], checksum: int | None) -> RunOwner | None:
    """The owner a run's metadata records, its seal verified (None: it records none)."""
    owner, sealed = metadata.get(_OWNER_KEY), metadata.get(_OWNER_SEAL_KEY)
    if owner is None and sealed is None:
        return None
    if owner is None or sealed is None or checksum is None:
        raise ValueError("it records what it belongs to without its seal")
    if sealed.decode(errors="replace") != _owner_seal(owner, checksum):
        raise ValueError("what it records it belongs to fails its checksum")
    return RunOwner.from_bytes(owner)


def _write_run(pages: PageStore, name: str, table: pa.Table, owner: RunOwner | None = None) -> None:
    batches = table.cast(RUN_SCHEMA).combine_chunks().to_batches()[:1]
    hashes = batches[0].column(0).to_numpy() if batches else np.zeros(0, np.int64)
    keys = batches[0].column(1) if batches else pa.array([], pa.large_binary())
    checksum = _run_checksum(hashes, keys)
    metadata = {_CHECKSUM_KEY: f"{checksum:016x}".encode()}
    if owner is not None:
        metadata[_OWNER_KEY] = owner.to_bytes()
        metadata[_OWNER_SEAL_KEY] = _owner_seal(owner.to_bytes(), checksum).encode()
    schema = RUN_SCHEMA.with_metadata(metadata)
    with pages.writer(name) as out, ipc.new_file(out, schema) as writer:
        # one record batch: opening the run then maps its columns without a copy
        for batch in batches:
            writer.write_batch(batch)


def _merged(runs: Sequence[IndexRun]) -> IndexRun:
    """One unnamed in-memory run holding every pair of ``runs``: a newer run's pairs
    inserted into the older run's in one pass where no hash is in both (a load's keys are
    never in the index, and 64-bit hashes rarely meet), else everything sorted again."""
    if len(runs) == 2:
        inserted = _inserted(*runs)
        if inserted is not None:
            return inserted
    table = sorted_run(
        np.concatenate([run.hashes for run in runs]), pa.concat_arrays([r.keys for r in runs])
    )
    return IndexRun("", *_columns(table))


def _inserted(older: IndexRun, newer: IndexRun) -> IndexRun | None:
    """``newer``'s pairs inserted among ``older``'s (both sorted by hash, then key): the run
    :func:`sorted_run` makes of both, or None where a hash is in both runs or a key is null
    (the order among equal hashes is then the keys', which a sort decides)."""
    if older.keys.null_count or newer.keys.null_count:
        return None
    places = np.searchsorted(older.hashes, newer.hashes, side="left")
    inside = np.flatnonzero(places < len(older.hashes))
    if (older.hashes[places[inside]] == newer.hashes[inside]).any():
        return None
    return IndexRun(
        "",
        native.inserted_ints(older.hashes, places, newer.hashes),
        native.inserted_strings(older.keys, places, newer.keys),
    )


def _merge_tail(runs: list[IndexRun]) -> list[IndexRun]:
    """Merge the newest run into the one before while it is at least 1/MERGE_RATIO its size."""
    while len(runs) >= 2 and len(runs[-1]) * MERGE_RATIO >= len(runs[-2]):
        newer, older = runs.pop(), runs.pop()
        runs.append(_merged([older, newer]))
    return runs


class ShardIndex:
    """One shard's dedup index for one source: its runs plus the keys added by this load.

    ``owner`` (the store, source and shard it is) is checked against what each run says
    it belongs to as it is opened (a run of elsewhere is a :class:`StoreError`), and
    recorded in the runs it writes.
    """

    def __init__(
        self, pages: PageStore, folder: str, runs: Sequence[str], owner: RunOwner | None = None
    ) -> None:
        self.pages = pages
        self.folder = folder
        self.owner = owner
        self.runs = [IndexRun.open(pages, name, owner) for name in runs]
        self._added: list[IndexRun] = []  # this load's keys, as in-memory sorted runs

    def seen(self, hashes: np.ndarray, keys: pa.Array) -> np.ndarray:
        """Which keys are in the index already (earlier loads, or added by this load)."""
        return self._search([*self.runs, *self._added], *_prepared(hashes, keys))

    def classify(self, hashes: np.ndarray, keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """(repeat within this load, key of an earlier load) per key; adds the other keys."""
        hashes, keys, order = _prepared(hashes, keys)
        earlier = self._search(self.runs, hashes, keys, order)
        within = ~self.first_of_batch(hashes, keys) | self._search(self._added, hashes, keys, order)
        within &= ~earlier
        kept = ~(earlier | within)
        self.add(hashes[kept], keys.filter(pa.array(kept)))
        return within, earlier

    @staticmethod
    def _search(
        runs: Sequence[IndexRun], hashes: np.ndarray, keys: pa.Array, order: np.ndarray
    ) -> np.ndarray:
        found = np.zeros(len(hashes), dtype=bool)
        for run in runs:
            found |= run.contains(hashes, keys, order)
        return found

    @staticmethod
    def first_of_batch(hashes: np.ndarray, keys: pa.Array) -> np.ndarray:
        """True for the first occurrence of each key within the batch, False for repeats."""
        first = np.ones(len(keys), dtype=bool)
        if len(keys) < 2:
            return first
        order = hash_order(hashes, keys)  # equal keys end up adjacent, earliest row first
        candidates = np.flatnonzero(hashes[order][1:] == hashes[order][:-1]) + 1
        if len(candidates):
            later = keys.take(pa.array(order[candidates]))
            earlier = keys.take(pa.array(order[candidates - 1]))
            same = pc.fill_null(pc.equal(later, earlier), False).to_numpy(zero_copy_only=False)
            first[order[candidates[same]]] = False
        return first

    def add(self, hashes: np.ndarray, keys: pa.Array) -> None:
        """Add keys (distinct, and not in the index) to this load's new run."""
        if len(hashes):
            table = sorted_run(np.asarray(hashes, dtype=np.int64), keys)
            self._added = _merge_tail([*self._added, IndexRun("", *_columns(table))])

    @property
    def added(self) -> int:
        """How many keys this load has added so far."""
        return sum(len(run) for run in self._added)

    def commit(self) -> tuple[str, ...]:
        """Write this load's keys as a new run (merging runs as needed); return the run names.

        Old runs are never rewritten in place: a merge writes a new file, and
        the caller publishes the new list of runs.
        """
        if self._added:
            runs = _merge_tail([*self.runs, _merged(self._added)])
            self._added = []
            for place, run in enumerate(runs):
                if not run.name:
                    name = f"{self.folder}/{uuid.uuid4().hex}.arrow"
                    table = pa.table({"hash": run.hashes, "key": run.keys})
                    _write_run(self.pages, name, table, self.owner)
                    runs[place] = IndexRun(name, run.hashes, run.keys, self.owner)
            self.runs = runs
        return tuple(run.name for run in self.runs)


def _prepared(hashes: np.ndarray, keys: pa.Array) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """Hashes as int64, keys as the runs store them, and the order that sorts the hashes."""
    hashes = np.asarray(hashes, dtype=np.int64)
    return hashes, keys.cast(pa.large_binary()), np.argsort(hashes)


def _columns(table: pa.Table) -> tuple[np.ndarray, pa.Array]:
    return table.column("hash").to_numpy(), _one_array(table.column("key"))


def _one_array(column: pa.ChunkedArray) -> pa.Array:
    """``column`` as one array: its only chunk as it is (a run is written as one record
    batch, so this maps the file without a copy; ``combine_chunks`` copies even one chunk,
    which made opening an index cost a copy of all of it), else the chunks concatenated."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


@dataclass(frozen=True)
class DedupManifest:
    """Which runs make up each source's per-shard index, and which data version they cover.

    The data of a load is published first (its store version), then this
    manifest with ``covers`` set to that version; a crash in between leaves
    ``covers`` behind the store's version, which the next load detects and
    repairs from the input files of the versions not covered.

    Attributes:
        covers: the store version whose loads the index includes.
        sources: source name -> {"keys": its dedup key fields, "shards": shard -> runs}.
    """

    covers: int = 0
    sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def runs(self, source: str) -> dict[int, tuple[str, ...]]:
        """The runs of each shard of ``source``'s index."""
        shards = self.sources.get(source, {}).get("shards", {})
        return {int(shard): tuple(runs) for shard, runs in shards.items()}

    def keys(self, source: str) -> tuple[str, ...] | None:
        """The dedup key fields ``source``'s index was built with (None: no index)."""
        found = self.sources.get(source)
        return None if found is None else tuple(found["keys"])

    def with_source(
        self, source: str, keys: Sequence[str], runs: Mapping[int, Sequence[str]]
    ) -> DedupManifest:
        """A copy with ``source``'s index replaced."""
        shards = {str(shard): list(names) for shard, names in sorted(runs.items()) if names}
        entry = {"keys": list(keys), "shards": shards}
        return DedupManifest(self.covers, {**self.sources, source: entry})

    def covering(self, version: int) -> DedupManifest:
        """A copy that covers ``version``."""
        return DedupManifest(version, self.sources)

    def referenced(self) -> set[str]:
        """Every run file the index uses."""
        return {
            run
            for entry in self.sources.values()
            for runs in entry["shards"].values()
            for run in runs
        }


def read_dedup_manifest(pages: PageStore) -> DedupManifest | None:
    """The published dedup manifest; None if there is none; :class:`StoreError` if unreadable."""
    if not pages.exists(DEDUP_INDEX):
        return None
    try:
        doc, sealed = unseal(pages.read(DEDUP_INDEX))
        manifest = DedupManifest(int(doc["covers"]), dict(doc["sources"]))
        since = sealed_from(pages)
        if not sealed and since is not None and manifest.covers >= since:
            raise ValueError(
                f"it carries no checksum, though {CONFIG} says the store seals its dedup index "
                f"from version {since} on: another program wrote it again, or it was damaged"
            )
        named: set[str] = set()
        for name in manifest.sources:
            manifest.keys(name)
            for shard, runs in sorted(manifest.runs(name).items()):
                for run in runs:
                    if not isinstance(run, str):
                        raise TypeError(f"source {name!r} shard {shard} names a run by {run!r}")
                    if run in named:
                        raise ValueError(f"the run {run} is named twice")
                    named.add(run)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StoreError(f"{pages.location}/{DEDUP_INDEX} is damaged ({exc}).") from exc
    return manifest


def publish_dedup_manifest(pages: PageStore, manifest: DedupManifest) -> None:
    """Replace the published dedup manifest atomically (sealed with its checksum)."""
    doc = {"covers": manifest.covers, "sources": manifest.sources}
    pages.write(DEDUP_INDEX, seal(json.dumps(doc, indent=1, sort_keys=True).encode()))


def unused_dedup_runs(pages: PageStore) -> list[str]:
    """Run files under ``dedup/`` that the published manifest does not use (call under the lock)."""
    try:
        manifest = read_dedup_manifest(pages)
    except StoreError:
        return []  # the next load rebuilds it; keep the files until then
    used = manifest.referenced() if manifest else set()
    return [name for name in pages.list(DEDUP) if name != DEDUP_INDEX and name not in used]


_REBUILT = " The next load rebuilds the dedup index from the files already loaded."


def check_dedup_index(pages: PageStore, notes: list[str] | None = None) -> list[str]:
    """Problems of the published dedup index, one line each: a damaged manifest, runs that
    are missing, unreadable, damaged, out of order or another shard's, source's or store's
    (each says the next load rebuilds it). ``notes``, when given, gets how many runs were
    written before runs said what they belong to (they cannot be placed)."""
    try:
        manifest = read_dedup_manifest(pages)
    except StoreError as exc:
        return [str(exc) + _REBUILT]
    if manifest is None:
        return []
    try:
        store = store_owner(read_config(pages))
    except StoreError:
        store = None  # a damaged store.json, which check reports: runs checked without it
    owners: dict[str, RunOwner] = {}  # each run the index uses -> what it must belong to
    for source in sorted(manifest.sources):
        for shard, runs in manifest.runs(source).items():
            owners.update(dict.fromkeys(runs, RunOwner(store, source, shard)))
    problems, unplaced = [], 0
    for name, owner in sorted(owners.items()):
        try:
            run = IndexRun.open(pages, name, owner)
        except StoreError as exc:
            problems.append(str(exc) + _REBUILT)
            continue
        unplaced += run.owner is None
        if len(run) > 1 and bool((run.hashes[1:] < run.hashes[:-1]).any()):
            problems.append(
                f"The dedup index run {pages.location}/{name} is out of order.{_REBUILT}"
            )
    if unplaced and notes is not None:
        notes.append(
            f"{unplaced} dedup index run(s) were written before runs recorded what they belong "
            "to: a run moved between shards cannot be found among them (to rebuild the index "
            f"with runs that record it, delete {pages.location}/{DEDUP}/ before the next load)."
        )
    return problems
