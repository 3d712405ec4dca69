"""Where a store's bytes live: a tiny interface with an in-memory and a filesystem implementation.

Everything a store keeps (configuration, manifests, page runs) is a named blob
of bytes, names being ``/``-separated relative paths. The tree and the store
logic only use :class:`PageStore`; :class:`MemoryPageStore` serves tests and
scratch trees, :class:`FilePageStore` any pyarrow filesystem (a local path, or a
``file://``, ``hdfs://`` or ``s3://`` URI).

Writes are atomic where the filesystem allows it: a blob is written under a
temporary name and renamed into place, so a reader sees the old bytes or the new
ones (on the local filesystem; S3 has no atomic rename, and its writes are atomic per
object anyway; on HDFS a blob is written in place).

On a local filesystem a write is also durable when it returns, so a power cut leaves
the old bytes or the new ones, as a crash does. POSIX makes a file's bytes durable with
``fsync`` of the file, and its name (created, renamed, linked) only with ``fsync`` of
the folder that holds it: the temporary file is synced before the rename or hard link
that publishes it, and its folder after; a new folder's parent is synced once it is
made. Whatever publishes a blob and then names it elsewhere (a run, then the manifest
that lists it; a manifest, then ``CURRENT``) thus finds the first durable before the
second is written. Removals are not synced one by one: a removal a power cut undoes
leaves a file nothing names, which ``gc`` removes again; where the order of removals
matters the caller syncs between them (:meth:`PageStore.sync`). That is two ``fsync``
calls per blob written and one per folder made, none per page. Every one of these
operations is journaled for the power-cut tests when they ask
(:func:`treestore.faults.journal`).
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import shutil
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import pyarrow as pa

from treestore.errors import StoreError
from treestore.faults import journal, journaling, open_for_writing
from treestore.filesystems import (
    FilesystemSettings,
    describe_error,
    is_uri,
    open_location,
    refuses_connections,
)

if TYPE_CHECKING:
    from pyarrow import fs as pafs

__all__ = [
    "FilePageStore",
    "MemoryPageStore",
    "PageStore",
    "create_s3_object",
    "page_store_for",
    "require_folder",
    "sync_folder",
]


class PageStore(ABC):
    """Named blobs of bytes: read whole or by range, write atomically, list, delete."""

    location: str
    """A human-readable place, for messages."""

    @abstractmethod
    def read(self, name: str) -> bytes:
        """The whole blob ``name``; :class:`StoreError` if it does not exist."""

    @abstractmethod
    def read_range(self, name: str, offset: int, length: int) -> bytes:
        """``length`` bytes of blob ``name`` from ``offset``."""

    @abstractmethod
    def write(self, name: str, data: bytes) -> None:
        """Create or replace blob ``name`` atomically."""

    def read_table(self, name: str) -> pa.Table:
        """The blob ``name`` read as an Arrow IPC stream (``pyarrow.ArrowException`` if it is
        not one)."""
        return pa.ipc.open_stream(pa.BufferReader(self.read(name))).read_all()

    def write_table(self, name: str, table: pa.Table) -> None:
        """Write ``table`` as the Arrow IPC stream ``name``, atomically."""
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as stream:
            stream.write_table(table)
        self.write(name, sink.getvalue().to_pybytes())

    @contextmanager
    def writer(self, name: str) -> Iterator[BinaryIO]:
        """Stream a new blob ``name``; it appears atomically when the block ends without error."""
        buffer = io.BytesIO()
        yield buffer
        self.write(name, buffer.getvalue())

    @contextmanager
    def scratch_writer(self, name: str) -> Iterator[BinaryIO]:
        """:meth:`writer` for a blob that lives only while its writer's job runs: a store
        may skip making it durable."""
        with self.writer(name) as handle:
            yield handle

    @abstractmethod
    def create(self, name: str, data: bytes) -> bool:
        """Create blob ``name`` only if it does not exist, atomically: two callers racing
        to create it can never both succeed. False if it exists already."""

    @abstractmethod
    def exists(self, name: str) -> bool:
        """Whether blob ``name`` exists."""

    @abstractmethod
    def list(self, prefix: str = "") -> list[str]:
        """The names of every blob under folder ``prefix`` (recursively), sorted."""

    @abstractmethod
    def delete(self, name: str) -> None:
        """Remove blob ``name`` if it exists."""

    def size(self, name: str) -> int:
        """The size in bytes of blob ``name``."""
        return len(self.read(name))

    def sizes(self, prefix: str = "") -> dict[str, int]:
        """The size of every blob under folder ``prefix`` (recursively), by name: what
        :meth:`list` finds, with sizes (in one listing, where the store can)."""
        return {name: self.size(name) for name in self.list(prefix)}

    def sync(self, folder: str) -> None:
        """Make the removals of blobs in folder ``folder`` durable before going on (writes
        are durable when they return). Nothing to do where every change is durable once
        made (memory, object stores)."""
        return None

    def local_path(self, name: str) -> Path | None:
        """The blob's path on the local filesystem, if it has one."""
        return None

    def modified(self, name: str) -> float | None:
        """When blob ``name`` was last written (seconds since the epoch, by the clock of
        whatever holds it), or None if the store cannot tell or it does not exist."""
        return None


class MemoryPageStore(PageStore):
    """Blobs in a dict; thread-safe; for tests and scratch trees."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.times: dict[str, float] = {}
        # unique for the process's life (not ``id(self)``, which a later store can reuse:
        # the page cache, keyed by location, then served it a freed store's pages)
        self.location = f"memory:{uuid.uuid4().hex[:16]}"
        self._lock = threading.Lock()

    def read(self, name: str) -> bytes:
        try:
            return self.blobs[name]
        except KeyError:
            raise StoreError(f"{self.location}/{name} does not exist.") from None

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        return self.read(name)[offset : offset + length]

    def write(self, name: str, data: bytes) -> None:
        with self._lock:
            self.blobs[name] = bytes(data)
            self.times[name] = time.time()

    def create(self, name: str, data: bytes) -> bool:
        with self._lock:
            if name in self.blobs:
                return False
            self.blobs[name] = bytes(data)
            self.times[name] = time.time()
            return True

    def modified(self, name: str) -> float | None:
        return self.times.get(name) if name in self.blobs else None

    def exists(self, name: str) -> bool:
        return name in self.blobs

    def list(self, prefix: str = "") -> list[str]:
        folder = prefix.rstrip("/") + "/" if prefix else ""
        return sorted(n for n in self.blobs if n.startswith(folder))

    def sizes(self, prefix: str = "") -> dict[str, int]:
        folder = prefix.rstrip("/") + "/" if prefix else ""
        with self._lock:
            return {n: len(data) for n, data in self.blobs.items() if n.startswith(folder)}

    def delete(self, name: str) -> None:
        with self._lock:
            self.blobs.pop(name, None)

    def size(self, name: str) -> int:
        return len(self.read(name))


class FilePageStore(PageStore):
    """Blobs as files under a root folder of a pyarrow filesystem."""

    def __init__(self, location: str | os.PathLike[str]) -> None:
        text = os.fspath(location)
        self._uri = is_uri(text)
        self.location = text.rstrip("/") if self._uri else str(Path(text).expanduser().resolve())
        self.settings = FilesystemSettings.capture() if self._uri else FilesystemSettings()
        """The driver's object-store settings, applied wherever this store is opened (a
        task's worker on an executor included)."""
        self._fs: pafs.FileSystem | None = None
        self._root: str | None = None

    def __getstate__(self) -> dict[str, object]:
        """Pickled for Spark tasks without the open filesystem (opened again where used)."""
        return {**self.__dict__, "_fs": None, "_root": None}

    def _open(self) -> tuple[pafs.FileSystem, str]:
        if self._fs is None or self._root is None:
            self.settings.apply()
            self._fs, root = open_location(self.location)
            self._root = root.rstrip("/") or "/"
        return self._fs, self._root

    @property
    def fs(self) -> pafs.FileSystem:
        """The pyarrow filesystem the store lives on."""
        return self._open()[0]

    @property
    def root(self) -> str:
        """The store's folder in :attr:`fs`."""
        return self._open()[1]

    @property
    def is_local(self) -> bool:
        """Whether the store is on the local filesystem."""
        return not self._uri or self.location.startswith("file://")

    def _path(self, name: str) -> str:
        return posixpath.join(self.root, name)

    def _failed(self, name: str, doing: str, exc: OSError) -> StoreError:
        """A filesystem error as one line: where, what, and what to check."""
        in_the_way = self.file_in_the_way()
        if in_the_way is not None:
            return _not_a_folder(self.location, in_the_way)
        return StoreError(f"{self.location}/{name} {doing}: {describe_error(exc)}")

    def file_in_the_way(self) -> str | None:
        """The store's location, or the folder above it, if it is a file (then no store can
        be there), else None."""
        if not self._uri:
            for place in (Path(self.location), *Path(self.location).parents):
                if place.is_file():
                    return str(place)
            return None
        from pyarrow import fs as pafs

        try:
            kind = self.fs.get_file_info(self.root).type
        except OSError as exc:
            if refuses_connections(exc):  # every next lookup would wait out its retries too
                said = describe_error(exc)
                raise StoreError(f"{self.location} cannot be looked up: {said}") from exc
            return None
        return self.location if kind == pafs.FileType.File else None

    def folder_exists(self) -> bool:
        """Whether anything is at the store's location (a folder, or objects under it)."""
        if not self._uri:
            return Path(self.location).exists()
        return bool(self.list())

    def remove_all(self) -> None:
        """Delete the store's folder and everything in it."""
        if not self._uri:
            shutil.rmtree(self.location, ignore_errors=True)
            return
        for name in self.list():
            self.delete(name)

    def read(self, name: str) -> bytes:
        try:
            with self.fs.open_input_stream(self._path(name)) as stream:
                return bytes(stream.read())
        except FileNotFoundError:
            raise StoreError(f"{self.location}/{name} does not exist.") from None
        except OSError as exc:
            raise self._failed(name, "cannot be read", exc) from exc

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        try:
            with self.fs.open_input_file(self._path(name)) as handle:
                return bytes(handle.read_at(length, offset))
        except FileNotFoundError:
            raise StoreError(f"{self.location}/{name} does not exist.") from None
        except OSError as exc:
            raise self._failed(name, "cannot be read", exc) from exc

    def read_table(self, name: str) -> pa.Table:
        """The blob ``name`` read as an Arrow IPC stream (``pyarrow.ArrowException`` if it is
        not one)."""
        return pa.ipc.open_stream(pa.BufferReader(self.read(name))).read_all()

    def write_table(self, name: str, table: pa.Table) -> None:
        """Write ``table`` as the Arrow IPC stream ``name``, atomically."""
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as stream:
            stream.write_table(table)
        self.write(name, sink.getvalue().to_pybytes())

    @contextmanager
    def writer(self, name: str) -> Iterator[BinaryIO]:
        with self._writer(name, durable=True) as handle:
            yield handle

    @contextmanager
    def scratch_writer(self, name: str) -> Iterator[BinaryIO]:
        """:meth:`writer` for a blob that lives only while the process that asks for it
        runs (a load's routed records): on a local store not synced to the disk (a power
        cut fails that load anyway), still whole or not at all."""
        with self._writer(name, durable=False) as handle:
            yield handle

    @contextmanager
    def _writer(self, name: str, durable: bool) -> Iterator[BinaryIO]:
        path = self._path(name)
        folder = posixpath.dirname(path)
        temp = posixpath.join(folder, f".{posixpath.basename(path)}.{uuid.uuid4().hex}.tmp")
        try:
            if self.is_local and durable:
                _make_folders(folder)
                with _new_file(temp) as handle:
                    yield handle
                _publish_file(temp, path)
            elif self.is_local:
                _make_folders(folder, durable=False)
                with open_for_writing(temp) as handle:
                    yield handle
                    handle.flush()
                    _journal_written(temp)
                os.replace(temp, path)
                journal("rename", temp, path)
            else:
                # an object appears whole when its upload completes: no rename needed
                self.fs.create_dir(folder, recursive=True)
                with self.fs.open_output_stream(path) as stream:
                    yield stream  # type: ignore[misc]
        except OSError as exc:
            raise self._failed(name, "cannot be written", exc) from exc
        finally:
            if self.is_local:
                with contextlib.suppress(OSError):
                    _remove_file(temp)

    def write(self, name: str, data: bytes) -> None:
        with self.writer(name) as out:
            out.write(data)

    def create(self, name: str, data: bytes) -> bool:
        """Exclusive creation: a hard link of a complete temporary file on a local
        filesystem, a conditional write (``If-None-Match: *``) on S3."""
        path = self._path(name)
        if self.is_local:
            folder = os.path.dirname(path)
            try:
                _make_folders(folder)
            except OSError as exc:
                raise self._failed(name, "cannot be written", exc) from exc
            temp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
            try:
                with _new_file(temp) as handle:
                    handle.write(data)
                _link_file(temp, path)
            except FileExistsError:
                return False
            except OSError as exc:
                raise self._failed(name, "cannot be written", exc) from exc
            finally:
                with contextlib.suppress(OSError):
                    _remove_file(temp)
            return True
        if self.location.startswith("s3://"):
            return create_s3_object(path, data, self.settings)
        if self.exists(name):  # other filesystems: no exclusive create in pyarrow
            return False
        self.write(name, data)
        return True

    def exists(self, name: str) -> bool:
        from pyarrow import fs as pafs

        try:
            return self.fs.get_file_info(self._path(name)).type == pafs.FileType.File
        except OSError as exc:
            raise self._failed(name, "cannot be looked up", exc) from exc

    def list(self, prefix: str = "") -> list[str]:
        return sorted(self.sizes(prefix))

    def sizes(self, prefix: str = "") -> dict[str, int]:
        from pyarrow import fs as pafs

        base = self._path(prefix) if prefix else self.root
        selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
        sizes = {}
        try:
            found = self.fs.get_file_info(selector)
        except FileNotFoundError:
            # the folder went missing while it was listed (or was being made by another
            # process, as racing loads make ``locks/``): nothing is in it
            return {}
        except OSError as exc:
            raise self._failed(prefix, "cannot be listed", exc) from exc
        for info in found:
            if info.type == pafs.FileType.File:
                sizes[posixpath.relpath(info.path, self.root)] = int(info.size or 0)
        return sizes

    def delete(self, name: str) -> None:
        try:
            if self.is_local:
                _remove_file(self._path(name))
            else:
                self.fs.delete_file(self._path(name))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self._failed(name, "cannot be deleted", exc) from exc

    def size(self, name: str) -> int:
        try:
            info = self.fs.get_file_info(self._path(name))
        except OSError as exc:
            raise self._failed(name, "cannot be looked up", exc) from exc
        if info.size is None:
            raise StoreError(f"{self.location}/{name} does not exist.")
        return int(info.size)

    def sync(self, folder: str) -> None:
        if self.is_local and os.path.isdir(self._path(folder)):
            try:
                sync_folder(self._path(folder))
            except OSError as exc:
                raise self._failed(folder, "cannot be synced", exc) from exc

    def local_path(self, name: str) -> Path | None:
        return Path(self._path(name)) if self.is_local else None

    def modified(self, name: str) -> float | None:
        try:
            info = self.fs.get_file_info(self._path(name))
        except OSError:
            return None
        return None if info.mtime_ns is None or info.size is None else info.mtime_ns / 1e9


# A local store's file operations, in the order that survives a power cut (see the
# module's docstring), each journaled once done.
def _make_folders(path: str, durable: bool = True) -> None:
    """Make folder ``path`` and the folders above it that are missing, each made durable
    (its parent synced) unless ``durable`` is False.

    A folder found already there is taken as durable: the process that made it syncs its
    parent before it publishes anything, and a load's driver publishes only after every
    task that wrote into it has ended."""
    missing = []
    place = path
    while not os.path.isdir(place):
        missing.append(place)
        parent = os.path.dirname(place)
        if parent == place:
            break
        place = parent
    os.makedirs(path, exist_ok=True)
    for folder in reversed(missing):  # from the top down
        journal("mkdir", folder)
        if durable:
            sync_folder(os.path.dirname(folder))


@contextmanager
def _new_file(path: str) -> Iterator[BinaryIO]:
    """Create the file ``path`` (a name nothing else uses) for the block to write; when the
    block ends without error, its bytes are synced to the disk."""
    with open_for_writing(path) as handle:
        yield handle
        handle.flush()
        _journal_written(path)
        os.fsync(handle.fileno())
        journal("fsync", path)


def _journal_written(path: str) -> None:
    """Journal the bytes the file ``path`` now holds (when journaling is on)."""
    if journaling():
        with open(path, "rb") as written:
            journal("write", path, data=written.read())


def _publish_file(temp: str, path: str) -> None:
    """Rename the synced file ``temp`` to ``path`` (replacing what ``path`` held), durably:
    its folder is synced after."""
    os.replace(temp, path)
    journal("rename", temp, path)
    sync_folder(os.path.dirname(path))


def _link_file(temp: str, path: str) -> None:
    """Make ``path`` a name of the synced file ``temp``, durably (its folder is synced
    after); :class:`FileExistsError` if ``path`` exists (exclusive creation)."""
    os.link(temp, path)
    journal("link", temp, path)
    sync_folder(os.path.dirname(path))


def _remove_file(path: str) -> None:
    """Remove the name ``path`` (:class:`FileNotFoundError` if there is none)."""
    os.remove(path)
    journal("unlink", path)


def sync_folder(path: str) -> None:
    """Make the names in folder ``path`` durable: the files created, renamed, linked into
    it or removed from it, and the folders made in it, so far."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    journal("fsyncdir", path)


def page_store_for(location: str | os.PathLike[str] | PageStore) -> PageStore:
    """A :class:`PageStore` for a store location (a path, a URI, or a page store already)."""
    if isinstance(location, PageStore):
        return location
    return FilePageStore(location)


def _not_a_folder(location: str, file: str, creating: bool = False) -> StoreError:
    where = location if file == location else f"{location} (its folder {file})"
    new = ", or a new folder to create one in" if creating else ""
    return StoreError(f"{where} is a file, not a store folder: give the folder of a store{new}.")


def require_folder(pages: PageStore, creating: bool = False) -> None:
    """Raise :class:`StoreError` (one line, nothing created) if the page store's location is
    a file or lies under one (``creating``: for a command that may create the store, the
    message says a new folder will do)."""
    if isinstance(pages, FilePageStore):
        in_the_way = pages.file_in_the_way()
        if in_the_way is not None:
            raise _not_a_folder(pages.location, in_the_way, creating)


def create_s3_object(path: str, data: bytes, settings: FilesystemSettings) -> bool:
    """Create the S3 object at ``path`` (``bucket/key``) only if it does not exist, with a
    conditional write (``If-None-Match: *``, S3 and most S3-compatible stores since 2024).
    False if it exists."""
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError as exc:  # pragma: no cover - boto3 is a dependency
        raise StoreError("A store on S3 needs boto3: pip install boto3.") from exc
    settings.apply()
    bucket, _, key = path.partition("/")
    try:
        boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
            return False
        raise StoreError(f"s3://{path} cannot be written: {describe_error(exc)}") from exc
    except BotoCoreError as exc:
        raise StoreError(f"s3://{path} cannot be written: {describe_error(exc)}") from exc
    return True
