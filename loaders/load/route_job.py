"""The load's first Spark job: read the new input files, map their records, route them to
their shards' pieces (:mod:`loaders.route.pieces`).

Two paths give the same pieces, value for value. The Arrow path
(:mod:`loaders.route.arrow_map`), for a job whose filters all have Arrow forms: each
reading task reads, maps and routes its files' records in Python, on Arrow arrays. The
Spark path, for any job: the reading tasks' records go to Spark, which computes the shard
(``pmod(xxhash64(shard_by), shards)``, :mod:`treestore.sharding`), the source's order and
the dedup key, runs ``map`` (``filter_in``, ``fields``, ``filter_out``), every element
filter and the reject tests as Spark SQL expressions, and gives the records back to a
Python function in the same task that routes them. :data:`ARROW_MAP` off sends every job
the Spark way (the tests compare the two).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from loaders.filters.catalogue import FilterCompiler, SymbolicRecord
from loaders.formats.readers import FILE_COLUMN, LINE, REJECT, TEXT
from loaders.job.model import JobSpec, SourceSpec
from loaders.load.dedup_step import DHASH, DKEY, dedup_columns
from loaders.load.inputs import Fingerprints, InputFile, list_fields, read_source, read_spec
from loaders.load.protocol import KEEP, ORDER, list_as_text
from loaders.load.shard_frames import SHARD, shard_column
from loaders.route.arrow_map import ArrowMap, deal_files, read_task
from loaders.route.pieces import ROUTE_SCHEMA, Pieces, route_task
from loaders.tree.builder import TreeBuilder
from treestore.spark import default_parallelism
from treestore.storage.pagestore import PageStore

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["ARROW_MAP", "RouteJob"]

ARROW_MAP = True
"""Whether a job whose filters all have Arrow forms maps them in its reading tasks."""


@dataclass
class RouteJob:
    """The first job of one load, planned: which way it maps (``map_in``, ``"Arrow"`` or
    ``"Spark"``), the files by number, and :meth:`run`."""

    map_in: str
    ordered: tuple[str, ...]
    """The new input files, by number: sources in job order, a source's files in order."""
    numbers: dict[str, int]
    fingerprints: Fingerprints
    text_lists: tuple[str, ...]
    """The key fields that travel as JSON text (the Spark path's lists)."""
    run_job: Callable[[], list[Any]]

    @classmethod
    def plan(
        cls,
        spark: SparkSession,
        job: JobSpec,
        builder: TreeBuilder,
        fresh: dict[int, list[InputFile]],
        pages: PageStore,
        folder: str,
    ) -> RouteJob:
        """Plan the job that routes the records of the ``fresh`` files (by source) to their
        pieces under ``folder`` of ``pages``."""
        # a field that holds lists in one source is read as a list in all of them
        lists = frozenset().union(
            *(
                list_fields(job.sources[i], files, job.input_fields(job.sources[i]))
                for i, files in fresh.items()
            )
        )
        ordered = tuple(f.path for _, files in sorted(fresh.items()) for f in files)
        numbers = {path: n for n, path in enumerate(ordered)}
        fingerprints = Fingerprints()  # each file's, as its task reads it
        reads = {
            i: read_spec(job.sources[i], files, job.input_fields(job.sources[i]), lists)
            for i, files in sorted(fresh.items())
        }
        arrow = None
        if ARROW_MAP:
            arrow, _why = ArrowMap.of(job, builder, reads, lists, dict(enumerate(ordered)))
        if arrow is not None:
            files = [(i, numbers[f.path], f.path, f.size) for i, fs in fresh.items() for f in fs]
            tasks = max(1, min(len(files), default_parallelism(spark) * 2))
            task = read_task(
                pages, folder, arrow, deal_files(files, tasks),
                {f.path: f.size for fs in fresh.values() for f in fs}, True,
            )  # fmt: skip

            def run_arrow() -> list[Any]:
                numbers_frame = spark.range(0, tasks, 1, tasks)
                return numbers_frame.mapInArrow(task, ROUTE_SCHEMA).collect()

            return cls("Arrow", ordered, numbers, fingerprints, (), run_arrow)
        frames = [
            _source_frame(spark, i, job.sources[i], files, job, lists, numbers, fingerprints)
            for i, files in sorted(fresh.items())
        ]
        union = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
        mapped, text_lists = _mapped(union, job, builder)

        def run_spark() -> list[Any]:
            return mapped.mapInArrow(route_task(pages, folder), ROUTE_SCHEMA).collect()

        return cls("Spark", ordered, numbers, fingerprints, text_lists, run_spark)

    def run(self) -> Pieces:
        """Run the job: the pieces its tasks wrote (the files' fingerprints kept)."""
        rows = [tuple(row) for row in self.run_job()]
        for shard, number, _piece, _rows, found in rows:
            if shard is None and found is not None:
                self.fingerprints.add(number, found)
        return Pieces.of(rows)


def _source_frame(
    spark: SparkSession,
    index: int,
    source: SourceSpec,
    files: list[InputFile],
    job: JobSpec,
    lists: frozenset[str],
    numbers: dict[str, int],
    fingerprints: Fingerprints,
) -> DataFrame:
    from pyspark.sql import functions as F

    fields = job.input_fields(source)
    frame = read_source(spark, source, files, fields, lists, numbers, fingerprints)
    frame = frame.withColumn(SHARD, shard_column(frame, source, job.shards))
    frame = frame.withColumn(ORDER, F.lit(index))
    if source.inject_source_name:
        paths = F.array(*[F.lit(f.path) for f in files])
        injected = F.element_at(paths, F.col(FILE_COLUMN) - numbers[files[0].path] + 1)
        if source.inject_source_name in lists:
            injected = F.array(injected)
        frame = frame.withColumn(source.inject_source_name, injected)
    return dedup_columns(frame, source)


def _attachment_checks(builder: TreeBuilder, record: SymbolicRecord) -> list[tuple[Column, str]]:
    """Rejects for values a ``sum`` or ``time`` attachment, or a pending element's time,
    cannot take."""
    from pyspark.sql import functions as F

    checks = []
    for spec in builder.attachments:
        if spec.kind not in ("sum", "time") or spec.key is None:
            continue
        kind = "double" if spec.kind == "sum" else "long"

        def bad(x: Column, kind: str = kind) -> Column:
            return (x != "") & x.try_cast(kind).isNull()

        value = record.get(spec.key)
        test = F.exists(value, bad) if spec.key in record.arrays else bad(value)
        what = "a number" if spec.kind == "sum" else "a whole number"
        checks.append((test, f"data {spec.name!r} ({spec.kind}): {spec.key!r} is not {what}"))
    if builder.pending_time is not None:
        value = record.get(builder.pending_time)

        def late(x: Column) -> Column:  # what the task parses: an optional minus and digits
            return (x != "") & (~x.rlike("^-?[0-9]+$") | x.try_cast("long").isNull())

        test = F.exists(value, late) if builder.pending_time in record.arrays else late(value)
        checks.append((test, f"pending time: {builder.pending_time!r} is not a whole number"))
    return checks


def _mapped(
    frame: DataFrame, job: JobSpec, builder: TreeBuilder
) -> tuple[DataFrame, tuple[str, ...]]:
    """Add ``__keep`` (the map's verdict), element filter columns and reject reasons; also
    the key fields that hold lists (they go to the tasks as text, :func:`list_as_text`)."""
    from pyspark.sql import functions as F

    names = [c for c in frame.columns if not c.startswith("__")]
    record = SymbolicRecord({name: F.col(f"`{name}`") for name in names})
    for spec in frame.schema.fields:
        if spec.name in record.columns and spec.dataType.typeName() == "array":
            record = record.with_field(spec.name, record.columns[spec.name], True)
    compiler = FilterCompiler()
    keep: Column = F.lit(True)
    if job.map.filter_in is not None:
        passes, record = compiler.bundle(job.map.filter_in, record)
        keep = keep & passes
    if job.map.fields:
        projected = SymbolicRecord({})
        for mapping in job.map.fields:
            value, is_array = record.get(mapping.source), mapping.source in record.arrays
            if mapping.filter is not None:
                value, is_array = compiler.value(mapping.filter, value, is_array)
            projected = projected.with_field(mapping.target, value, is_array)
        record = projected
    if job.map.filter_out is not None:
        passes, record = compiler.bundle(job.map.filter_out, record)
        keep = keep & passes
    columns = [F.col(c) for c in (SHARD, ORDER, FILE_COLUMN, LINE, TEXT, DKEY, DHASH)]
    columns.append(keep.alias(KEEP))
    columns += [
        (list_as_text(record.get(key)) if key in record.arrays else record.get(key)).alias(key)
        for key in builder.key_fields
    ]
    for element in builder.filters:
        assert element.filter is not None
        passes, _ = compiler.bundle(element.filter, record)
        columns.append(passes.alias(builder.filter_columns[element.where]))
    compiler.rejects.extend(_attachment_checks(builder, record))
    columns.append(F.coalesce(F.col(REJECT), compiler.reject_reason()).alias(REJECT))
    return frame.select(*columns), tuple(k for k in builder.key_fields if k in record.arrays)
