"""What a version records of one shard's tree (:class:`ShardState`), and what a writer did.

A shard's state names its runs and counters, and any *side files*: files a feature
above storage keeps with the tree of a version (one named group per feature, see
:class:`SideFiles`). Storage only keeps them: a version's manifest names them, garbage
collection keeps the files a kept version names, ``check`` reads them, and
:meth:`~treestore.storage.tree.ShardTree.commit` carries them into the next state
unless its caller replaces them. What they hold is the feature's business.

In the manifest a group is a key of the shard's entry, beside the tree's own keys::

    {"runs": [...], "next_id": 9, "nodes": 8, "bytes": 512,
     "run_sums": {RUN: [pages bytes, index bytes, "index checksum"]},
     "side_sums": {FILE: [bytes, "checksum"]},
     "NAME": {"files": [...], ...the group's meta...}}

``run_sums`` and ``side_sums`` (taken as the files are written) let readers and
``check`` find any change to them; runs and side files written before treestore
recorded them have none (``check`` says they cannot be verified).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import xxhash

from treestore.errors import StoreError
from treestore.storage.runs import RunSum

__all__ = ["FileSum", "ShardState", "SideFiles", "WriteStats"]

_TREE_KEYS = frozenset({"runs", "next_id", "nodes", "bytes", "run_sums", "side_sums"})
"""The keys of a shard's manifest entry that are the tree's own (no side group may use them)."""


class FileSum(NamedTuple):
    """What a version's manifest records of a side file: its size and XXH64 checksum."""

    size: int
    checksum: int

    @classmethod
    def of(cls, data: bytes) -> FileSum:
        """The sum of a file's bytes."""
        return cls(len(data), xxhash.xxh64_intdigest(data))

    def to_json(self) -> list[Any]:
        """The manifest form: ``[bytes, "checksum in hex"]``."""
        return [self.size, f"{self.checksum:016x}"]

    @classmethod
    def from_json(cls, doc: Any) -> FileSum:
        """Read the manifest form."""
        size, checksum = doc
        return cls(int(size), int(checksum, 16))


@dataclass(frozen=True)
class SideFiles:
    """A named group of side files kept with a shard's tree in a version.

    Attributes:
        files: the files (names in the page store, in the shard's folder), each an
            Arrow IPC file written with :meth:`PageStore.write_table
            <treestore.storage.pagestore.PageStore.write_table>` (so ``check`` can read it).
        meta: what the feature keeps beside them: opaque to storage, written to the
            manifest as JSON (its keys beside ``files``).
    """

    files: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The manifest form: ``{"files": [...], **meta}``."""
        return {"files": list(self.files), **self.meta}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SideFiles:
        """Read the manifest form."""
        return cls(tuple(doc.get("files", ())), {k: v for k, v in doc.items() if k != "files"})


@dataclass(frozen=True)
class ShardState:
    """A shard's tree as a version's manifest records it.

    Attributes:
        runs: the tree's runs, oldest first.
        next_id: the id the next node created gets.
        nodes: the number of nodes (the internal root excluded).
        bytes: the bytes of the runs.
        side: the side files kept with the tree, by the name of their group.
        run_sums: what the manifest records of each run (runs written before treestore
            recorded it are absent).
        side_sums: the same for each side file.
    """

    runs: tuple[str, ...] = ()
    next_id: int = 1
    nodes: int = 0
    bytes: int = 0
    side: Mapping[str, SideFiles] = field(default_factory=dict)
    run_sums: Mapping[str, RunSum] = field(default_factory=dict)
    side_sums: Mapping[str, FileSum] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clashes = _TREE_KEYS & set(self.side)
        if clashes:
            raise StoreError(f"A group of side files cannot be called {sorted(clashes)[0]!r}.")

    def to_json(self) -> dict[str, Any]:
        """The manifest form."""
        doc: dict[str, Any] = {
            "runs": list(self.runs),
            "next_id": self.next_id,
            "nodes": self.nodes,
            "bytes": self.bytes,
        }
        if self.run_sums:
            doc["run_sums"] = {run: self.run_sums[run].to_json() for run in sorted(self.run_sums)}
        if self.side_sums:
            doc["side_sums"] = {n: self.side_sums[n].to_json() for n in sorted(self.side_sums)}
        for name, group in sorted(self.side.items()):
            doc[name] = group.to_json()
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ShardState:
        """Read the manifest form (keys beside the tree's own are groups of side files)."""
        return cls(
            tuple(doc["runs"]),
            int(doc["next_id"]),
            int(doc["nodes"]),
            int(doc["bytes"]),
            {
                name: SideFiles.from_json(group)
                for name, group in doc.items()
                if name not in _TREE_KEYS and group is not None
            },
            {run: RunSum.from_json(s) for run, s in doc.get("run_sums", {}).items()},
            {name: FileSum.from_json(s) for name, s in doc.get("side_sums", {}).items()},
        )

    def side_files(self) -> set[str]:
        """Every side file of this state (the runs' own files are not among them)."""
        return {name for group in self.side.values() for name in group.files}


@dataclass
class WriteStats:
    """What a writer did to its tree."""

    nodes_created: int = 0
    nodes_updated: int = 0  # existing nodes pulled into the memtable (again after a flush),
    # by a visit or to count a new child
    runs_written: list[str] = field(default_factory=list)
    bytes_written: int = 0
    compacted: bool = False
