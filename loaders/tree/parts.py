"""A big shard's records built in parts: the same tree, at a fraction of the CPU.

Building a tree costs random reads of structures that grow with it (the memtable's key
index, its columns, the batches' groups). A shard of a few million records outgrows the
processor's caches, and each record then costs two to three times what it costs in a
small shard. So a load splits a big shard's records by the name of the first node that
tells records apart (the *split element*: in the seed's job the UID under ``root``), and
applies one part's records after another, each in record order, the tree's memtable
sealed and emptied between parts but for the shared upper nodes
(:meth:`~treestore.storage.tree.ShardTree.end_part`): each part's structures are small
again, and the parts are written together as one run.

The tree is the same as one built whole, but for node ids (a node's id is its place in
the order nodes are made): every node below a split node is visited only by records with
that split name, which are all in one part and in their order, so update-only visits,
``once``, data attachments and pending records see what they would see whole. The nodes
above the split (the shared upper nodes) are visited by every part; their hits add up in
any order. :func:`split_of` finds the split element and refuses jobs where that would
not hold (an update-only, ``once`` or data element above it; branches that split on
different fields or defaults); a list in the split field makes the shard's load build
the rest whole.

While a shard task reads its records, a big shard's records are held by part
(:class:`HeldParts`: in memory up to a budget, the rest in local files), and built part
by part when the reading is done.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from loaders.job.model import ElementSpec
from loaders.tree.builder import TreeBuilder
from treestore import native
from treestore.arrays import grouped_order
from treestore.storage.keyfilter import KeyHashes
from treestore.storage.reading import ROOT_ID, ROOT_KEY
from treestore.storage.tree import ShardTree

__all__ = [
    "PARTS_FROM",
    "PART_RECORDS",
    "HeldParts",
    "Split",
    "shard_parts",
    "shared_keys",
    "split_of",
]

NamePath = tuple[str, ...]
"""A node's path below the root, by the names of its nodes."""

PART_RECORDS = 250_000
"""About how many records of a big shard one part holds. Measured on the seed's rows at
10x (16 shards of 6.9M records, two tasks at a time on 2 cores), the shard tasks' CPU:
139 s built whole, 93 s in parts of 600,000, 81-89 s of 300,000, 80 s of 150,000."""
PARTS_FROM = 1_000_000
"""Shards of fewer records are built whole: their structures fit the caches already (the
seed's rows at 1x, 690,000 records a shard: 0.71 us of CPU a record whole, 0.72-0.77 us
in 2 or 5 parts)."""
_PART_SEED = 0x7265_6570  # the parts' hash differs from the shards' (Spark's seed 42)
_APPLY_ROWS = 500_000
"""Rows of one source applied at a time when a part is built (a task's queue size)."""


@dataclass(frozen=True)
class Split:
    """Where a job's records part ways: every path passes plain shared nodes and then a
    node named by ``field`` (null: ``default``), below which only records with that name go."""

    field: str
    default: str | None
    shared: tuple[NamePath, ...] = ((),)
    """The paths of the shared nodes above the split (const names from the root)."""

    def names(self, table: pa.Table) -> pa.Array:
        """Each record's split name (null: it stops above the split)."""
        column = table.column(self.field)
        values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if self.default is not None:
            values = pc.fill_null(values, self.default)
        if values.type != pa.string():
            values = values.cast(pa.string())
        return values

    def parts_of(self, table: pa.Table, parts: int) -> np.ndarray:
        """Each record's part, of ``parts``: a hash of its split name."""
        hashed = native.xxhash64(self.names(table), _PART_SEED)
        return np.mod(hashed, parts).astype(np.int32)  # type: ignore[no-any-return]


def _plain(element: ElementSpec) -> bool:
    """Whether an element above the split adds the same hits in any order: it creates its
    nodes, visits them every time, and keeps no data."""
    return element.create and not element.once and not element.data and not element.pending


def split_of(elements: Sequence[ElementSpec]) -> Split | None:
    """The split of a job's tree (see the module's docstring), or None when its records
    cannot be built in parts: no element tells records apart, or an element above the
    one that does depends on record order."""
    found = _split_in(elements, ((),))
    return found if isinstance(found, Split) else None


def _split_in(elements: Sequence[ElementSpec], above: tuple[NamePath, ...]) -> Split | bool:
    """The split of one list of elements under the shared nodes ``above`` (their paths);
    False when the list refuses one."""
    paths = above
    for element in elements:
        if element.label is not None:
            if not (element.create and not element.data):
                return False
            paths = tuple((*p, element.label) for p in paths)
        if element.kind == "const":
            if not _plain(element):
                return False
            paths = tuple((*p, element.value or "") for p in paths)
            continue
        if element.kind == "value":
            return Split(element.key or "", element.value, paths)
        if not _plain(element):  # a branch: each list must split on the same field
            return False
        splits = [_split_in(branch, paths) for branch in element.branches]
        kinds = {(s.field, s.default) if isinstance(s, Split) else None for s in splits}
        if len(kinds) != 1 or None in kinds:
            return False
        field, default = kinds.pop()  # type: ignore[misc]
        shared = {p for s in splits if isinstance(s, Split) for p in s.shared}
        return Split(field, default, tuple(sorted(shared)))
    return False


def shared_keys(tree: ShardTree, split: Split) -> KeyHashes:
    """The keys of the shared nodes the tree's memtable holds: the internal root's and
    those on the paths above the split."""
    memtable = tree.memtable
    parents, names = [ROOT_KEY[0]], [ROOT_KEY[1]]
    for path in split.shared:
        parent = ROOT_ID
        for name in path:
            slot = memtable.slot((parent, name))
            if slot is None:
                break
            parents.append(parent)
            names.append(name)
            parent = int(memtable.ids[slot])
    return KeyHashes(np.array(parents, dtype=np.int64), pa.array(names, pa.string()))


def shard_parts(rows: dict[int, int], builder: TreeBuilder) -> dict[int, int]:
    """How many parts each shard built in parts has, given the shards' records (``rows``):
    one per :data:`PART_RECORDS` records, for shards of :data:`PARTS_FROM` records or more
    of a job whose records can be split."""
    if split_of(builder.elements) is None:
        return {}
    return {
        shard: round(records / PART_RECORDS)
        for shard, records in rows.items()
        if records >= PARTS_FROM
    }


class HeldParts:
    """A shard's records held until they are built, part by part, each part's records in
    their order with the source each came from: in memory up to ``memory_bytes``, the rest
    in one local Arrow file per part (in ``SPARK_LOCAL_DIRS``' first folder when Spark
    names one, else the system's temporary folder).

    Args:
        split: where the records part ways.
        parts: how many parts.
        memory_bytes: how many bytes of records are held in memory.
    """

    def __init__(self, split: Split, parts: int, memory_bytes: int = 0) -> None:
        self.split, self.parts, self.memory_bytes = split, parts, memory_bytes
        self._folder: Path | None = None
        self._kept: list[list[tuple[pa.Table, int]]] = [[] for _ in range(parts)]
        self._kept_bytes = 0
        self._writers: list[pa.ipc.RecordBatchStreamWriter | None] = [None] * parts
        self._sources: list[list[int]] = [[] for _ in range(parts)]
        self.rows = 0

    def takes(self, table: pa.Table) -> bool:
        """Whether ``table``'s records can be held: a list in the split field would fan a
        record out over several parts."""
        return not pa.types.is_list(table.schema.field(self.split.field).type)

    def hold(self, table: pa.Table, source: int) -> None:
        """Hold the records of ``table`` (one source's, in their order; :meth:`takes`) in
        their parts."""
        if not table.num_rows:
            return
        numbers = self.split.parts_of(table, self.parts)
        order = grouped_order(numbers)
        bounds = np.searchsorted(numbers[order], np.arange(self.parts + 1))
        ordered = table.take(pa.array(order))
        in_memory = self._kept_bytes + ordered.nbytes <= self.memory_bytes
        for part in range(self.parts):
            start, stop = int(bounds[part]), int(bounds[part + 1])
            if stop > start:
                records = ordered.slice(start, stop - start)
                if in_memory:
                    self._kept[part].append((records, source))
                else:
                    self._write(part, records, source)
        self._kept_bytes += ordered.nbytes if in_memory else 0
        self.rows += table.num_rows

    def _write(self, part: int, records: pa.Table, source: int) -> None:
        writer = self._writers[part]
        if writer is None:
            if self._folder is None:
                self._folder = Path(tempfile.mkdtemp(prefix="treestore-parts-", dir=_local_dir()))
            path = self._folder / f"part-{part:04d}.arrows"
            writer = self._writers[part] = pa.ipc.new_stream(str(path), records.schema)
        for batch in records.combine_chunks().to_batches():
            writer.write_batch(batch)
            self._sources[part].append(source)

    def parts_in_order(self) -> Iterator[Iterator[tuple[pa.Table, int]]]:
        """Each part's records (parts in order): tables of one source, in their order,
        with their source; a part's records are let go as it is read."""
        for part in range(self.parts):
            if self._kept[part] or self._writers[part] is not None:
                yield _by_source(self._read(part))
        self.rows = 0

    def _read(self, part: int) -> Iterator[tuple[pa.Table, int]]:
        kept, self._kept[part] = self._kept[part], []
        yield from kept  # held in memory first: the files hold what came after
        del kept
        writer = self._writers[part]
        if writer is None:
            return
        writer.close()
        self._writers[part] = None
        assert self._folder is not None
        path = self._folder / f"part-{part:04d}.arrows"
        with pa.ipc.open_stream(str(path)) as reader:
            for batch, source in zip(reader, self._sources[part], strict=True):
                yield pa.Table.from_batches([batch]), source
        path.unlink()

    def close(self) -> None:
        """Let go of the held records and remove their files."""
        for writer in self._writers:
            if writer is not None:
                writer.close()
        self._writers = [None] * self.parts
        self._kept = [[] for _ in range(self.parts)]
        self._sources = [[] for _ in range(self.parts)]
        self.rows = self._kept_bytes = 0
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


def _by_source(
    tables: Iterator[tuple[pa.Table, int]],
) -> Iterator[tuple[pa.Table, int]]:
    """Consecutive tables of one source put together, up to :data:`_APPLY_ROWS` rows."""
    held: list[pa.Table] = []
    held_source, rows = -1, 0
    for table, source in tables:
        if held and (source != held_source or rows >= _APPLY_ROWS):
            yield pa.concat_tables(held), held_source
            held, rows = [], 0
        held.append(table)
        held_source, rows = source, rows + table.num_rows
    if held:
        yield pa.concat_tables(held), held_source


def _local_dir() -> str | None:
    """Where a Spark executor keeps its scratch files (``SPARK_LOCAL_DIRS``' first folder),
    if Spark says; else None (the system's temporary folder)."""
    folders = [f for f in os.environ.get("SPARK_LOCAL_DIRS", "").split(",") if f.strip()]
    return folders[0].strip() if folders else None
