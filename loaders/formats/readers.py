"""Reading input files inside Spark tasks with pyarrow, keeping every record's line number.

Spark's own text readers neither number lines nor report a row with the wrong
number of columns, so each input file is read by one task with the readers of
:mod:`loaders.formats`: pyarrow's streaming CSV reader (csv, tsv), its JSON reader
(json lines, line by line only for a chunk with a bad line) or its Parquet reader.
Only the fields the job uses are kept. Each output row carries ``__file`` (the file's
number in the load), ``__line`` (the physical line, or the row number in a Parquet
file) and ``__reject``: null for a good record, else why the record was set aside
(then ``__text`` holds the raw line): a row with the wrong number of cells, a line
that is not UTF-8 text or not JSON.

A file is a local path or a URI (``s3://bucket/in/a.tsv``), opened through
:mod:`treestore.filesystems` in the task: executors read what the driver listed
from the same location, never from a folder only the driver has. A file that cannot
be read at all (a header that is not text, a broken compressed file, a Parquet file
that is not one) fails the load with a message naming it, and where in it when known;
so does any other failure while a file is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa

from loaders.formats.delimited import header_names, read_delimited
from loaders.formats.json_lines import read_json, sample_objects
from loaders.formats.lines import first_line
from loaders.formats.parquet import read_parquet
from loaders.formats.read_spec import (
    FILE_COLUMN,
    LINE,
    REJECT,
    TEXT,
    ReadSpec,
    RecordOutput,
    UnreadableInput,
)
from loaders.formats.values import time_of_day_text
from treestore.errors import LoadError, TreestoreError
from treestore.filesystems import input_file

__all__ = [
    "FILE_COLUMN",
    "LINE",
    "REJECT",
    "TEXT",
    "ReadSpec",
    "read_files",
    "sample_field_names",
    "sample_list_fields",
    "time_of_day_text",
]

_SAMPLE_FILES = 20
_READERS: dict[str, Callable[[ReadSpec, str, RecordOutput], Iterator[pa.RecordBatch]]] = {
    "csv": read_delimited,
    "tsv": read_delimited,
    "json": read_json,
    "parquet": read_parquet,
}
_CANNOT_READ = (UnreadableInput, OSError, pa.ArrowException, UnicodeError)
"""What a file that cannot be read raises (the others are failures while reading it)."""


def _cannot_read(path: str, fmt: str, exc: BaseException, after_line: int = 0) -> LoadError:
    """The error that names a file that cannot be read (the follower looks for its words)."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, UnicodeError):
        detail = f"{type(exc).__name__}: {detail}"
    where = f", after line {after_line}" if after_line else ""
    return LoadError(
        f"input file {path} cannot be read as {fmt} ({detail}{where}); "
        "fix or remove it, then load again"
    )


def sample_list_fields(fmt: str, paths: list[str], fields: Iterable[str]) -> frozenset[str]:
    """Which of ``fields`` hold lists in the first files (JSON: their first lines). A file
    that cannot be read raises :class:`LoadError` naming it, as reading it would."""
    wanted = set(fields)
    found: set[str] = set()
    for path in paths[:_SAMPLE_FILES] if fmt in ("json", "parquet") else ():
        try:
            found |= wanted & _list_names(fmt, path)
        except _CANNOT_READ as exc:
            raise _cannot_read(path, fmt, exc) from None
    return frozenset(found)


def _list_names(fmt: str, path: str) -> set[str]:
    """The names of the fields that hold lists in the first lines (JSON) or the schema
    (Parquet) of the file at ``path``."""
    if fmt == "json":
        return {k for doc in sample_objects(path) for k, v in doc.items() if isinstance(v, list)}
    import pyarrow.parquet as pq

    with input_file(path) as source:
        schema = pq.read_schema(source)
    return {
        spec.name
        for spec in schema
        if pa.types.is_list(spec.type) or pa.types.is_large_list(spec.type)
    }


def sample_field_names(fmt: str, paths: list[str]) -> tuple[str, ...]:
    """The field names of a source's first files, in order of appearance: the header of
    csv/tsv files, the keys of JSON lines' objects, the columns of Parquet files. A file
    that cannot be read raises :class:`LoadError` naming it."""
    names: dict[str, None] = {}
    for path in paths[:_SAMPLE_FILES]:
        try:
            if fmt in ("csv", "tsv"):
                first = first_line(path)
                if first is not None:
                    names.update(dict.fromkeys(header_names(first, fmt)))
            elif fmt == "json":
                for doc in sample_objects(path):
                    names.update(dict.fromkeys(doc))
            else:
                import pyarrow.parquet as pq

                with input_file(path) as source:
                    names.update(dict.fromkeys(pq.read_schema(source).names))
        except _CANNOT_READ as exc:
            raise _cannot_read(path, fmt, exc) from None
    return tuple(names)


def read_files(spec: ReadSpec, files: Iterable[tuple[int, str]]) -> Iterator[pa.RecordBatch]:
    """Read ``(number, path)`` files by ``spec``. A file that cannot be read at all raises
    :class:`LoadError` naming it (skipping it would lose it), as does any other failure
    while a file is read, with the last line read before it."""
    reader = _READERS.get(spec.format, read_parquet)
    for number, path in files:
        out = RecordOutput(spec, number)
        try:
            yield from reader(spec, path, out)
        except TreestoreError:
            raise  # says what is wrong already (a path only the driver has)
        except _CANNOT_READ as exc:
            raise _cannot_read(path, spec.format, exc, out.last_line) from None
        except Exception as exc:
            where = f" after line {out.last_line}" if out.last_line else ""
            raise LoadError(
                f"reading input file {path} failed{where}: {type(exc).__name__}: {exc}"
            ) from exc
