"""A page store's operations on a local filesystem, each journaled for the power-cut tests.

:class:`~treestore.storage.pagestore.FilePageStore` makes every change to a store on a
local filesystem through these functions: a new file written and synced
(:func:`new_file`), published under its name by a rename (:func:`publish_file`) or an
exclusive hard link (:func:`link_file`), a name removed (:func:`remove_file`), folders
made (:func:`make_folders`). Each is appended to the journal of
:func:`treestore.faults.journal` once done, when a test asks for one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from treestore.faults import journal, journaling, open_for_writing

__all__ = ["link_file", "make_folders", "new_file", "publish_file", "remove_file"]


def make_folders(path: str) -> None:
    """Make folder ``path`` and the folders above it that are missing."""
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


@contextmanager
def new_file(path: str) -> Iterator[BinaryIO]:
    """Create the file ``path`` (a name nothing else uses) for the block to write; when the
    block ends without error, its bytes are synced to the disk."""
    with open_for_writing(path) as handle:
        yield handle
        handle.flush()
        if journaling():
            with open(path, "rb") as written:
                journal("write", path, data=written.read())
        os.fsync(handle.fileno())
        journal("fsync", path)


def publish_file(temp: str, path: str) -> None:
    """Rename the synced file ``temp`` to ``path`` (replacing what ``path`` held)."""
    os.replace(temp, path)
    journal("rename", temp, path)


def link_file(temp: str, path: str) -> None:
    """Make ``path`` a name of the synced file ``temp``; :class:`FileExistsError` if
    ``path`` exists (exclusive creation)."""
    os.link(temp, path)
    journal("link", temp, path)


def remove_file(path: str) -> None:
    """Remove the name ``path`` (:class:`FileNotFoundError` if there is none)."""
    os.remove(path)
    journal("unlink", path)
