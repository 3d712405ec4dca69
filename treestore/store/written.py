"""Before a version is published: every file it names that the load's tasks wrote is where
the driver sees it, with the size the tasks reported.

A load's files are written by its Spark tasks, wherever the executors run; the driver
publishes the version that names them. If the store's location is a path only the
driver has (a local folder on a cluster whose executors each have their own disk), the
tasks write their files on the executors' disks and the version the driver publishes
names files it cannot read. :func:`confirm_written` finds that before ``CURRENT`` moves,
without reading a byte of the files: one listing per folder they are in, and a lookup
of each file the listings lack or show with another size (once more, in case a listing
lagged). On a store that is not local (S3, HDFS: each listing a round trip, of up to
1,000 names on S3) a folder's parent is listed once instead when it holds more than
:data:`FOLDERS_PER_LISTING` of them, as ``trees/`` does for a load that touches many
shards; a local listing costs by the files it sees, so each folder is listed.

>>> from treestore.storage.pagestore import MemoryPageStore
>>> pages = MemoryPageStore()
>>> pages.write("trees/shard-0001/a.pages", b"12345")
>>> confirm_written(pages, {"trees/shard-0001/a.pages": 5})
>>> confirm_written(pages, {"trees/shard-0002/b.pages": 7})  # doctest: +ELLIPSIS
Traceback (most recent call last):
treestore.errors.LoadError: ...trees/shard-0002/b.pages, which a task of this load wrote, ...
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from treestore.errors import LoadError, StoreError
from treestore.storage.pagestore import PageStore
from treestore.storage.state import ShardState
from treestore.store.versions import Manifest

__all__ = ["FOLDERS_PER_LISTING", "confirm_written", "written_files"]

FOLDERS_PER_LISTING = 8
"""More folders than this under one parent of a store that is not local: the parent is
listed once, not each folder."""

_CAUSE = (
    "the executors wrote it where the driver cannot see it; put the store on a filesystem "
    "every executor and the driver share (HDFS, S3, NFS). Nothing was published."
)


def written_files(base: Manifest, trees: Mapping[int, ShardState]) -> dict[str, int | None]:
    """The files the new states ``trees`` name that the version ``base`` does not (the runs'
    pages and index files, side files), each with the size its writer recorded (None: not
    recorded)."""
    runs, sides = base.runs(), base.side_files()
    files: dict[str, int | None] = {}
    for state in trees.values():
        for run in state.runs:
            if run in runs:
                continue
            recorded = state.run_sums.get(run)
            files[f"{run}.pages"] = None if recorded is None else recorded.pages_bytes
            files[f"{run}.index"] = None if recorded is None else recorded.index_bytes
        for name in state.side_files() - sides:
            side_sum = state.side_sums.get(name)
            files[name] = None if side_sum is None else side_sum.size
    return files


def confirm_written(pages: PageStore, files: Mapping[str, int | None]) -> None:
    """Raise :class:`LoadError` (one line naming the first file, by name, and the likely
    cause) unless each of ``files`` exists in ``pages`` with its size (None: any size).
    Reads no file: lists their folders (see the module's docstring)."""
    found: dict[str, int] = {}
    for prefix in _listings(files, grouped=pages.local_path("") is None):
        found.update(pages.sizes(prefix))
    for name in sorted(files):
        expected = files[name]
        size = found.get(name)
        if size is None or (expected is not None and size != expected):
            size = _looked_up(pages, name)  # the listing may lag behind the file
        if size is None:
            raise LoadError(
                f"{pages.location}/{name}, which a task of this load wrote, is missing: " + _CAUSE
            )
        if expected is not None and size != expected:
            raise LoadError(
                f"{pages.location}/{name} is {size:,} bytes, but the task that wrote it "
                f"reported {expected:,}: the driver sees another file than the task wrote; "
                + _CAUSE
            )


def _listings(files: Mapping[str, int | None], grouped: bool) -> list[str]:
    """The folders to list to see every file of ``files``: each file's folder, or (when
    ``grouped``) that folder's parent when it holds more than :data:`FOLDERS_PER_LISTING`
    of them."""
    by_parent: dict[str, set[str]] = defaultdict(set)
    for name in files:
        if "/" in name:  # a file at the top is looked up alone: the top is the whole store
            folder = name.rsplit("/", 1)[0]
            by_parent[folder.rsplit("/", 1)[0] if "/" in folder else ""].add(folder)
    prefixes: list[str] = []
    for parent, folders in sorted(by_parent.items()):
        if grouped and len(folders) > FOLDERS_PER_LISTING and parent:
            prefixes.append(parent)
        else:
            prefixes.extend(sorted(folders))
    return prefixes


def _looked_up(pages: PageStore, name: str) -> int | None:
    """The size of ``name`` as a lookup of that one file finds it (None: not there)."""
    try:
        return pages.size(name) if pages.exists(name) else None
    except StoreError:
        return None
