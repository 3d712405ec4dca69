"""Input files: reading a source's files into a DataFrame, and checking the job's fields.

A source's files are listed on the driver (:mod:`loaders.listing.files`, whose
``InputFile`` and ``list_input_files`` are re-exported here); the tasks open each file by
the same location (:mod:`treestore.filesystems`), with the driver's filesystem settings,
and may take each file's content fingerprint as they read it (what identifies a file in
a store: :mod:`loaders.listing.identity`).

Every field is read as text (lists of text for JSON/Parquet lists), so the
map filters and the tree see the same values whatever the format. Each record
also carries ``__file`` (the file's number) and ``__line`` (its line number).

Fields a job reads that no source has (``"key": "nmae"``) would load as missing, an
empty tree or sums of zeros, with exit 0. :func:`check_job_fields` compares the names
the job reads with the names its sources hold, on the driver, before Spark starts, and
fails on a field in no source (a field missing from only some sources is a warning;
``strict``: both fail, ``lenient``: both warn), naming the field, its place in the job
file (line and column) and the closest known field. What is knowable, per source:

- csv/tsv with ``columns``: those names, exactly.
- csv/tsv with a header: the header lines of its first 20 files; without a header,
  ``_c0``, ``_c1``, ... as many as the first line has cells.
- parquet: the schema of its first 20 files.
- json: the keys of the objects on the first 1,000 lines (first MB) of its first 20
  files; a key that only appears later is reported too (``--lenient`` loads anyway).
- a source with no files yet, or whose files cannot be read, holds unknown names: then
  nothing is reported, since any name could be one of its fields.

What is checked: each source's ``shard_by`` and ``dedup.keys`` against its own fields,
``map.fields``' ``from`` against every source's fields, and the tree's value ``key``s,
``data`` keys and ``pending.time`` against the fields the map leaves (the ``to`` names
when ``map.fields`` is given, else every source's fields and ``inject_source_name``).
The fields filters name are not checked and count as known, since a filter may set them.
"""

from __future__ import annotations

import difflib
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from loaders.filters.catalogue import fields_named
from loaders.formats.readers import (
    FILE_COLUMN,
    LINE,
    TEXT,
    ReadSpec,
    read_files,
    sample_field_names,
    sample_list_fields,
)
from loaders.job.model import JobSpec, SourceSpec
from loaders.job.text import JobText, KeyPath, format_key_path, read_job_file
from loaders.listing.files import InputFile, list_input_files
from loaders.listing.identity import fingerprint
from treestore.errors import TreestoreError
from treestore.events import EventSink, Message
from treestore.filesystems import FilesystemSettings
from treestore.settings import task_started
from treestore.spark import default_parallelism

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "FILE_COLUMN",
    "FINGERPRINT_LINE",
    "Fingerprints",
    "InputFile",
    "UnknownField",
    "check_job_fields",
    "list_fields",
    "list_input_files",
    "read_source",
    "read_spec",
    "unknown_fields",
]


FINGERPRINT_LINE = -1
"""The ``__line`` of the row a reading task yields after a file's records, its content
fingerprint in ``__text`` (no record has a line below 1)."""


class Fingerprints:
    """The content fingerprints the reading tasks of one load take, returned through their
    output rows: after a file's records, its task yields one row more (``__line``
    :data:`FINGERPRINT_LINE`, the file's number, its fingerprint in ``__text``).
    :meth:`observed` collects those rows with ``DataFrame.observe`` (a list Spark sends to
    the driver with the Spark job's result, in classic and Spark Connect sessions alike:
    an accumulator would need a ``SparkContext``) and drops them; :meth:`taken` reads
    them once the load's Spark job ran.
    """

    def __init__(self) -> None:
        self._observations: list[Any] = []
        self._given: dict[int, str] = {}

    def add(self, number: int, found: str) -> None:
        """File ``number``'s fingerprint, as a task returned it with its result rows (the
        Arrow path's reading tasks: :mod:`loaders.route.arrow_map`)."""
        self._given[number] = found

    def observed(self, frame: DataFrame) -> DataFrame:
        """``frame`` (read by :func:`read_source` with this) without its fingerprint rows,
        which a new observation of it collects."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        observation = Observation(f"treestore-fingerprints-{uuid.uuid4().hex}")
        self._observations.append(observation)
        marker = F.col(LINE) == FINGERPRINT_LINE
        pairs = F.collect_list(F.when(marker, F.struct(FILE_COLUMN, TEXT)))
        return frame.observe(observation, pairs.alias("pairs")).where(~marker)

    def taken(self, numbers: dict[str, int]) -> dict[str, str]:
        """The fingerprints the tasks took of the files ``numbers`` numbers (path ->
        fingerprint; a file whose fingerprint could not be taken is absent). Call it
        only once the Spark job that read them succeeded."""
        by_number = dict(self._given)
        for observation in self._observations:
            for pair in _observed_pairs(observation):
                by_number[int(pair[0])] = str(pair[1])
        return {path: by_number[n] for path, n in numbers.items() if n in by_number}


def _observed_pairs(observation: Any) -> list[Any]:
    """The (file number, fingerprint) pairs an observation collected; none when Spark
    never ran the observed plan (an input without a record can be optimized away, and
    its observation then holds no metrics at all)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        return list(observation.get.get("pairs") or ())
    except (Py4JError, PySparkException):
        return []


def _fingerprint_row(schema: pa.Schema, number: int, found: str) -> pa.RecordBatch:
    """The row that carries file ``number``'s fingerprint (see :class:`Fingerprints`)."""
    given = {FILE_COLUMN: number, LINE: FINGERPRINT_LINE, TEXT: found}
    return pa.RecordBatch.from_arrays(
        [
            pa.array([given[f.name]], f.type) if f.name in given else pa.nulls(1, f.type)
            for f in schema
        ],
        schema=schema,
    )


def list_fields(
    source: SourceSpec, files: list[InputFile], fields: Iterable[str]
) -> frozenset[str]:
    """Which of ``fields`` hold lists in ``source`` (sampled from its first files)."""
    return sample_list_fields(source.format, [f.path for f in files], fields)


def read_spec(
    source: SourceSpec,
    files: list[InputFile],
    fields: Iterable[str],
    lists: frozenset[str] | None = None,
) -> ReadSpec:
    """How the tasks read ``source``'s ``files``: ``fields`` (its injected name aside) as
    text, those of ``lists`` (default: those sampled as lists) as lists of text."""
    wanted = tuple(sorted({f for f in fields if f and f != source.inject_source_name}))
    if lists is None:
        lists = list_fields(source, files, wanted)
    return ReadSpec(source.format, source.header, source.columns, wanted, lists & set(wanted))


def read_source(
    spark: SparkSession,
    source: SourceSpec,
    files: list[InputFile],
    fields: Iterable[str],
    lists: frozenset[str] | None = None,
    numbers: dict[str, int] | None = None,
    fingerprints: Fingerprints | None = None,
) -> DataFrame:
    """Read ``files`` of ``source`` in Spark tasks, keeping ``fields`` (text) and line numbers.

    Each file is read whole by one task (see :mod:`loaders.formats.readers`); the rows
    carry ``__file``, ``__line``, ``__reject`` and ``__text``. ``lists`` names
    the fields read as lists of text (default: those sampled as lists);
    ``numbers`` gives each file's number for ``__file`` (default: its place in ``files``).
    With ``fingerprints``, the task that reads a file takes its content fingerprint (of
    its listed size) once it has read it, for :meth:`Fingerprints.taken`.
    """
    spec = read_spec(source, files, fields, lists)
    # Biggest files first, dealt round-robin over the tasks, so tasks get similar work.
    numbers = numbers or {f.path: i for i, f in enumerate(files)}
    settings = FilesystemSettings.capture()
    by_size = [(numbers[f.path], f.path) for f in sorted(files, key=lambda f: -f.size)]
    tasks = max(1, min(len(by_size), default_parallelism(spark) * 2))
    dealt = [by_size[i::tasks] for i in range(tasks)]
    sizes = {f.path: f.size for f in files}
    schema, fingerprinted = spec.schema(), fingerprints is not None

    def read(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_started()
        settings.apply()
        for batch in batches:
            for task in batch.column(0).to_pylist():
                for number, path in dealt[task]:
                    yield from read_files(spec, [(number, path)])
                    found = fingerprint(path, sizes[path]) if fingerprinted else None
                    if found is not None:
                        yield _fingerprint_row(schema, number, found)

    frame = spark.range(0, tasks, 1, tasks).mapInArrow(read, spec.spark_schema())
    return frame if fingerprints is None else fingerprints.observed(frame)


IN_NO_SOURCE = "in no source"


@dataclass(frozen=True)
class UnknownField:
    """A field the job reads that the fields it can see do not include."""

    name: str
    path: KeyPath
    """Where the job names it: ``("tree", "root", 1, "key")``."""
    where: str
    """Whose fields lack it: ``in no source`` or ``not in source 'attributes'``."""
    closest: str | None


def _source_fields(source: SourceSpec) -> set[str] | None:
    """The field names ``source`` holds (None: not knowable now)."""
    if source.format in ("csv", "tsv") and source.columns:
        return set(source.columns)
    try:
        paths = [f.path for f in list_input_files(source)]
        if not paths:
            return None
        names = sample_field_names(source.format, paths)
    except (TreestoreError, OSError, ValueError, pa.ArrowException):
        return None  # the load itself reports what is wrong with the files
    if source.format in ("csv", "tsv") and not source.header:
        return {f"_c{i}" for i in range(len(names))}
    return set(names)


def _closest(name: str, known: Iterable[str]) -> str | None:
    found = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_fields(job: JobSpec) -> list[UnknownField]:
    """The fields ``job`` reads that none of its sources has (see the module's notes on
    what is knowable); empty when some source's fields cannot be known now."""
    per_source: list[set[str]] = []
    for source in job.sources:
        names = _source_fields(source)
        if names is None:
            return []
        per_source.append(names)
    read = set().union(*per_source)
    from_filters = fields_named(job.map.filter_in) | fields_named(job.map.filter_out)
    for element in job.elements():
        from_filters |= fields_named(element.filter)
    injected = {s.inject_source_name for s in job.sources if s.inject_source_name}
    found: list[UnknownField] = []

    def check(name: str, path: KeyPath, known: set[str], where: str) -> None:
        if name not in known:
            found.append(UnknownField(name, path, where, _closest(name, known)))

    for i, (source, names) in enumerate(zip(job.sources, per_source, strict=True)):
        own = names | from_filters | {source.inject_source_name or ""}
        where = f"not in source {source.name!r}"
        if source.shard_by:
            check(source.shard_by, ("source", i, "shard_by"), own, where)
        for k, key in enumerate(source.dedup_keys):
            check(key, ("source", i, "dedup", "keys", k), own, where)
    before_map = read | injected | from_filters
    for i, mapping in enumerate(job.map.fields):
        check(mapping.source, ("map", "fields", i), before_map, IN_NO_SOURCE)
    after_map = {m.target for m in job.map.fields} | from_filters if job.map.fields else before_map
    for element in job.elements():
        if element.key:
            check(element.key, (*element.path, "key"), after_map, IN_NO_SOURCE)
        for data in element.data:
            if data.key:
                check(data.key, (*element.path, "data", data.name, "key"), after_map, IN_NO_SOURCE)
        if element.pending_time:
            check(element.pending_time, (*element.path, "pending", "time"), after_map, IN_NO_SOURCE)
    return found


def _reason(field: UnknownField) -> str:
    closest = f"; did you mean {field.closest!r}?" if field.closest else ""
    return f"field {field.name!r} is {field.where}{closest}"


def check_job_fields(
    job: JobSpec, on_event: EventSink, strict: bool = False, lenient: bool = False
) -> None:
    """Check the fields ``job`` reads against those its sources have, before the load.

    A field in no source (a typo, most likely: the branch it feeds would load empty) raises
    :class:`~treestore.errors.JobConfigError` at the first one, with the closest name; a
    field missing from only some sources is a warning (an event each). ``strict``: every
    unknown field is an error; ``lenient``: every one is a warning (the load reads it as
    missing). Reads only the first lines of the sources' first files, on the driver (no
    Spark)."""
    found = unknown_fields(job)
    if not found:
        return
    text: JobText = read_job_file(job.file)
    failing = [] if lenient else [f for f in found if strict or f.where == IN_NO_SOURCE]
    if failing:
        first = failing[0]
        others = f" ({len(found) - 1} more unknown field(s) in the job)" if len(found) > 1 else ""
        raise text.error(
            first.path,
            _reason(first) + others,
            hint="Fix the name in the job file, or load with --lenient to read it as missing.",
        )
    for field in found:
        probe = field.path
        while probe and probe not in text.positions:
            probe = probe[:-1]
        at = f" line {text.positions[probe][0]}" if probe in text.positions else ""
        on_event(
            Message(
                f"warning: {job.file}{at}: {format_key_path(field.path)}: {_reason(field)}; "
                "the load reads it as missing"
                + ("" if lenient else " (use --strict to make this an error)")
            )
        )
