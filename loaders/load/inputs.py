"""Input files: finding a source's files and reading them into a DataFrame.

A source's ``path`` is a local file, folder or glob, or the same as a URI
(``s3://bucket/in/``, ``s3://bucket/in/*.tsv``, ``hdfs://nn:8020/in``), listed on
the driver through pyarrow filesystems; the tasks open each file by the same
location (:mod:`treestore.filesystems`), with the driver's filesystem settings.

Every field is read as text (lists of text for JSON/Parquet lists), so the
map filters and the tree see the same values whatever the format. Each record
also carries ``__file`` (the file's number) and ``__line`` (its line number).

Fields a job reads that no source has (``"key": "nmae"``) would load as missing, an
empty tree or sums of zeros, with exit 0. :func:`check_job_fields` compares the names
the job reads with the names its sources hold, on the driver, before Spark starts, and
warns (``strict``: fails) naming the field, its place in the job file (line and column)
and the closest known field. What is knowable, per source:

- csv/tsv with ``columns``: those names, exactly.
- csv/tsv with a header: the header lines of its first 20 files; without a header,
  ``_c0``, ``_c1``, ... as many as the first line has cells.
- parquet: the schema of its first 20 files.
- json: the keys of the objects on the first 1,000 lines (first MB) of its first 20
  files; a key that only appears later is reported too (a warning; ``--strict`` fails).
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
import fnmatch
import glob
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from loaders.filters.catalogue import fields_named
from loaders.job.model import JobSpec, SourceSpec
from loaders.job.text import JobText, KeyPath, format_key_path, read_job_file
from loaders.load.readers import (
    FILE_COLUMN,
    ReadPlan,
    read_files,
    sample_field_names,
    sample_list_fields,
)
from treestore.errors import LoadError, TreestoreError
from treestore.events import EventSink, Message
from treestore.filesystems import FilesystemSettings, is_uri, split_location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "FILE_COLUMN",
    "InputFile",
    "UnknownField",
    "accepts",
    "check_job_fields",
    "list_fields",
    "list_input_files",
    "read_source",
    "split_glob",
    "unknown_fields",
]

_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class InputFile:
    """One input file as found on disk."""

    path: str
    size: int
    mtime_ns: int

    @classmethod
    def at(cls, path: Path) -> InputFile:
        """Describe the file at ``path``."""
        stat = path.stat()
        return cls(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def _visible(path: Path, root: Path) -> bool:
    parts = path.relative_to(root).parts
    return not any(part.startswith((".", "_")) for part in parts)


def split_glob(path: str) -> tuple[str, list[str] | None]:
    """``path`` as the folder before its first glob character and the glob's segments
    after it (``"/in/*/a?.tsv"`` -> ``("/in", ["*", "a?.tsv"])``); no glob: ``(path, None)``."""
    first_glob = next((i for i, c in enumerate(path) if c in _GLOB_CHARS), None)
    if first_glob is None:
        return path, None
    cut = path.rfind("/", 0, first_glob)
    return path[:cut], path[cut + 1 :].split("/")


def _matches(parts: list[str], pattern: list[str]) -> bool:
    """Whether path segments ``parts`` match glob segments ``pattern`` (``**``: any depth)."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_matches(parts[i:], pattern[1:]) for i in range(len(parts) + 1))
    return (
        bool(parts)
        and fnmatch.fnmatchcase(parts[0], pattern[0])
        and not (parts[0].startswith(".") and not pattern[0].startswith("."))
        and _matches(parts[1:], pattern[1:])
    )


def _list_remote(source: SourceSpec) -> list[InputFile]:
    """The files of a source whose path is a URI, listed through its pyarrow filesystem."""
    from pyarrow import fs as pafs

    folder, pattern = split_glob(source.path)  # list the folder, match the glob's rest
    filesystem, root, prefix = split_location(folder, LoadError)
    try:
        found = filesystem.get_file_info(root)
        if found.type == pafs.FileType.File and pattern is None:
            infos = [found]
        elif found.type == pafs.FileType.Directory:
            listed = filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
            infos = [info for info in listed if info.type == pafs.FileType.File]
        else:
            infos = []
    except OSError as exc:
        from treestore.filesystems import describe_error

        raise LoadError(
            f"Source {source.name!r}: cannot list {source.path}: {describe_error(exc)}"
        ) from None
    if pattern is not None:
        infos = [i for i in infos if _matches(i.path[len(root) :].strip("/").split("/"), pattern)]
    elif found.type == pafs.FileType.Directory:
        infos = [i for i in infos if _visible(Path(i.path), Path(root))]
    elif not infos:
        raise LoadError(
            f"Source {source.name!r}: {source.path} does not exist. "
            "Give a file, a folder or a glob in the job's 'path'."
        )
    return sorted(
        (InputFile(prefix + i.path, i.size or 0, i.mtime_ns or 0) for i in infos),
        key=lambda f: f.path,
    )


def accepts(source: SourceSpec, path: str) -> bool:
    """Whether :func:`list_input_files` would list the local file ``path`` for ``source``
    (the same rules, for a file found some other way: by a stream)."""
    folder, pattern = split_glob(source.path)
    if pattern is not None:
        root = str(Path(folder or "/").resolve()).rstrip("/") + "/"
        return path.startswith(root) and _matches(path[len(root) :].split("/"), pattern)
    given = Path(folder)
    if given.is_file():
        return path == str(given.resolve())
    base = str(given.resolve()).rstrip("/") + "/"
    return path.startswith(base) and _visible(Path(path), Path(base))


def list_input_files(source: SourceSpec) -> list[InputFile]:
    """The files of ``source``: the file, the visible files under the folder, or the glob's."""
    if is_uri(source.path):
        return _list_remote(source)
    if any(c in source.path for c in _GLOB_CHARS):
        matches = sorted(Path(p) for p in glob.glob(source.path, recursive=True))
        return [InputFile.at(p) for p in matches if p.is_file()]
    root = Path(source.path)
    if root.is_file():
        return [InputFile.at(root)]
    if root.is_dir():
        found = sorted(p for p in root.rglob("*") if p.is_file() and _visible(p, root))
        return [InputFile.at(p) for p in found]
    raise LoadError(
        f"Source {source.name!r}: {source.path} does not exist. "
        "Give a file, a folder or a glob in the job's 'path'."
    )


def list_fields(
    source: SourceSpec, files: list[InputFile], fields: Iterable[str]
) -> frozenset[str]:
    """Which of ``fields`` hold lists in ``source`` (sampled from its first files)."""
    return sample_list_fields(source.format, [f.path for f in files], fields)


def read_source(
    spark: SparkSession,
    source: SourceSpec,
    files: list[InputFile],
    fields: Iterable[str],
    lists: frozenset[str] | None = None,
    numbers: dict[str, int] | None = None,
) -> DataFrame:
    """Read ``files`` of ``source`` in Spark tasks, keeping ``fields`` (text) and line numbers.

    Each file is read whole by one task (see :mod:`loaders.load.readers`); the rows
    carry ``__file``, ``__line``, ``__reject`` and ``__text``. ``lists`` names
    the fields read as lists of text (default: those sampled as lists);
    ``numbers`` gives each file's number for ``__file`` (default: its place in ``files``).
    """
    wanted = tuple(sorted({f for f in fields if f and f != source.inject_source_name}))
    if lists is None:
        lists = list_fields(source, files, wanted)
    plan = ReadPlan(source.format, source.header, source.columns, wanted, lists & set(wanted))
    # Biggest files first, dealt round-robin over the tasks, so tasks get similar work.
    numbers = numbers or {f.path: i for i, f in enumerate(files)}
    settings = FilesystemSettings.capture()
    by_size = [(numbers[f.path], f.path) for f in sorted(files, key=lambda f: -f.size)]
    tasks = max(1, min(len(by_size), spark.sparkContext.defaultParallelism * 2))
    dealt = [by_size[i::tasks] for i in range(tasks)]

    def read(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        settings.apply()
        for batch in batches:
            for task in batch.column(0).to_pylist():
                yield from read_files(plan, dealt[task])

    return spark.range(0, tasks, 1, tasks).mapInArrow(read, plan.spark_schema())


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
        check(mapping.source, ("map", "fields", i), before_map, "in no source")
    after_map = {m.target for m in job.map.fields} | from_filters if job.map.fields else before_map
    for element in job.elements():
        if element.key:
            check(element.key, (*element.path, "key"), after_map, "in no source")
        for data in element.data:
            if data.key:
                check(
                    data.key, (*element.path, "data", data.name, "key"), after_map, "in no source"
                )
        if element.pending_time:
            check(
                element.pending_time, (*element.path, "pending", "time"), after_map, "in no source"
            )
    return found


def _reason(field: UnknownField) -> str:
    closest = f"; did you mean {field.closest!r}?" if field.closest else ""
    return f"field {field.name!r} is {field.where}{closest}"


def check_job_fields(job: JobSpec, on_event: EventSink, strict: bool = False) -> None:
    """Warn (an event per field) about the fields ``job`` reads that no source has;
    ``strict``: raise :class:`~treestore.errors.JobConfigError` at the first one instead.
    Reads only the first lines of the sources' first files, on the driver (no Spark)."""
    found = unknown_fields(job)
    if not found:
        return
    text: JobText = read_job_file(job.file)
    if strict:
        first = found[0]
        others = f" ({len(found) - 1} more unknown field(s) in the job)" if len(found) > 1 else ""
        raise text.error(
            first.path,
            _reason(first) + others,
            hint="Fix the name in the job file, or load without --strict to only warn.",
        )
    for field in found:
        probe = field.path
        while probe and probe not in text.positions:
            probe = probe[:-1]
        at = f" line {text.positions[probe][0]}" if probe in text.positions else ""
        on_event(
            Message(
                f"warning: {job.file}{at}: {format_key_path(field.path)}: {_reason(field)}; "
                "the load reads it as missing (use --strict to make this an error)"
            )
        )
