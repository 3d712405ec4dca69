"""The store: per-shard paged trees, published in atomic, retained versions.

Layout of a store (a local folder, or a pyarrow filesystem URI)::

    store.json                         shard count and shard hash, fixed for life
    CURRENT                            the published version number
    locks/000012.json                  the lock's leases: the newest says who holds the
                                       store while a load (or gc) runs (treestore.store.lock)
    versions/000007.json               a version's manifest: per shard its runs,
                                       next node id, node count and bytes; the
                                       loaded input files; recent load reports
    trees/shard-0003/<run>.pages       a run's pages (see treestore.storage.runs)
    trees/shard-0003/<run>.index       a run's page index
    trees/shard-0003/<name>.arrow      side files a version keeps with the shard's tree
                                       (see treestore.storage.state)
    dedup/...                          the dedup index (see treestore.store.dedup_index)
    rejected/<load>/part-*.jsonl       a load's rejected records, with file and line

A load writes new runs (never touching existing ones), then the next version's
manifest, then replaces ``CURRENT`` atomically. A reader resolves ``CURRENT``
once and then reads only what that manifest names, so it keeps seeing its
version while loads run, and a load killed at any moment leaves the previous
version intact: its runs are unreferenced files that ``gc`` removes. Versions
beyond the retention count (default 5) are deleted by ``gc``, which loads run too.

This module reads and publishes versions; the store's lock is in
:mod:`treestore.store.lock`, ``gc`` and ``check`` in :mod:`treestore.store.maintenance`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from treestore.errors import StoreError
from treestore.sharding import HASH_NAME
from treestore.storage.pagestore import PageStore, page_store_for, require_folder
from treestore.storage.state import ShardState
from treestore.storage.tree import ShardTree

__all__ = [
    "DEFAULT_RETENTION",
    "Manifest",
    "StoreVersion",
    "StoreWriter",
    "current_version",
    "manifest_name",
    "open_version",
    "published_versions",
    "read_config",
    "read_manifest",
]

_STORE_FORMAT = 2
_KEPT_LOAD_REPORTS = 100
DEFAULT_RETENTION = 5


@dataclass(frozen=True)
class Manifest:
    """What one published version holds.

    Attributes:
        version: the version number (0: nothing loaded yet).
        shards: the store's shard count.
        trees: shard number -> its tree's state (shards never loaded are absent).
        inputs: input file path -> {source, size, mtime_ns, records, version}.
        loads: the reports of the most recent loads, oldest first.
    """

    version: int
    shards: int
    trees: Mapping[int, ShardState] = field(default_factory=dict)
    inputs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    loads: tuple[Mapping[str, Any], ...] = ()

    def to_json(self) -> bytes:
        """Encode for the ``versions/`` folder."""
        doc = {
            "version": self.version,
            "shards": self.shards,
            "trees": {str(k): v.to_json() for k, v in sorted(self.trees.items())},
            "inputs": dict(self.inputs),
            "loads": list(self.loads),
        }
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> Manifest:
        """Decode a manifest; ``where`` names the file in errors."""
        try:
            doc = json.loads(data)
            return cls(
                version=int(doc["version"]),
                shards=int(doc["shards"]),
                trees={int(k): ShardState.from_json(v) for k, v in doc["trees"].items()},
                inputs=doc["inputs"],
                loads=tuple(doc["loads"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StoreError(f"{where} is not a valid manifest ({exc}).") from exc

    def runs(self) -> set[str]:
        """Every run this version references (a run's name, without its files' extensions)."""
        return {run for state in self.trees.values() for run in state.runs}

    def side_files(self) -> set[str]:
        """Every side file this version keeps with its trees (see
        :class:`~treestore.storage.state.SideFiles`)."""
        return {name for state in self.trees.values() for name in state.side_files()}


def manifest_name(version: int) -> str:
    """The file of version ``version``'s manifest."""
    return f"versions/{version:06d}.json"


def read_config(store: PageStore) -> dict[str, Any]:
    """The store's ``store.json`` (shard count and hash), checked."""
    require_folder(store)
    if not store.exists("store.json"):
        if not store.list():
            raise StoreError(
                f"{store.location} does not exist or is empty: "
                "load a job into it first (treestore load)."
            )
        raise StoreError(f"{store.location} is not a treestore store (it has no store.json).")
    try:
        config = json.loads(store.read("store.json"))
        int(config["shards"])
        str(config["hash"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{store.location}/store.json is damaged ({exc}).") from exc
    if int(config.get("format", 1)) != _STORE_FORMAT:
        raise StoreError(
            f"{store.location} was written in store format {config.get('format', 1)}; "
            "this treestore "
            f"reads format {_STORE_FORMAT}. Load the job into a new store."
        )
    return dict(config)


def current_version(store: PageStore) -> int:
    """The version ``CURRENT`` names (0: nothing published yet)."""
    if not store.exists("CURRENT"):
        return 0
    text = store.read("CURRENT").decode(errors="replace").strip()
    if not text.isdigit():
        raise StoreError(
            f"{store.location}/CURRENT is damaged: it should hold a version number, not {text!r}."
        )
    return int(text)


def read_manifest(store: PageStore, version: int, shards: int) -> Manifest:
    """Version ``version``'s manifest (version 0: the empty store of ``shards`` shards)."""
    if version == 0:
        return Manifest(version=0, shards=shards)
    name = manifest_name(version)
    if not store.exists(name):
        raise StoreError(f"Version {version}'s manifest {store.location}/{name} is missing.")
    return Manifest.from_json(store.read(name), f"{store.location}/{name}")


def published_versions(store: PageStore) -> list[int]:
    """The version numbers whose manifests are still kept, oldest first."""
    numbers = []
    for name in store.list("versions"):
        stem = name.rsplit("/", 1)[-1].removesuffix(".json")
        if stem.isdigit():
            numbers.append(int(stem))
    return sorted(numbers)


class StoreVersion:
    """A read-only view of one published version of a store."""

    def __init__(self, store: PageStore, manifest: Manifest) -> None:
        self.pages = store
        self.manifest = manifest

    @property
    def location(self) -> str:
        """Where the store is."""
        return self.pages.location

    @property
    def version(self) -> int:
        """The version number this view reads."""
        return self.manifest.version

    @property
    def shards(self) -> int:
        """The store's shard count."""
        return self.manifest.shards

    def shard_state(self, shard: int) -> ShardState:
        """The state of ``shard``'s tree in this version (empty if never loaded)."""
        return self.manifest.trees.get(shard, ShardState())

    def tree(self, shard: int) -> ShardTree:
        """``shard``'s tree at this version."""
        return ShardTree(self.pages, self.shard_state(shard), shard=shard)


def open_version(
    location: str | os.PathLike[str] | PageStore, version: int | None = None
) -> StoreVersion:
    """Open a version (default: the newest) of the store at ``location``, read-only."""
    store = page_store_for(location)
    config = read_config(store)
    number = current_version(store) if version is None else version
    return StoreVersion(store, read_manifest(store, number, int(config["shards"])))


class StoreWriter:
    """Creates a store or opens it for one load, and publishes the load's version.

    Use it inside :func:`~treestore.store.lock.store_lock`.
    """

    def __init__(
        self,
        location: str | os.PathLike[str] | PageStore,
        shards: int,
        hash_name: str = HASH_NAME,
        fence: Callable[[], None] | None = None,
        *,
        create: bool = True,
    ):
        """``create=False`` checks the store against the job without creating it (a new
        store is then only written under the lock)."""
        self.pages = page_store_for(location)
        require_folder(self.pages)
        if self.pages.exists("store.json"):
            config = read_config(self.pages)
            if int(config["shards"]) != shards or config["hash"] != hash_name:
                raise StoreError(
                    f"{self.pages.location} was created with {config['shards']} shards and hash "
                    f"{config['hash']}; this job asks for {shards} shards and hash {hash_name}. "
                    "A store keeps its shard count and hash for life: load into a new store."
                )
        else:
            strangers = [n for n in self.pages.list() if not n.startswith("locks/")]
            if strangers:
                raise StoreError(
                    f"{self.pages.location} is not empty and is not a treestore store: "
                    "give an empty or new folder."
                )
            config = {"format": _STORE_FORMAT, "shards": shards, "hash": hash_name}
            if create:
                self.pages.write("store.json", json.dumps(config, indent=1).encode())
        self.shards = shards
        self.fence = fence
        """Called just before publishing: raises if this writer lost the store's lock."""
        self.base = read_manifest(self.pages, current_version(self.pages), shards)

    def drop_unpublished(self) -> list[int]:
        """Delete manifests above the published version: left by loads killed between
        writing their manifest and publishing it. Call it only while holding the lock."""
        dropped = [v for v in published_versions(self.pages) if v > self.base.version]
        for version in dropped:
            self.pages.delete(manifest_name(version))
        return dropped

    def publish(
        self,
        trees: Mapping[int, ShardState],
        inputs: Mapping[str, Mapping[str, Any]],
        report: Mapping[str, Any],
        failpoint: Any = None,
    ) -> Manifest:
        """Publish the next version with the new states of the shards in ``trees``.

        The manifest is created exclusively, so of two writers publishing the same
        version number one fails; ``CURRENT`` then names it.
        """
        version = self.base.version + 1
        manifest = Manifest(
            version=version,
            shards=self.shards,
            trees={**self.base.trees, **trees},
            inputs={**self.base.inputs, **inputs},
            loads=(*self.base.loads, {**report, "version": version})[-_KEPT_LOAD_REPORTS:],
        )
        if self.fence is not None:
            self.fence()
        if not self.pages.create(manifest_name(version), manifest.to_json()):
            raise StoreError(
                f"Another process published version {version} of {self.pages.location} while "
                "this one ran; nothing of this run was published. Run it again."
            )
        if failpoint:
            failpoint("after-manifest")
        self.pages.write("CURRENT", f"{version}\n".encode())
        self.base = manifest
        return manifest
