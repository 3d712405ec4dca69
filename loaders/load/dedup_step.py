"""Duplicate-free incremental loads: the per-shard dedup index at work in a load.

For a source with ``"dedup": {"keys": [...]}``, every record gets two columns
computed by Spark: its exact key (``__dkey``: the key fields as a JSON object)
and a 64-bit hash of it (``__dhash``). In the shard task, per batch and per
source (:class:`ShardDedup`): a record whose key repeats one met earlier in
this load is a *duplicate within the load*, a record whose key the shard's
index holds is a *duplicate of an earlier load*; the others are kept, applied
to the tree, and their keys go into a new run of the index
(:mod:`treestore.store.dedup_index`). The work is vectorized (Arrow sorts and numpy
searches over the batch); the index runs are memory-mapped, so a batch reads
only the parts of the index its keys fall in.

Before a load, :func:`prepare_index` brings the index up to the store's
version: with no index, a damaged one, one with a run of another shard, source or
store, one built for other key fields, or one ahead of the store's version
(``CURRENT`` was rolled back: its runs hold keys of versions the load does not
start from, which it would wrongly drop), it is rebuilt from the input files
already loaded (with a message); when a crash came between a load's data and its
index, the index catches up from the input files of the versions it does not
cover. After the load's data is published, :func:`publish_index` publishes the
index that covers it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from loaders.formats.readers import REJECT
from loaders.job.model import JobSpec, SourceSpec
from loaders.listing.identity import location_of
from loaders.load.inputs import InputFile, list_input_files, read_source
from loaders.load.shard_frames import SHARD, load_partitions, partition_by_shard, shard_column
from loaders.route.columns import DHASH, DKEY
from treestore.arrays import distinct_sorted
from treestore.errors import LoadError, StoreError
from treestore.filesystems import is_file
from treestore.settings import task_started
from treestore.spark import spark_errors
from treestore.storage.pagestore import PageStore
from treestore.store.dedup_index import (
    DedupManifest,
    RunOwner,
    ShardIndex,
    publish_dedup_manifest,
    read_dedup_manifest,
)
from treestore.store.layout import CURRENT, dedup_folder
from treestore.store.versions import StoreWriter, read_config, store_owner

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "DHASH",
    "DKEY",
    "EARLIER",
    "WITHIN",
    "BatchDedup",
    "IndexPass",
    "ShardDedup",
    "dedup_columns",
    "index_files",
    "key_hash",
    "prepare_index",
    "publish_index",
]

WITHIN, EARLIER = "duplicates_in_load", "duplicates_of_earlier_loads"


def dedup_columns(frame: DataFrame, source: SourceSpec) -> DataFrame:
    """Add the exact dedup key and its hash (nulls when the source has no ``dedup``)."""
    from pyspark.sql import functions as F

    if not source.dedup_keys:
        return frame.withColumn(DKEY, F.lit(None).cast("string")).withColumn(
            DHASH, F.lit(None).cast("long")
        )
    fields = [
        (F.col(f"`{k}`") if k in frame.columns else F.lit(None).cast("string")).alias(str(i))
        for i, k in enumerate(source.dedup_keys)
    ]
    key = F.to_json(F.struct(*fields))
    return frame.withColumn(DKEY, key).withColumn(DHASH, key_hash(key))


def key_hash(key: Column) -> Column:
    """The 64-bit hash that orders the index (Spark's ``xxhash64`` of the key text).

    Only its spread matters for speed: equality is decided on the exact key, so
    a weaker hash (a test swaps in a 1-bit one) changes no result.
    """
    from pyspark.sql import functions as F

    return F.xxhash64(key)


@dataclass
class ShardDedup:
    """One shard's dedup work in a load task, for every dedup source of the job.

    Attributes:
        pages: the store.
        shard: the shard number.
        sources: source order -> (name, runs of this shard's index).
        store: the store's identity, which its runs must record (and new runs do).
    """

    pages: PageStore
    shard: int
    sources: Mapping[int, tuple[str, tuple[str, ...]]]
    store: str | None = None
    indexes: dict[int, ShardIndex] = field(default_factory=dict)

    def index(self, order: int) -> ShardIndex:
        """The index of the source at ``order`` (opened on first use)."""
        found = self.indexes.get(order)
        if found is None:
            name, runs = self.sources[order]
            owner = RunOwner(self.store, name, self.shard)
            found = self.indexes[order] = ShardIndex(
                self.pages, dedup_folder(name, self.shard), runs, owner
            )
        return found

    def classify(
        self, orders: np.ndarray, hashes: pa.Array, keys: pa.Array
    ) -> tuple[np.ndarray, np.ndarray]:
        """(duplicate within the load, duplicate of an earlier load) per row; adds kept keys."""
        within = np.zeros(len(orders), dtype=bool)
        earlier = np.zeros(len(orders), dtype=bool)
        for order in distinct_sorted(orders):
            if int(order) not in self.sources:
                continue
            rows = np.flatnonzero(orders == order)
            picked = pa.array(rows)
            row_hashes = pc.take(hashes, picked).to_numpy(zero_copy_only=False)
            row_keys = pc.take(keys, picked)
            within[rows], earlier[rows] = self.index(int(order)).classify(row_hashes, row_keys)
        return within, earlier

    def commit(self) -> dict[str, list[str]]:
        """Write the new runs; return each touched source's runs for this shard."""
        return {
            self.sources[order][0]: list(index.commit()) for order, index in self.indexes.items()
        }


class BatchDedup:
    """The dedup work of one Spark task, which may see several shards' records.

    ``sources`` maps a source's order in the job to its name; ``runs`` gives,
    per source name, each shard's index runs before this load; ``store`` is the store's
    identity (:func:`~treestore.store.versions.store_owner`).
    """

    def __init__(
        self,
        pages: PageStore,
        sources: Mapping[int, str],
        runs: Mapping[str, Mapping[int, tuple[str, ...]]],
        store: str | None = None,
    ) -> None:
        self.pages = pages
        self.sources = dict(sources)
        self.runs = runs
        self.store = store
        self.shards: dict[int, ShardDedup] = {}

    def classify(self, batch: pa.RecordBatch, orders: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(duplicate within the load, duplicate of an earlier load) for each row of ``batch``."""
        within = np.zeros(batch.num_rows, dtype=bool)
        earlier = np.zeros(batch.num_rows, dtype=bool)
        if not self.sources or not np.isin(orders, list(self.sources)).any():
            return within, earlier
        shards = batch.column(SHARD).to_numpy(zero_copy_only=False)
        for shard in distinct_sorted(shards):
            rows = np.flatnonzero(shards == shard)
            picked = pa.array(rows)
            dedup = self.shards.get(int(shard))
            if dedup is None:
                by_order = {
                    order: (name, self.runs.get(name, {}).get(int(shard), ()))
                    for order, name in self.sources.items()
                }
                dedup = ShardDedup(self.pages, int(shard), by_order, self.store)
                self.shards[int(shard)] = dedup
            within[rows], earlier[rows] = dedup.classify(
                orders[rows],
                pc.take(batch.column(DHASH), picked),
                pc.take(batch.column(DKEY), picked),
            )
        return within, earlier

    def commit(self) -> dict[int, dict[str, list[str]]]:
        """Write every shard's new runs; return shard -> source name -> runs."""
        return {shard: dedup.commit() for shard, dedup in self.shards.items()}


def _index_task(
    pages: PageStore, name: str, base: Mapping[int, tuple[str, ...]], store: str | None
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Add records' keys to each shard's index; report new runs and duplicate counts."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_started()
        dedup = BatchDedup(pages, {0: name}, {name: base}, store)
        within = earlier = rows = 0
        for batch in batches:
            repeats, known = dedup.classify(batch, np.zeros(batch.num_rows, dtype=np.int64))
            within, earlier = within + int(repeats.sum()), earlier + int(known.sum())
            rows += batch.num_rows
        out = [(shard, runs.get(name, [])) for shard, runs in dedup.commit().items()]
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([s for s, _ in out] + [-1], pa.int32()),
                pa.array([r for _, r in out] + [[]], pa.list_(pa.string())),
                pa.array([0] * len(out) + [rows], pa.int64()),
                pa.array([0] * len(out) + [within], pa.int64()),
                pa.array([0] * len(out) + [earlier], pa.int64()),
            ],
            ["shard", "runs", "rows", "within", "earlier"],
        )

    return run


@dataclass(frozen=True)
class IndexPass:
    """What adding a batch of records to an index did: the new runs and the counts."""

    runs: dict[int, tuple[str, ...]]
    rows: int
    within: int
    earlier: int

    @property
    def kept(self) -> int:
        """Records that were neither kind of duplicate."""
        return self.rows - self.within - self.earlier


def index_files(
    spark: SparkSession,
    job: JobSpec,
    pages: PageStore,
    source: SourceSpec,
    files: list[InputFile],
    base: Mapping[int, tuple[str, ...]],
) -> IndexPass:
    """Add the keys of ``files`` to ``source``'s index (from the runs ``base``); nothing published.

    The same per-shard work as a load (shards, exact keys, vectorized checks
    against the runs, one new run per shard), without the trees: it rebuilds
    and catches up indexes, and ``bench/dedup.py`` times it.
    """
    from pyspark.sql import functions as F

    fields = [*source.dedup_keys, *([source.shard_by] if source.shard_by else [])]
    frame = read_source(spark, source, files, fields).where(F.col(REJECT).isNull())
    frame = dedup_columns(frame.withColumn(SHARD, shard_column(frame, source, job.shards)), source)
    # as many tasks as a load of these files runs (each serves several shards when the
    # files are small: a Python task costs tens of milliseconds to start)
    tasks = load_partitions(spark, job.shards, sum(f.size for f in files))
    arranged = partition_by_shard(spark, frame.select(SHARD, DKEY, DHASH), job.shards, tasks)
    task = _index_task(pages, source.name, base, store_owner(read_config(pages)))
    schema = "shard int, runs array<string>, rows long, within long, earlier long"
    with spark_errors(LoadError, f"Indexing the records of source {source.name!r}"):
        rows = arranged.mapInArrow(task, schema).collect()
    runs = dict(base)
    runs.update({row["shard"]: tuple(row["runs"]) for row in rows if row["shard"] >= 0})
    return IndexPass(
        runs,
        sum(row["rows"] for row in rows),
        sum(row["within"] for row in rows),
        sum(row["earlier"] for row in rows),
    )


def _loaded_files(writer: StoreWriter, source: SourceSpec, after: int = 0) -> list[InputFile]:
    """The input files of ``source`` loaded in versions after ``after``, where they are now:
    found by their path relative to the source's root (the inputs may have moved since),
    or, for entries of stores written before, by their absolute path."""
    entries = [
        (key, entry)
        for key, entry in sorted(writer.base.inputs.items())
        if entry.get("source") == source.name and int(entry.get("version", 0)) > after
    ]
    here: dict[str, InputFile] | None = None  # the source's files now, by relative path
    found: dict[str, InputFile] = {}
    missing = []
    for key, entry in entries:
        if "relative" in entry:
            if here is None:
                here = {f.relative: f for f in list_input_files(source)}
            now = here.get(str(entry["relative"]))
            if now is not None:
                found.setdefault(now.path, now)
                continue
        elif is_file(key):
            found.setdefault(key, InputFile(key, int(entry["size"]), int(entry["mtime_ns"])))
            continue
        missing.append(_where_now(key, entry, here))
    if missing:
        raise LoadError(
            f"The dedup index of source {source.name!r} must be rebuilt from the files already "
            f"loaded, but {len(missing)} of them are gone (first: {missing[0]}). Restore them, "
            "or load into a new store."
        )
    return list(found.values())


def _where_now(key: str, entry: Mapping[str, Any], here: dict[str, InputFile] | None) -> str:
    """Where a loaded file should be now: under its source's root as listed now."""
    if "relative" not in entry or not here:
        return location_of(key, entry)
    root = next(iter(here.values())).root
    return location_of(key, {**entry, "root": root})


def prepare_index(
    spark: SparkSession, job: JobSpec, writer: StoreWriter, log: Callable[[str], None]
) -> DedupManifest:
    """The dedup index, brought up to the store's version (rebuilt or caught up as needed);
    call it under the store's lock. Runs that say they belong to another shard, source or
    store (``writer.owner``) make their source's index be rebuilt."""
    sources = [s for s in job.sources if s.dedup_keys]
    version = writer.base.version
    store = writer.owner
    try:
        manifest = read_dedup_manifest(writer.pages)
    except StoreError as exc:
        log(f"warning: {exc} It is rebuilt from the files already loaded.")
        manifest = None
    ahead = ""  # why no source's runs can be used: they hold keys of later versions
    if manifest is not None and manifest.covers > version:
        ahead = (
            f"it covers version {manifest.covers}, but {CURRENT} names version {version} "
            "(it was rolled back)"
        )
        manifest = None
    current = manifest if manifest is not None else DedupManifest(covers=version)
    changed = (manifest is None and version > 0) or bool(ahead)
    for source in sources:
        reason = ahead or _rebuild_reason(writer.pages, current, source, version, store)
        if reason:
            files = _loaded_files(writer, source)
            if files:
                log(
                    f"dedup index of source {source.name!r}: {reason}; rebuilding it from "
                    f"{len(files)} loaded file(s)"
                )
            runs = index_files(spark, job, writer.pages, source, files, {}).runs if files else {}
            current, changed = current.with_source(source.name, source.dedup_keys, runs), True
        elif current.covers < version:
            # behind the data: loads of other jobs (nothing to add), or a load that
            # stopped between its data and its index (its files' keys are missing)
            files = _loaded_files(writer, source, after=current.covers)
            if not files:
                continue
            log(
                f"dedup index of source {source.name!r}: the last load stopped between its "
                f"data and its index; catching up from {len(files)} file(s)"
            )
            base = current.runs(source.name)
            runs = index_files(spark, job, writer.pages, source, files, base).runs
            current, changed = current.with_source(source.name, source.dedup_keys, runs), True
    current = current.covering(version)
    if changed or (manifest is not None and manifest.covers != version):
        publish_dedup_manifest(writer.pages, current)
    return current


def _rebuild_reason(
    pages: PageStore, manifest: DedupManifest, source: SourceSpec, version: int, store: str | None
) -> str:
    """Why ``source``'s index must be rebuilt ('' if it can be used as it is)."""
    keys = manifest.keys(source.name)
    if keys is None:
        return "no index yet" if version > 0 else ""
    if keys != source.dedup_keys:
        return f"it was built for keys {list(keys)}, the job now says {list(source.dedup_keys)}"
    for shard, runs in manifest.runs(source.name).items():
        for run in runs:
            if not pages.exists(run):
                return f"its run {run} is missing"
            try:
                ShardIndex(pages, "", (run,), RunOwner(store, source.name, shard))
            except StoreError as exc:
                return str(exc).rstrip(".")
    return ""


def publish_index(
    pages: PageStore,
    manifest: DedupManifest,
    job: JobSpec,
    new_runs: Mapping[int, Mapping[str, list[str]]],
    version: int,
) -> DedupManifest:
    """Publish the index covering ``version``: each shard's new runs replace its old ones."""
    for source in job.sources:
        if not source.dedup_keys:
            continue
        runs = manifest.runs(source.name)
        for shard, by_source in new_runs.items():
            if source.name in by_source:
                runs[shard] = tuple(by_source[source.name])
        manifest = manifest.with_source(source.name, source.dedup_keys, runs)
    manifest = manifest.covering(version)
    publish_dedup_manifest(pages, manifest)
    return manifest
