"""Power cuts, computed from a journal of a store's file operations (as SQLite and LMDB test
crash consistency): which states of the store a power cut could leave.

SIGKILL keeps the operating system's page cache, so it never shows a missing ``fsync``.
Here a run (a load, a gc, a follower's micro-batch) is made once for real with the
journal of :mod:`treestore.faults` on (``TREESTORE_FAULT_JOURNAL``): every file its
processes write, sync, rename, link, remove and every folder they make or sync, in the
order the operations completed (the driver and the Spark tasks' Python workers append
to one journal). A copy of the store taken just before the run (the snapshot, taken as
wholly durable) plus the journal's first ``cut`` operations give the files as the
processes saw them at that moment; :meth:`Disk.crash` then drops what was not yet
durable, under this model of a POSIX filesystem (conservative: what ``fsync`` and
``fsync`` of a folder promise, and no more):

- A file's bytes are durable once the file was ``fsync``'ed after they were written.
  Bytes written since are lost, or cut at a random byte offset, or kept up to a random
  offset with zeros after it (the file's size made it to the disk, its data did not), or
  all kept.
- A folder's names (a file created, renamed in or out, linked, removed; a folder made in
  it) are durable once the folder itself was ``fsync``'ed after the change. Of the
  changes since, any prefix, in the order they were made, survives, each folder on its
  own (nothing orders two folders' changes); a rename within one folder is atomic (the
  old name or the new one, never both or neither), a rename across folders is two
  changes that survive apart. A folder whose own name did not survive takes all it
  holds with it. An ``fsync`` of a file makes its bytes durable, not its name.
- The snapshot is durable as a whole; the store's own folder survives (its parent is
  outside the store).

Each cut point is tried with several crash states (:func:`crash_plans`): everything not
durable lost; everything kept (what a SIGKILL leaves); for each folder with changes not
yet durable, only its changes kept and only its changes lost (the other folders' kept;
unsynced bytes lost); and a few random states (a random prefix per folder, random
offsets in each unsynced file), seeded. States equal byte for byte are checked once.

Limits: only what goes through the page store's local operations is journaled
(:class:`~treestore.storage.pagestore.FilePageStore`): Spark's streaming checkpoint and
the follower's files under ``stream/`` are written by Spark and by plain Python file
calls, so a crash state leaves them as the snapshot had them (a follower that lost its
checkpoint); stores on S3 or HDFS are not modelled (``docs/reliability.md`` says what
they promise). A filesystem that reorders more than this model (a rename that is not
atomic, a folder's changes surviving out of order) is not covered.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from treestore.faults import JOURNAL_VARIABLE

FOLDER = -1
"""A folder's entry in its parent (files' entries are their inode numbers)."""

Change = tuple[tuple[str, int | None], ...]
"""One change of a folder's names, applied at once: (name, inode or FOLDER, or None to
remove the name) pairs."""


@dataclass(frozen=True)
class Op:
    """One journaled file operation, its paths relative to the store's folder."""

    op: str
    path: str
    to: str | None = None
    blob: str | None = None
    pid: int = 0

    def __str__(self) -> str:
        moved = f" -> {self.to}" if self.to is not None else ""
        return f"{self.op} {self.path or '.'}{moved}"


def read_journal(journal: Path, store: Path) -> list[Op]:
    """The journal's operations on files under ``store``, in the order they completed."""
    root = os.path.abspath(store)
    ops = []
    text = (journal / "journal.jsonl").read_text() if (journal / "journal.jsonl").exists() else ""
    for line in text.splitlines():
        entry = json.loads(line)
        path, to = _inside(entry["path"], root), _inside(entry.get("to"), root)
        if path is None and to is None:
            continue
        if path is None or (entry.get("to") is not None and to is None):
            raise ValueError(f"a rename or link across the store's folder: {entry}")
        ops.append(Op(entry["op"], path, to, entry.get("blob"), int(entry.get("pid", 0))))
    return ops


def _inside(path: str | None, root: str) -> str | None:
    if path is None:
        return None
    if path == root:
        return ""
    return os.path.relpath(path, root) if path.startswith(root + os.sep) else None


@contextmanager
def journaling(journal: Path, spark: object = None) -> Iterator[None]:
    """Journal the file operations of this process and of Spark tasks started inside the
    block (the session's Python workers get the variable as SparkContext environment,
    which starts workers of their own)."""
    journal.mkdir(parents=True, exist_ok=True)
    context = getattr(spark, "sparkContext", None)
    before = os.environ.get(JOURNAL_VARIABLE)
    os.environ[JOURNAL_VARIABLE] = str(journal)
    if context is not None:
        context.environment[JOURNAL_VARIABLE] = str(journal)
    try:
        yield
    finally:
        if context is not None:
            context.environment.pop(JOURNAL_VARIABLE, None)
        if before is None:
            os.environ.pop(JOURNAL_VARIABLE, None)
        else:
            os.environ[JOURNAL_VARIABLE] = before


@dataclass
class _File:
    data: bytes
    synced: bytes | None
    """The bytes at its last ``fsync`` (None: never synced)."""


@dataclass(frozen=True)
class Plan:
    """How one crash state is chosen: how many of each folder's changes since its last
    sync survive, and what a file's unsynced bytes become."""

    name: str
    keep_changes: Callable[[str, int], int]
    """(folder, changes not yet durable) -> how many of them survive, in order."""
    bytes_of: Callable[[bytes | None, bytes], bytes]
    """(bytes at the last sync or None, bytes written since) -> what the file holds."""


@dataclass
class Disk:
    """Files and folders as the processes see them, and what of them is durable."""

    blobs: Path
    files: dict[int, _File] = field(default_factory=dict)
    names: dict[str, dict[str, int]] = field(default_factory=dict)
    """folder -> its names now (each an inode, or FOLDER)."""
    durable: dict[str, dict[str, int]] = field(default_factory=dict)
    """folder -> its names as of its last sync."""
    pending: dict[str, list[Change]] = field(default_factory=dict)
    """folder -> its changes since its last sync, in order."""

    @classmethod
    def of_snapshot(cls, snapshot: Path, blobs: Path) -> Disk:
        """The store's folder as the snapshot holds it, all of it durable."""
        disk = cls(blobs)
        for here, folders, files in os.walk(snapshot):
            key = _key(os.path.relpath(here, snapshot))
            entries = disk.names.setdefault(key, {})
            for name in folders:
                entries[name] = FOLDER
                disk.names.setdefault(_join(key, name), {})
            for name in files:
                data = Path(here, name).read_bytes()
                inode = len(disk.files) + 1
                disk.files[inode] = _File(data, data)
                entries[name] = inode
        disk.names.setdefault("", {})
        disk.durable = {folder: dict(entries) for folder, entries in disk.names.items()}
        disk.pending = {folder: [] for folder in disk.names}
        return disk

    def apply(self, op: Op) -> None:
        """Do ``op`` as the processes saw it done (nothing durable unless it syncs)."""
        folder, name = _split(op.path)
        if op.op == "mkdir":
            if op.path not in self.names:
                self.names[op.path] = {}
                self.durable[op.path] = {}
                self.pending[op.path] = []
                self._change(folder, ((name, FOLDER),))
        elif op.op == "write":
            assert op.blob is not None, op
            data = (self.blobs / op.blob).read_bytes()
            inode = self.names[folder].get(name)
            if inode is None:
                inode = len(self.files) + 1
                self.files[inode] = _File(data, None)
                self._change(folder, ((name, inode),))
            else:
                self.files[inode].data = data
        elif op.op == "fsync":
            found = self.files[self._inode(op.path)]
            found.synced = found.data
        elif op.op == "fsyncdir":
            self.durable[op.path] = dict(self.names[op.path])
            self.pending[op.path] = []
        elif op.op in ("rename", "link"):
            assert op.to is not None, op
            inode = self._inode(op.path)
            target, new = _split(op.to)
            if op.op == "rename" and target == folder:
                self._change(folder, ((name, None), (new, inode)))
            else:
                self._change(target, ((new, inode),))
                if op.op == "rename":
                    self._change(folder, ((name, None),))
        elif op.op == "unlink":
            self._inode(op.path)
            self._change(folder, ((name, None),))
        else:
            raise ValueError(f"unknown journal operation {op}")

    def _inode(self, path: str) -> int:
        folder, name = _split(path)
        inode = self.names.get(folder, {}).get(name)
        if inode is None or inode == FOLDER:
            raise ValueError(f"the journal names {path}, which the store does not hold")
        return inode

    def _change(self, folder: str, change: Change) -> None:
        for name, inode in change:
            if inode is None:
                self.names[folder].pop(name, None)
            else:
                self.names[folder][name] = inode
        self.pending[folder].append(change)

    def unsynced_folders(self) -> list[str]:
        """The folders with changes not yet durable."""
        return sorted(folder for folder, changes in self.pending.items() if changes)

    def crash(self, plan: Plan) -> dict[str, bytes | None]:
        """What a power cut now leaves under ``plan``: each file's bytes by its path, and
        each folder (None) by its path."""
        found: dict[str, bytes | None] = {}
        wanted = [""]
        while wanted:
            folder = wanted.pop()
            entries = dict(self.durable[folder])
            changes = self.pending[folder]
            for change in changes[: plan.keep_changes(folder, len(changes))]:
                for name, inode in change:
                    if inode is None:
                        entries.pop(name, None)
                    else:
                        entries[name] = inode
            for name, inode in entries.items():
                path = _join(folder, name)
                if inode == FOLDER:
                    found[path] = None
                    wanted.append(path)
                else:
                    file = self.files[inode]
                    kept = file.data if file.synced == file.data else None
                    found[path] = (
                        kept if kept is not None else plan.bytes_of(file.synced, file.data)
                    )
        return found


def _key(relative: str) -> str:
    return "" if relative == "." else relative


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _split(path: str) -> tuple[str, str]:
    folder, _, name = path.rpartition("/")
    return folder, name


def _lost(synced: bytes | None, data: bytes) -> bytes:
    return synced if synced is not None else b""


def _kept(synced: bytes | None, data: bytes) -> bytes:
    return data


def _random_bytes(rng: random.Random) -> Callable[[bytes | None, bytes], bytes]:
    def bytes_of(synced: bytes | None, data: bytes) -> bytes:
        offset = rng.randrange(len(data) + 1)
        fate = rng.randrange(4)
        if fate == 0:
            return _lost(synced, data)
        if fate == 1:
            return data[:offset]
        if fate == 2:
            return data[:offset] + bytes(len(data) - offset)
        return data

    return bytes_of


def crash_plans(disk: Disk, rng: random.Random, randoms: int) -> list[Plan]:
    """The crash states to try at one cut point (see the module's docstring)."""
    plans = [
        Plan("everything not durable lost", lambda folder, n: 0, _lost),
        Plan("everything kept (as a SIGKILL)", lambda folder, n: n, _kept),
    ]
    for chosen in disk.unsynced_folders():
        plans.append(
            Plan(
                f"only {chosen or '.'}/'s changes kept",
                lambda folder, n, chosen=chosen: n if folder == chosen else 0,  # type: ignore[misc]
                _lost,
            )
        )
        plans.append(
            Plan(
                f"only {chosen or '.'}/'s changes lost",
                lambda folder, n, chosen=chosen: 0 if folder == chosen else n,  # type: ignore[misc]
                _lost,
            )
        )
    for i in range(randoms):
        seed = rng.randrange(2**32)
        local = random.Random(seed)
        plans.append(
            Plan(
                f"random state {i} (seed {seed})",
                lambda folder, n, local=local: local.randrange(n + 1),  # type: ignore[misc]
                _random_bytes(local),
            )
        )
    return plans


def state_digest(state: dict[str, bytes | None]) -> str:
    """One hash of a crash state (equal states, equal hashes)."""
    digest = hashlib.sha256()
    for path in sorted(state):
        data = state[path]
        digest.update(path.encode() + b"\0")
        digest.update(b"D" if data is None else b"F" + hashlib.sha256(data).digest())
    return digest.hexdigest()


def materialize(state: dict[str, bytes | None], where: Path) -> Path:
    """Write a crash state as the folder ``where`` (which must not exist); returns it."""
    where.mkdir(parents=True)
    for path in sorted(state):
        data = state[path]
        if data is None:
            (where / path).mkdir(parents=True, exist_ok=True)
        else:
            (where / path).parent.mkdir(parents=True, exist_ok=True)
            (where / path).write_bytes(data)
    return where
