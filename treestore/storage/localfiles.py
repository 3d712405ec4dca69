"""A page store's operations on a local filesystem, in the order that survives a power cut.

:class:`~treestore.storage.pagestore.FilePageStore` makes every change to a store on a
local filesystem through these functions: a new file written and synced
(:func:`new_file`), published under its name by a rename (:func:`publish_file`) or an
exclusive hard link (:func:`link_file`), a name removed (:func:`remove_file`), folders
made (:func:`make_folders`). Each is appended to the journal of
:func:`treestore.faults.journal` once done, when a test asks for one.

A power cut keeps only what was made durable, and POSIX makes a file's bytes durable
with ``fsync`` of the file, and its name (created, renamed, linked) only with ``fsync``
of the folder that holds it. So a file is synced before the rename or link that
publishes it, and its folder after; a new folder's parent is synced once it is made.
Whatever publishes a file and then names it elsewhere (a run, then the manifest that
lists it; a manifest, then ``CURRENT``) finds the first durable before the second is
written. Removals are not synced here: a removal a power cut undoes leaves a file that
nothing names, which ``gc`` removes again (where the order of two removals matters, the
caller syncs the folder between them: :func:`sync_folder`). That is two ``fsync`` calls
per file written and one per folder made, none per page.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from treestore.faults import journal, journaling, open_for_writing

__all__ = ["link_file", "make_folders", "new_file", "publish_file", "remove_file", "sync_folder"]


def make_folders(path: str) -> None:
    """Make folder ``path`` and the folders above it that are missing, each made durable
    (its parent synced).

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
        sync_folder(os.path.dirname(folder))


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
    """Rename the synced file ``temp`` to ``path`` (replacing what ``path`` held), durably:
    its folder is synced after."""
    os.replace(temp, path)
    journal("rename", temp, path)
    sync_folder(os.path.dirname(path))


def link_file(temp: str, path: str) -> None:
    """Make ``path`` a name of the synced file ``temp``, durably (its folder is synced
    after); :class:`FileExistsError` if ``path`` exists (exclusive creation)."""
    os.link(temp, path)
    journal("link", temp, path)
    sync_folder(os.path.dirname(path))


def remove_file(path: str) -> None:
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
