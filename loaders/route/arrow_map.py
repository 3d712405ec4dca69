"""The load's Arrow path: each reading task reads, maps and routes its records, no JVM between.

In the Spark path (:mod:`loaders.load.driver`) the records the Python tasks read cross
into Spark to be mapped and back to Python to be routed, twice the cost of converting
every record between Arrow and Spark's rows, which is most of a load's time outside the
trees. For a job whose filters all have Arrow forms
(:mod:`loaders.filters.arrow_compiler`) :class:`ArrowMap` computes the same columns in
the reading task itself, value for value: the shard
(:func:`~treestore.sharding.shards_of`, Spark's ``pmod(xxhash64(key), shards)``), the
source's order, the injected source name, the dedup key (Spark's ``to_json`` of the key
fields, :func:`json_keys`) and its hash (``xxhash64``), the map's verdict and fields, the
element filters and the readers' reject reasons; then the records go to their pieces
(:class:`~loaders.route.pieces.Router`). Lists travel as Arrow lists (empty ones as null,
as the Spark path's text does).

A job maps in Spark instead when a filter has no Arrow form, when a data attachment or a
pending time needs Spark's number tests (its rejects), or when a source shards by a
field that holds lists (Spark's text of a list): :meth:`ArrowMap.of` says why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from loaders.filters.arrow_compiler import ArrowCompiler, ArrowRecord, NoArrowForm
from loaders.filters.kinds import BundleKind, FieldMapping
from loaders.formats.readers import FILE_COLUMN, LINE, REJECT, TEXT, ReadSpec, read_files
from loaders.job.model import JobSpec
from loaders.listing.identity import fingerprint
from loaders.route.columns import DHASH, DKEY, KEEP, ORDER, SHARD
from loaders.route.pieces import Router
from loaders.tree.builder import TreeBuilder
from treestore import native
from treestore.filesystems import FilesystemSettings
from treestore.settings import task_started
from treestore.sharding import HASH_SEED
from treestore.storage.pagestore import PageStore

__all__ = ["ArrowMap", "SourceMap", "deal_files", "json_keys", "read_task"]

TEXTS = pa.list_(pa.string())


@dataclass(frozen=True)
class SourceMap:
    """What the Arrow map needs of one source: how its files are read, what it shards by,
    its dedup keys and injected name."""

    index: int
    read: ReadSpec
    shard_by: str | None
    dedup_keys: tuple[str, ...]
    inject: str | None


@dataclass(frozen=True)
class ArrowMap:
    """The Spark path's mapped columns, computed over a batch of one source's records."""

    sources: dict[int, SourceMap]
    shards: int
    fields: tuple[str, ...]
    """Every field a record of the load can hold (the union of the sources' fields)."""
    lists: frozenset[str]
    """The fields that hold lists."""
    filter_in: BundleKind | None
    mappings: tuple[FieldMapping, ...]
    filter_out: BundleKind | None
    element_filters: tuple[tuple[str, BundleKind], ...]
    key_fields: tuple[str, ...]
    paths: dict[int, str]
    """Each input file's path, by its number (the injected source name)."""

    @classmethod
    def of(
        cls,
        job: JobSpec,
        builder: TreeBuilder,
        sources: dict[int, ReadSpec],
        lists: frozenset[str],
        paths: dict[int, str],
    ) -> tuple[ArrowMap | None, str]:
        """The Arrow map of ``job``'s load of ``sources`` (each source's read spec, by its
        index), or None and why the load maps in Spark."""
        if builder.attachments and any(
            spec.kind in ("sum", "time") and spec.key is not None for spec in builder.attachments
        ):
            return None, "a sum or time data attachment (Spark tests its numbers)"
        if builder.pending_time is not None:
            return None, "a pending time (Spark tests its numbers)"
        maps = {}
        for index, read in sources.items():
            source = job.sources[index]
            if source.shard_by in read.list_fields:
                return None, f"source {source.name!r} shards by a field that holds lists"
            maps[index] = SourceMap(
                index, read, source.shard_by, source.dedup_keys, source.inject_source_name
            )
        names = {f for m in maps.values() for f in m.read.fields}
        names |= {m.inject for m in maps.values() if m.inject}
        names = {name for name in names if not name.startswith("__")}  # as the Spark path
        found = cls(
            sources=maps,
            shards=job.shards,
            fields=tuple(sorted(names)),
            lists=frozenset(lists & names),
            filter_in=job.map.filter_in,
            mappings=job.map.fields,
            filter_out=job.map.filter_out,
            element_filters=tuple(
                (builder.filter_columns[e.where], e.filter)
                for e in builder.filters
                if e.filter is not None
            ),
            key_fields=tuple(builder.key_fields),
            paths=paths,
        )
        try:
            for index, read in sources.items():  # every filter over no record: all have forms
                found.mapped(_empty_batch(read.schema()), index)
        except NoArrowForm as missing:
            return None, f"filter {missing} has no Arrow form"
        return found, ""

    def mapped(self, batch: pa.RecordBatch, source: int) -> pa.RecordBatch:
        """``batch`` (records of source ``source`` as its reader gives them) mapped: the
        columns the Spark path's tasks get, lists as lists."""
        spec, size = self.sources[source], batch.num_rows
        given = {name: batch.column(name) for name in spec.read.fields}
        if spec.inject:  # the file's path
            numbers, inverse = np.unique(
                batch.column(FILE_COLUMN).to_numpy(zero_copy_only=False), return_inverse=True
            )
            named = pa.array([self.paths[int(n)] for n in numbers], pa.string())
            injected = named.take(pa.array(inverse.astype(np.int64)))
            if spec.inject in self.lists:
                steps = pa.array(np.arange(size + 1, dtype=np.int32))
                injected = pa.ListArray.from_arrays(steps, injected)
            given[spec.inject] = injected
        columns = {
            name: given.get(name, pa.nulls(size, TEXTS if name in self.lists else pa.string()))
            for name in self.fields
        }
        record = ArrowRecord(columns, size, frozenset(self.lists))
        shard_key = given.get(spec.shard_by) if spec.shard_by in spec.read.fields else None
        if not spec.shard_by or self.shards <= 1:
            shards = np.zeros(size, np.int32)
        else:
            key = shard_key if shard_key is not None else pa.nulls(size, pa.string())
            shards = native.shards_of(key, self.shards)
        if spec.dedup_keys:
            keys = json_keys([given.get(k) for k in spec.dedup_keys])
            hashes = pa.array(native.xxhash64(keys, HASH_SEED))
        else:
            keys, hashes = pa.nulls(size, pa.string()), pa.nulls(size, pa.int64())
        keep, record = self._mapped_record(record)
        out = {
            SHARD: pa.array(shards, pa.int32()),
            ORDER: pa.array(np.full(size, source, np.int32)),
            FILE_COLUMN: batch.column(FILE_COLUMN),
            LINE: batch.column(LINE),
            TEXT: batch.column(TEXT),
            DKEY: keys,
            DHASH: hashes,
            KEEP: pa.array(keep, pa.bool_()),
        }
        for key in self.key_fields:
            out[key] = _no_empty_lists(record.get(key)) if key in record.arrays else record.get(key)
        compiler = ArrowCompiler()
        for column, element_filter in self.element_filters:
            passes, _ = compiler.bundle(element_filter, record)
            out[column] = pa.array(passes, pa.bool_())
        out[REJECT] = batch.column(REJECT)
        return pa.RecordBatch.from_pydict(out)

    def _mapped_record(self, record: ArrowRecord) -> tuple[np.ndarray, ArrowRecord]:
        """The map's verdict on each record and the records after ``map``."""
        compiler = ArrowCompiler()
        keep = np.ones(record.size, bool)
        if self.filter_in is not None:
            passes, record = compiler.bundle(self.filter_in, record)
            keep &= passes
        if self.mappings:
            projected = ArrowRecord({}, record.size)
            for mapping in self.mappings:
                value, is_array = record.get(mapping.source), mapping.source in record.arrays
                if mapping.filter is not None:
                    value, is_array = compiler.value(mapping.filter, value, is_array)
                projected = projected.with_field(mapping.target, value, is_array)
            record = projected
        if self.filter_out is not None:
            passes, record = compiler.bundle(self.filter_out, record)
            keep &= passes
        return keep, record


def _empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def _no_empty_lists(lists: pa.Array) -> pa.Array:
    """``lists`` with each empty list made null (what the Spark path's text gives)."""
    empty = pc.fill_null(pc.equal(pc.list_value_length(lists), 0), False)
    return pc.if_else(empty, pa.nulls(len(lists), lists.type), lists)


_SHORT_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}


def _json_text(text: str) -> str:
    """``text`` as a JSON string literal the way Spark's JSON writer (Jackson) writes it:
    quote and backslash escaped, control characters as short escapes or ``\\u00XX``
    (upper-case hex), nothing else escaped."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif code < 0x20:
            out.append(_SHORT_ESCAPES.get(code) or f"\\u{code:04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _json_texts(texts: pa.Array) -> pa.Array:
    """Each text as a JSON string literal (:func:`_json_text`); nulls stay null."""
    texts = texts.cast(pa.string())
    quoted = pc.replace_substring(pc.replace_substring(texts, "\\", "\\\\"), '"', '\\"')
    quoted = pc.binary_join_element_wise('"', quoted, '"', "")
    control = pc.fill_null(pc.match_substring_regex(texts, "[\\x00-\\x1f]"), False)
    if pc.any(control).as_py():
        rows = np.flatnonzero(control.to_numpy(zero_copy_only=False))
        slow = [_json_text(texts[int(i)].as_py()) for i in rows]
        quoted = pc.replace_with_mask(quoted, control, pa.array(slow, pa.string()))
    return quoted


def _json_values(values: pa.Array | None, size: int) -> pa.Array:
    """Each value as JSON (a text's literal, a list's array; null stays null)."""
    if values is None:
        return pa.nulls(size, pa.string())
    if not (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)):
        return _json_texts(values)
    items = pc.fill_null(_json_texts(pc.list_flatten(values)), "null")
    parents = pc.list_parent_indices(values).to_numpy()
    counts = np.bincount(parents, minlength=size) if len(parents) else np.zeros(size, np.int64)
    offsets = np.zeros(size + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    lists = pa.ListArray.from_arrays(pa.array(offsets), items, mask=pc.invert(values.is_valid()))
    return pc.binary_join_element_wise("[", pc.binary_join(lists, ","), "]", "")


def json_keys(values: list[pa.Array | None]) -> pa.Array:
    """Spark's ``to_json(struct(values as "0", "1", ...))`` for each row: a field per
    non-null value (nulls left out; ``None``: a field the source lacks)."""
    size = next((len(v) for v in values if v is not None), 0)
    fields = [
        pc.binary_join_element_wise(f'"{i}":', _json_values(v, size), "")
        for i, v in enumerate(values)
    ]
    joined = pa.nulls(size, pa.string())
    for part in fields:  # the present fields, comma between (pyarrow's "skip" of nulls
        # gives no rows at all where every one is null)
        joined = pc.coalesce(pc.binary_join_element_wise(joined, part, ","), joined, part)
    return pc.binary_join_element_wise("{", pc.fill_null(joined, ""), "}", "")


def read_task(
    pages: PageStore,
    folder: str,
    arrow_map: ArrowMap,
    dealt: list[list[tuple[int, int, str]]],
    sizes: dict[str, int],
    fingerprinted: bool,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function a reading task of the Arrow path runs (``mapInArrow`` over the task
    numbers): read task ``t``'s files (``dealt[t]``: source, file number, path), map their
    records and route them to their pieces under ``folder``; yields the pieces' rows (and,
    when ``fingerprinted``, each file's content fingerprint, as the Spark path's reading
    tasks take it)."""
    settings = FilesystemSettings.capture()

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_started()
        settings.apply()
        router = Router(pages, folder)
        try:
            for batch in batches:
                for task in batch.column(0).to_pylist():
                    for source, number, path in dealt[task]:
                        spec = arrow_map.sources[source].read
                        for records in read_files(spec, [(number, path)]):
                            router.add(arrow_map.mapped(records, source))
                        found = fingerprint(path, sizes[path]) if fingerprinted else None
                        if found is not None:
                            router.fingerprint(number, found)
        except BaseException as error:
            router.abort(error)
            raise
        yield router.close()

    return run


def deal_files(
    files: list[tuple[int, int, str, int]], tasks: int
) -> list[list[tuple[int, int, str]]]:
    """``files`` (source, number, path, size) dealt to ``tasks`` tasks, biggest first,
    round-robin, so that tasks get similar work."""
    by_size = sorted(files, key=lambda f: -f[3])
    return [[(s, n, p) for s, n, p, _ in by_size[t::tasks]] for t in range(tasks)]
