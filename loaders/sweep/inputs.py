"""The sweep's two inputs (events, intervals): read like a load's sources, then typed.

A table is a csv/tsv (with a header), json-lines or parquet file, folder or glob, at a
local path or a URI (``s3://bucket/events/``); its format comes from the names (or
``--format``). The files are listed on the driver and read in the Spark tasks with
the load's readers (:mod:`loaders.load.inputs`): the executors never open a path only
the driver has, and object stores need no Hadoop jars. Every value is read as text;
a column whose values all read as whole numbers becomes ``int`` (``bigint`` past 32
bits), one whose values all read as numbers ``double``, as Spark's schema inference
does (an empty value is null); the rest stay text (the sweep command then parses its
time columns, with ``--time-format`` if given).
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import TYPE_CHECKING

from loaders.formats.readers import sample_field_names
from loaders.job.model import SourceSpec
from loaders.load.inputs import InputFile, list_input_files, read_source
from loaders.sweep.options import INPUT_FORMATS
from treestore.errors import LoadError
from treestore.filesystems import is_uri
from treestore.spark import spark_errors

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["format_of", "read_table"]

_COMPRESSED = (".gz", ".bz2", ".zst", ".lz4", ".br")


def format_of(name: str) -> str | None:
    """The format a file name says (``a.csv``, ``a.tsv.gz``), or None."""
    base = posixpath.basename(name.rstrip("/")).lower()
    for suffix in _COMPRESSED:
        base = base.removesuffix(suffix)
    return INPUT_FORMATS.get(posixpath.splitext(base)[1])


def list_table(path: str, fmt: str | None = None) -> tuple[str, str, list[InputFile]]:
    """A table's location, format (``fmt``, else told by the files' names) and files, with
    no Spark: a missing path, a format that cannot be told, or no files is a LoadError."""
    location = path if is_uri(path) else str(Path(path).expanduser().resolve())
    source = SourceSpec(name=path, path=location, format="csv")
    try:
        files = list_input_files(source)
    except LoadError as exc:
        if "does not exist" not in str(exc):
            raise
        raise LoadError(
            f"{path} does not exist: give a csv, tsv, json or parquet file or folder."
        ) from None
    kinds = {fmt} if fmt else {format_of(f.path) for f in files} - {None}
    if not fmt and not kinds and not files:
        kinds = {format_of(location)} - {None}
    if len(kinds) != 1:
        raise LoadError(
            f"Cannot tell the format of {path}: "
            "name it .csv, .tsv, .json or .parquet, or pass --format."
        )
    if not files:
        raise LoadError(f"{path} holds no files: give a csv, tsv, json or parquet file or folder.")
    kind = kinds.pop()
    assert kind is not None
    return location, kind, files


def read_table(spark: SparkSession, path: str, fmt: str | None = None) -> DataFrame:
    """Read a table's files (a file, folder or glob; a local path or a URI), typed."""
    location, kind, files = list_table(path, fmt)
    source = SourceSpec(name=path, path=location, format=kind)  # type: ignore[arg-type]
    with spark_errors(LoadError, f"Reading {path}"):
        fields = sample_field_names(kind, [f.path for f in files])
        frame = read_source(spark, source, files, fields, lists=frozenset())
        # a row set aside by the reader keeps its place with null values: the sweep counts
        # it among the rows it skips (null id or time), none is lost without a word
        return _typed(frame.select(*(f"`{f}`" for f in fields)))


def _typed(frame: DataFrame) -> DataFrame:
    """Columns whose values all read as numbers, as numbers (one pass over the data)."""
    from pyspark.sql import functions as F

    kinds = ("int", "bigint", "double")
    # an empty value is null, as in Spark's own readers
    frame = frame.select(*(F.nullif(F.col(f"`{c}`"), F.lit("")).alias(c) for c in frame.columns))
    counts = frame.agg(
        *(
            F.count(F.col(f"`{name}`").try_cast(kind)).alias(f"{i}:{kind}")
            for i, name in enumerate(frame.columns)
            for kind in ("string", *kinds)
        )
    ).first()
    assert counts is not None
    typed = []
    for i, name in enumerate(frame.columns):
        column = F.col(f"`{name}`")
        present = counts[f"{i}:string"]
        kind = next((k for k in kinds if present and counts[f"{i}:{k}"] == present), None)
        typed.append(column.try_cast(kind).alias(name) if kind else column)
    return frame.select(*typed)
