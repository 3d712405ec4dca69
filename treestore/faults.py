"""Faults a test can inject into the store's writes: a disk that fills up, and a journal of
every file operation, from which a test computes what a power cut would leave.

In the spirit of :mod:`treestore.failpoints`. When ``TREESTORE_FAULT_DISK_FOLDER`` and
``TREESTORE_FAULT_DISK_BYTES`` are set, the files the page store writes under that
folder behave as if the folder were a filesystem of that many bytes: a write that would
take the files under it past the capacity fails with ``ENOSPC`` ("No space left on
device"), as on a full disk. Tests use it where they cannot mount a small tmpfs (that
needs root). The variables reach a load's Spark tasks when they are set for the process
that starts Spark (a ``treestore load`` subprocess): its Python workers inherit them.
Unset (always, outside tests), opening a file costs one dict lookup.

When ``TREESTORE_FAULT_JOURNAL`` names a folder, each operation a page store makes on a
local filesystem (a file written, a file or folder synced, a rename, a hard link, a
removal, a folder made: see :mod:`treestore.storage.pagestore`) is appended to
``journal.jsonl`` in it once it is done, one JSON line per operation written in one
``write`` to a file opened for appending, so the processes of a load (the driver and
its Spark tasks' Python workers, which inherit the variable) share one journal in the
order their operations completed. A written file's bytes are kept under ``blobs/`` by
their SHA-256. The power-cut tests (``tests/support/reliability/powercut.py``) replay
the journal to compute what would survive a power cut after any of its operations.
Unset, an operation costs one dict lookup.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

__all__ = [
    "DISK_BYTES_VARIABLE",
    "DISK_FOLDER_VARIABLE",
    "JOURNAL_VARIABLE",
    "folder_bytes",
    "journal",
    "journaling",
    "open_for_writing",
]

DISK_FOLDER_VARIABLE = "TREESTORE_FAULT_DISK_FOLDER"
"""The folder that behaves as a small filesystem."""
DISK_BYTES_VARIABLE = "TREESTORE_FAULT_DISK_BYTES"
"""Its capacity in bytes: the sizes of the files under it never go past it."""
JOURNAL_VARIABLE = "TREESTORE_FAULT_JOURNAL"
"""The folder of the journal of file operations (unset: no journal)."""


def open_for_writing(path: str) -> BinaryIO:
    """``open(path, "wb")``, or, if ``path`` lies under the folder of a disk-full fault, a
    file whose writes fail with ``ENOSPC`` once that folder's files would pass its capacity."""
    folder = os.environ.get(DISK_FOLDER_VARIABLE)
    if not folder or not _is_under(path, folder):
        return open(path, "wb")
    capacity = int(os.environ.get(DISK_BYTES_VARIABLE, "0"))
    return io.BufferedWriter(_SmallDiskFile(path, folder, capacity))


def folder_bytes(folder: str | os.PathLike[str]) -> int:
    """The sizes of every file under ``folder`` (recursively), added up."""
    total = 0
    for parent, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(parent, name)).st_size
            except FileNotFoundError:  # removed since it was listed (another process's temp)
                continue
    return total


def _is_under(path: str, folder: str) -> bool:
    return os.path.abspath(path).startswith(os.path.abspath(folder).rstrip(os.sep) + os.sep)


class _SmallDiskFile(io.FileIO):
    """A file of a folder that holds at most ``capacity`` bytes: a write past it fails."""

    def __init__(self, path: str, folder: str, capacity: int) -> None:
        super().__init__(path, "wb")
        self._folder = folder
        self._capacity = capacity

    def write(self, data: ReadableBuffer, /) -> int:
        """Write ``data``, or fail as a full disk does if the folder cannot hold it."""
        if folder_bytes(self._folder) + memoryview(data).nbytes > self._capacity:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(data)


def journaling() -> bool:
    """Whether file operations are being journaled (``TREESTORE_FAULT_JOURNAL`` is set)."""
    return bool(os.environ.get(JOURNAL_VARIABLE))


def journal(op: str, path: str, to: str | None = None, data: bytes | None = None) -> None:
    """Append a done file operation to the journal, if ``TREESTORE_FAULT_JOURNAL`` is set.

    Args:
        op: ``write`` (``path`` now holds ``data``, not yet synced), ``fsync`` (the file's
            bytes are durable), ``fsyncdir`` (the folder's names are durable), ``rename``
            (``path`` moved to ``to``, replacing it), ``link`` (``to`` made another name of
            ``path``), ``unlink`` (the name ``path`` removed) or ``mkdir``.
        path: the file or folder.
        to: the new name of a ``rename`` or ``link``.
        data: the bytes a ``write`` left in the file.
    """
    folder = os.environ.get(JOURNAL_VARIABLE)
    if not folder:
        return
    entry: dict[str, object] = {"op": op, "path": os.path.abspath(path), "pid": os.getpid()}
    if to is not None:
        entry["to"] = os.path.abspath(to)
    if data is not None:
        digest = hashlib.sha256(data).hexdigest()
        blob = os.path.join(folder, "blobs", digest)
        if not os.path.exists(blob):
            os.makedirs(os.path.dirname(blob), exist_ok=True)
            temp = f"{blob}.{os.getpid()}"
            with open(temp, "wb") as handle:
                handle.write(data)
            os.replace(temp, blob)
        entry["blob"] = digest
    line = (json.dumps(entry) + "\n").encode()
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    fd = os.open(os.path.join(folder, "journal.jsonl"), flags, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
