"""Input files: finding a source's files and reading them into a DataFrame.

Every field is read as text (arrays of text for JSON/Parquet arrays), so the
map filters and the tree see the same values whatever the format. Each record
also carries ``__file``, the local path of the file it came from.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loaders.job import SourceSpec
from treestore.errors import LoadError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["FILE_COLUMN", "InputFile", "list_input_files", "read_source"]

FILE_COLUMN = "__file"
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


def list_input_files(source: SourceSpec) -> list[InputFile]:
    """The files of ``source``: the file, the visible files under the folder, or the glob's."""
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


def _text_columns(frame: DataFrame) -> list[Column]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    columns = []
    for spec in frame.schema.fields:
        if spec.name.startswith("__"):
            continue  # names starting with "__" are treestore's own
        column = F.col(f"`{spec.name}`")
        if isinstance(spec.dataType, ArrayType):
            column = column.cast("array<string>")
        elif isinstance(spec.dataType, StructType | MapType):
            column = F.to_json(column)
        else:
            column = column.cast("string")
        columns.append(column.alias(spec.name))
    return columns


def read_source(spark: SparkSession, source: SourceSpec, files: list[InputFile]) -> DataFrame:
    """Read ``files`` of ``source`` with every field as text, plus ``__file``."""
    from pyspark.sql import functions as F

    paths = [f.path for f in files]
    reader = spark.read
    if source.format in ("csv", "tsv"):
        options = {"header": str(source.header).lower(), "mode": "PERMISSIVE"}
        if source.format == "tsv":
            options.update(sep="\t", quote="\u0000")
        if source.columns:
            schema = ", ".join(f"`{c}` string" for c in source.columns)
            frame = reader.options(**options).schema(schema).csv(paths)
        else:
            frame = reader.options(**options, inferSchema="false").csv(paths)
    elif source.format == "json":
        frame = reader.json(paths)
    else:
        frame = reader.parquet(*paths)
    raw_file = F.col("_metadata.file_path")
    local_file = F.url_decode(
        F.regexp_replace(F.regexp_replace(raw_file, "^file:(//)?", ""), "\\+", "%2B")
    )
    # The file path must be selected straight from the scan: _metadata is a
    # hidden column of file sources and is gone after any projection.
    return frame.select(*_text_columns(frame), local_file.alias(FILE_COLUMN))


def describe(files: list[InputFile]) -> str:
    """A short human description of a list of files."""
    total = sum(f.size for f in files)
    return f"{len(files)} file{'s' if len(files) != 1 else ''}, {total:,} bytes" + (
        f" in {os.path.commonpath([f.path for f in files])}" if files else ""
    )
