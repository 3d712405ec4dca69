"""A query's rows written as Parquet: one file, or a folder of part files.

:meth:`query.driver.result.Rows.to_parquet` first resolves where the rows go
(:func:`parquet_target`, which refuses what is in the way before any row is read), then
hands its Arrow batches to :func:`write_parquet`, which writes them as they come.

Where (as ``treestore sweep --out`` has it): a name that ends in ``.parquet`` is **one
file** (``out.parquet``, ``results/day.parquet``, ``s3://bucket/day.parquet``; the folders
above it are made when missing); any other name, one that ends in ``/`` and an existing
folder are a **folder of part files**: ``part-00000.parquet``, ``part-00001.parquet``... of
at most ``rows_per_part`` rows each (a result without rows is one part holding the columns
alone). A place is a local path or a location URI (``s3://bucket/results/``,
``hdfs://host/results``, ``file:///data/results``), opened as a store's location is
(:mod:`treestore.filesystems`, with the driver's ``AWS_*`` settings).

Safely: where the filesystem renames atomically (local, HDFS), every file is written under
a hidden temporary name in its own folder (``.part-00000.parquet.<random>.tmp``; Parquet
readers skip names that start with ``.``), synced (local), and renamed to its name once the
last row is written, all the parts at the end: a final name holds a whole result or
nothing. A killed write leaves at most a hidden temporary file; a write that fails (an
error while the rows arrive, a cancelled query, Ctrl-C) removes its temporary files. On an
object store (S3, GCS) a part is written under its name and appears whole when its upload
completes; a write that fails removes the parts it wrote.

Replacing: a file at the target, or part files already in the folder, are replaced only
when asked (``overwrite``); otherwise :class:`~treestore.errors.OutputError` names them and
the option to pass. A folder's other files are left alone; its old part files that the new
result does not write again are removed after the new ones are in place (on an object
store: before the first new part is written).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from treestore.errors import OutputError
from treestore.failpoints import failpoint
from treestore.faults import open_for_writing
from treestore.filesystems import describe_error, split_location
from treestore.storage.pagestore import sync_folder

__all__ = [
    "ROWS_PER_PART",
    "ParquetTarget",
    "ParquetWritten",
    "parquet_target",
    "write_parquet",
]

ROWS_PER_PART = 1 << 23
"""The most rows of one part file of a folder (about 8.4M)."""
ROW_GROUP_ROWS = 1 << 18
"""The most rows the writer holds before writing them as one row group (262,144: on a
10.7M-row scan the writer then adds about 40 MiB to the driver's peak, against 75 MiB for
1M-row groups, for a file 2% bigger)."""
ROW_GROUP_BYTES = 32 << 20
"""The most bytes of rows the writer holds before writing them as one row group."""
_PART_NAME = re.compile(r"part-\d{5,}\.parquet")
_RENAMING = frozenset({"local", "hdfs"})
"""Filesystems (pyarrow's ``type_name``) whose renames are atomic."""


@dataclass(frozen=True)
class ParquetWritten:
    """What a write left: ``rows`` rows of ``columns`` columns at ``location`` (as it was
    given), in ``files`` (local paths or URIs: the one file, or the folder's parts in order);
    ``folder``: whether ``location`` is a folder of part files."""

    rows: int
    columns: int
    location: str
    files: tuple[str, ...]
    folder: bool


@dataclass(frozen=True)
class ParquetTarget:
    """Where rows go, checked (see :func:`parquet_target`): ``path`` in ``filesystem`` is the
    file, or the folder of part files when ``folder``; ``prefix + path`` is its location
    again. ``old_parts``: the part files the folder holds, to be replaced (only with leave
    to overwrite)."""

    location: str
    filesystem: pafs.FileSystem
    path: str
    prefix: str
    folder: bool
    old_parts: tuple[str, ...] = ()

    @property
    def is_local(self) -> bool:
        """Whether the target is on the local filesystem (written through Python files)."""
        return bool(self.filesystem.type_name == "local")

    @property
    def renames(self) -> bool:
        """Whether files are written under temporary names and renamed into place."""
        return self.filesystem.type_name in _RENAMING

    def check_outside(self, store: str) -> None:
        """Refuse a target in the folder of ``store`` (a store's location): its files are
        the store's to name and collect."""
        here, there = self.prefix + self.path, store.rstrip("/")
        if here == there or here.startswith(there + "/"):
            raise OutputError(
                f"{self.location} is inside the store {store}: write the results elsewhere."
            )


def parquet_target(
    location: str | os.PathLike[str], *, overwrite: bool = False, option: str = "overwrite=True"
) -> ParquetTarget:
    """Where ``location`` sends rows (a ``.parquet`` file, else a folder of part files: see
    the module's docstring), after checking, without writing anything, that they can go there: an
    existing file, or part files already in the folder, need ``overwrite``; a local place
    under a file, or in a folder that cannot be written, is refused. Refusals are an
    :class:`~treestore.errors.OutputError` that names ``option`` (how the caller asks to
    overwrite: ``overwrite=True``, ``--replace``)."""
    text = os.fspath(location)
    filesystem, path, prefix = split_location(text, OutputError)
    local = filesystem.type_name == "local"
    try:
        found = filesystem.get_file_info(path).type
        folder = (
            found == pafs.FileType.Directory
            or text.endswith(("/", os.sep))
            or not text.lower().endswith(".parquet")
        )
        if folder and found == pafs.FileType.File:
            raise OutputError(f"{text} is a file, not a folder: name a folder for the part files.")
        if local:
            _check_writable(text, path if folder else os.path.dirname(path))
        old: tuple[str, ...] = ()
        if folder and found == pafs.FileType.Directory:
            old = _parts_in(filesystem, path)
            if old and not overwrite:
                raise OutputError(
                    f"{text} already holds {len(old)} part file(s) ({posixpath.basename(old[0])}"
                    f"...): pass {option} to replace them, or choose another folder."
                )
        if not folder and found == pafs.FileType.File and not overwrite:
            raise OutputError(
                f"{text} exists: pass {option} to replace it, or choose another name."
            )
    except OSError as exc:
        raise OutputError(f"Cannot write {text}: {describe_error(exc)}") from exc
    return ParquetTarget(text, filesystem, path, prefix, folder, old)


def _check_writable(text: str, folder: str) -> None:
    """Refuse a local ``folder`` (or the nearest folder above it that exists) that is a file
    or that this process cannot write in."""
    place = Path(folder)
    while not place.exists() and place != place.parent:
        place = place.parent
    if not place.is_dir():
        raise OutputError(f"Cannot write {text}: {place} is a file, not a folder.")
    if not os.access(place, os.W_OK | os.X_OK):
        raise OutputError(f"Cannot write {text}: the folder {place} is not writable.")


def _parts_in(filesystem: pafs.FileSystem, folder: str) -> tuple[str, ...]:
    """The part files directly in ``folder``, sorted."""
    infos = filesystem.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
    return tuple(
        sorted(
            info.path
            for info in infos
            if info.type == pafs.FileType.File and _PART_NAME.fullmatch(info.base_name)
        )
    )


def write_parquet(
    target: ParquetTarget,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    *,
    empty: Callable[[], pa.Table] | None = None,
    rows_per_part: int = ROWS_PER_PART,
) -> ParquetWritten:
    """Write ``batches``, each cast to ``schema``, at ``target`` as they come: the rows are
    held only until a row group's worth (:data:`ROW_GROUP_ROWS` or :data:`ROW_GROUP_BYTES`)
    is written. Without a row, the one file (or part) holds ``empty()``'s columns (default:
    ``schema``'s). A failure of any kind (the batches' own included) removes what this
    write made and is raised again; a filesystem's error is an
    :class:`~treestore.errors.OutputError`."""
    if rows_per_part < 1:
        raise OutputError(f"rows_per_part must be at least 1, not {rows_per_part}.")
    files = _Files(target, schema, rows_per_part if target.folder else None)
    try:
        for batch in batches:
            files.add(_conformed(batch, schema))
        if files.rows == 0 and empty is not None:
            files.schema = empty().schema
        return files.finish()
    except BaseException:
        files.abort()
        raise


def _conformed(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``schema``'s names and types (a missing column: nulls)."""
    if batch.num_columns > len(schema):
        raise OutputError(
            f"A batch of the result has {batch.num_columns} columns, its schema {len(schema)}."
        )
    columns = []
    for i, field in enumerate(schema):
        column = batch.column(i) if i < batch.num_columns else pa.nulls(batch.num_rows)
        columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


@dataclass
class _OpenFile:
    """A file being written: its final path, its temporary one (None: written in place)."""

    final: str
    temp: str | None
    sink: Any
    writer: pq.ParquetWriter | None = None


class _Files:
    """The files of one write: rows held for the next row group, the file open now, the
    files done (not yet under their names, where the filesystem renames)."""

    def __init__(self, target: ParquetTarget, schema: pa.Schema, limit: int | None) -> None:
        self.target = target
        self.schema = schema
        self.limit = limit
        self.rows = 0
        self._held: list[pa.RecordBatch] = []
        self._held_rows = 0
        self._held_bytes = 0
        self._part_rows = 0
        self._open: _OpenFile | None = None
        self._done: list[_OpenFile] = []
        self._published: list[str] = []

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A filesystem's error, as one line naming the target."""
        try:
            yield
        except OSError as exc:
            raise OutputError(
                f"Cannot write {self.target.location}: {describe_error(exc)}"
            ) from exc

    def add(self, batch: pa.RecordBatch) -> None:
        """Hold ``batch``'s rows; write a row group when enough are held, and end a part
        when it is full."""
        while batch.num_rows:
            room = batch.num_rows
            if self.limit is not None:
                room = min(room, self.limit - self._part_rows - self._held_rows)
            taken = batch.slice(0, room)
            batch = batch.slice(room)
            self._held.append(taken)
            self._held_rows += taken.num_rows
            self._held_bytes += taken.nbytes
            full = self.limit is not None and self._part_rows + self._held_rows >= self.limit
            if full or self._held_rows >= ROW_GROUP_ROWS or self._held_bytes >= ROW_GROUP_BYTES:
                self._write_held()
            if full:
                self._close_open()

    def _write_held(self) -> None:
        """Write the rows held as one row group of the file open (opened if none is)."""
        if not self._held_rows:
            return
        if self._open is None:
            self._open_next()
        assert self._open is not None and self._open.writer is not None
        table = pa.Table.from_batches(self._held, self.schema)
        with self._writing():
            self._open.writer.write_table(table, row_group_size=table.num_rows)
            if self.target.is_local:
                self._open.sink.flush()  # the row group in the file, not in Python's buffer
        self._part_rows += self._held_rows
        self.rows += self._held_rows
        self._held, self._held_rows, self._held_bytes = [], 0, 0
        failpoint("parquet-row-group-written")  # in a temporary file, not under its name

    def _open_next(self) -> None:
        """Open the next file: the target's file, or the folder's next part."""
        target = self.target
        if target.folder:
            final = posixpath.join(target.path, f"part-{len(self._done):05d}.parquet")
        else:
            final = target.path
        folder, name = posixpath.split(final)
        if not target.renames and not self._done:
            self._remove(target.old_parts)  # replaced: no rename can keep them until the end
        temp = posixpath.join(folder, f".{name}.{uuid.uuid4().hex}.tmp") if target.renames else None
        with self._writing():
            if target.is_local:
                os.makedirs(folder, exist_ok=True)
                self._open = _OpenFile(final, temp, open_for_writing(temp or final))
            else:
                target.filesystem.create_dir(folder, recursive=True)
                self._open = _OpenFile(
                    final, temp, target.filesystem.open_output_stream(temp or final)
                )
            self._open.writer = pq.ParquetWriter(self._open.sink, self.schema)

    def _close_open(self) -> None:
        """Finish the file open now (its footer; synced when local)."""
        opened = self._open
        if opened is None:
            return
        assert opened.writer is not None
        with self._writing():
            opened.writer.close()
            if self.target.is_local:
                opened.sink.flush()
                os.fsync(opened.sink.fileno())
            opened.sink.close()
        self._done.append(opened)
        self._open = None
        self._part_rows = 0

    def finish(self) -> ParquetWritten:
        """Write what is held, finish the last file, put every file under its name (where
        the filesystem renames) and remove the old parts the new ones do not replace."""
        self._write_held()
        if self._open is None and not self._done:  # no row: a file of the columns alone
            self._open_next()
        self._close_open()
        finals = [done.final for done in self._done]
        with self._writing():
            if self.target.renames:
                for done in self._done:
                    self._publish(done)
                if self.target.is_local:
                    for folder in sorted({posixpath.dirname(final) for final in finals}):
                        sync_folder(folder)  # the renames into it
                self._remove([old for old in self.target.old_parts if old not in finals])
        return ParquetWritten(
            rows=self.rows,
            columns=len(self.schema),
            location=self.target.location,
            files=tuple(self.target.prefix + final for final in finals),
            folder=self.target.folder,
        )

    def _publish(self, done: _OpenFile) -> None:
        """Rename a finished file's temporary file to its name (replacing a file there)."""
        assert done.temp is not None
        if self.target.is_local:
            os.replace(done.temp, done.final)
        else:
            with contextlib.suppress(FileNotFoundError):
                self.target.filesystem.delete_file(done.final)  # HDFS renames onto nothing
            self.target.filesystem.move(done.temp, done.final)
        self._published.append(done.final)

    def abort(self) -> None:
        """Remove every file this write made (and close the one open)."""
        opened, self._open = self._open, None
        if opened is not None:
            with contextlib.suppress(Exception):
                if opened.writer is not None:
                    opened.writer.close()
            with contextlib.suppress(Exception):
                opened.sink.close()
        made = [*self._done, *([opened] if opened is not None else [])]
        leftovers = [f.temp if f.temp is not None else f.final for f in made]
        self._remove([*leftovers, *self._published])

    def _remove(self, paths: Iterable[str]) -> None:
        """Remove ``paths`` that exist (what cannot be removed is left)."""
        for path in paths:
            with contextlib.suppress(OSError):
                if self.target.is_local:
                    os.remove(path)
                else:
                    self.target.filesystem.delete_file(path)
