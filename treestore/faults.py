"""Faults a test can inject into the store's writes: a disk that fills up.

In the spirit of :mod:`treestore.failpoints`. When ``TREESTORE_FAULT_DISK_FOLDER`` and
``TREESTORE_FAULT_DISK_BYTES`` are set, the files the page store writes under that
folder behave as if the folder were a filesystem of that many bytes: a write that would
take the files under it past the capacity fails with ``ENOSPC`` ("No space left on
device"), as on a full disk. Tests use it where they cannot mount a small tmpfs (that
needs root). The variables reach a load's Spark tasks when they are set for the process
that starts Spark (a ``treestore load`` subprocess): its Python workers inherit them.
Unset (always, outside tests), opening a file costs one dict lookup.
"""

from __future__ import annotations

import errno
import io
import os
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

__all__ = ["DISK_BYTES_VARIABLE", "DISK_FOLDER_VARIABLE", "folder_bytes", "open_for_writing"]

DISK_FOLDER_VARIABLE = "TREESTORE_FAULT_DISK_FOLDER"
"""The folder that behaves as a small filesystem."""
DISK_BYTES_VARIABLE = "TREESTORE_FAULT_DISK_BYTES"
"""Its capacity in bytes: the sizes of the files under it never go past it."""


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
