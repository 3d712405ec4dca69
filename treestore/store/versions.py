"""The store: per-shard paged trees, published in atomic, retained versions.

Layout of a store (a local folder, or a pyarrow filesystem URI)::

    store.json                         shard count and shard hash, fixed for life
    CURRENT                            the published version number
    LOCK                               present while a load (or gc) runs: who holds it
    versions/000007.json               a version's manifest: per shard its runs,
                                       next node id, node count and bytes; the
                                       loaded input files; recent load reports
    trees/shard-0003/<run>.pages       a run's pages (see treestore.storage.runs)
    trees/shard-0003/<run>.index       a run's page index
    dedup/...                          the dedup index (see treestore.store.dedup_index)
    rejected/<load>/part-*.jsonl       a load's rejected records, with file and line

A load writes new runs (never touching existing ones), then the next version's
manifest, then replaces ``CURRENT`` atomically. A reader resolves ``CURRENT``
once and then reads only what that manifest names, so it keeps seeing its
version while loads run, and a load killed at any moment leaves the previous
version intact: its runs are unreferenced files that ``gc`` removes. Versions
beyond the retention count (default 5) are deleted by ``gc``, which loads run too.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from treestore.errors import CorruptPageError, StoreError
from treestore.sharding import HASH_NAME
from treestore.storage.pagestore import PageStore, page_store_for
from treestore.storage.tree import ShardState, ShardTree
from treestore.store.dedup_index import check_dedup_index, unused_dedup_runs

__all__ = [
    "DEFAULT_RETENTION",
    "Manifest",
    "StoreVersion",
    "StoreWriter",
    "check_store",
    "collect_garbage",
    "open_version",
    "store_lock",
]

_STORE_FORMAT = 2
_KEPT_LOAD_REPORTS = 100
DEFAULT_RETENTION = 5
LOCK_NAME = "LOCK"


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
        """Every run (and pending-records file, without its extension) this version
        references."""
        found = {run for state in self.trees.values() for run in state.runs}
        for state in self.trees.values():
            found |= {name.rsplit(".", 1)[0] for name in state.files()}
        return found


def _manifest_name(version: int) -> str:
    return f"versions/{version:06d}.json"


def _read_config(store: PageStore) -> dict[str, Any]:
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


def _current_version(store: PageStore) -> int:
    if not store.exists("CURRENT"):
        return 0
    text = store.read("CURRENT").decode(errors="replace").strip()
    if not text.isdigit():
        raise StoreError(
            f"{store.location}/CURRENT is damaged: it should hold a version number, not {text!r}."
        )
    return int(text)


def _read_manifest(store: PageStore, version: int, shards: int) -> Manifest:
    if version == 0:
        return Manifest(version=0, shards=shards)
    name = _manifest_name(version)
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
    config = _read_config(store)
    number = _current_version(store) if version is None else version
    return StoreVersion(store, _read_manifest(store, number, int(config["shards"])))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def store_lock(store: PageStore, purpose: str, log: Any = None) -> Iterator[None]:
    """Hold the store's lock for a load or a gc; refuse at once if someone else holds it.

    A lock left by a process that died on this host is taken over (with a
    message). On the local filesystem taking the lock is atomic (``O_EXCL``).
    """
    me = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": time.time(),
        "purpose": purpose,
    }
    body = json.dumps(me).encode()
    path = store.local_path(LOCK_NAME)
    for _attempt in range(2):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                pass
            else:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(body)
                break
        elif not store.exists(LOCK_NAME):  # other filesystems: best effort
            store.write(LOCK_NAME, body)
            break
        try:
            holder = json.loads(store.read(LOCK_NAME))
        except (StoreError, ValueError):
            holder = {}
        same_host = holder.get("host") == me["host"]
        if same_host and isinstance(holder.get("pid"), int) and not _pid_alive(holder["pid"]):
            if log:
                log(
                    f"taking over the lock of {holder.get('purpose', 'a load')} "
                    f"(pid {holder['pid']}), which died"
                )
            store.delete(LOCK_NAME)
            continue
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("since", 0)))
        raise StoreError(
            f"The store {store.location} is locked by {holder.get('purpose', 'another process')} "
            f"(pid {holder.get('pid', '?')} on host {holder.get('host', '?')}) since {since}. "
            f"Wait for it to finish; if no such process runs, remove {store.location}/{LOCK_NAME}."
        )
    else:
        raise StoreError(f"Cannot take the lock of {store.location}.")
    try:
        yield
    finally:
        store.delete(LOCK_NAME)


class StoreWriter:
    """Creates a store or opens it for one load, and publishes the load's version.

    Use it inside :func:`store_lock`.
    """

    def __init__(
        self, location: str | os.PathLike[str] | PageStore, shards: int, hash_name: str = HASH_NAME
    ):
        self.pages = page_store_for(location)
        if self.pages.exists("store.json"):
            config = _read_config(self.pages)
            if int(config["shards"]) != shards or config["hash"] != hash_name:
                raise StoreError(
                    f"{self.pages.location} was created with {config['shards']} shards and hash "
                    f"{config['hash']}; this job asks for {shards} shards and hash {hash_name}. "
                    "A store keeps its shard count and hash for life: load into a new store."
                )
        else:
            strangers = [n for n in self.pages.list() if n != LOCK_NAME]
            if strangers:
                raise StoreError(
                    f"{self.pages.location} is not empty and is not a treestore store: "
                    "give an empty or new folder."
                )
            config = {"format": _STORE_FORMAT, "shards": shards, "hash": hash_name}
            self.pages.write("store.json", json.dumps(config, indent=1).encode())
        self.shards = shards
        self.base = _read_manifest(self.pages, _current_version(self.pages), shards)

    def publish(
        self,
        trees: Mapping[int, ShardState],
        inputs: Mapping[str, Mapping[str, Any]],
        report: Mapping[str, Any],
        failpoint: Any = None,
    ) -> Manifest:
        """Publish the next version with the new states of the shards in ``trees``."""
        version = self.base.version + 1
        manifest = Manifest(
            version=version,
            shards=self.shards,
            trees={**self.base.trees, **trees},
            inputs={**self.base.inputs, **inputs},
            loads=(*self.base.loads, {**report, "version": version})[-_KEPT_LOAD_REPORTS:],
        )
        self.pages.write(_manifest_name(version), manifest.to_json())
        if failpoint:
            failpoint("after-manifest")
        self.pages.write("CURRENT", f"{version}\n".encode())
        self.base = manifest
        return manifest


def collect_garbage(
    location: str | os.PathLike[str] | PageStore, keep: int = DEFAULT_RETENTION
) -> dict[str, int]:
    """Delete versions beyond the newest ``keep`` and every file no kept version uses.

    Runs, dedup index runs and files of rejected records (kept while a kept
    version's load report names them; a failed load's are removed) go.

    Call it while holding the store's lock. Returns counts of what was removed.
    """
    store = page_store_for(location)
    current = _current_version(store)
    versions = [v for v in published_versions(store) if v <= current]
    kept = versions[-max(1, keep) :]
    config = _read_config(store)
    referenced: set[str] = set()
    rejected: set[str] = set()  # files of rejected records that kept load reports name
    for version in kept:
        manifest = _read_manifest(store, version, int(config["shards"]))
        referenced |= manifest.runs()
        for load in manifest.loads:
            rejected.update(load.get("rejected", {}).get("files", []))
    removed = {"versions": 0, "files": 0}
    for version in published_versions(store):
        if version not in kept:
            store.delete(_manifest_name(version))
            removed["versions"] += 1
    for name in store.list("trees"):
        run = name.rsplit(".", 1)[0]
        if run not in referenced or name.rsplit("/", 1)[-1].startswith("."):
            store.delete(name)
            removed["files"] += 1
    for name in unused_dedup_runs(store):
        store.delete(name)
        removed["files"] += 1
    for name in store.list("rejected"):
        if name not in rejected:
            store.delete(name)
            removed["files"] += 1
    return removed


def _check_pending_file(store: PageStore, name: str) -> str | None:
    """Why the pending-records file ``name`` (an Arrow IPC stream) cannot be read, or None."""
    try:
        store.read_table(name)
    except (OSError, pa.ArrowException) as exc:
        return f"the pending records {store.location}/{name} cannot be read ({exc})"
    return None


def check_store(location: str | os.PathLike[str] | PageStore) -> list[str]:
    """Verify every page of every kept version; return the problems found (empty: all good)."""
    store = page_store_for(location)
    problems: list[str] = []
    config = _read_config(store)
    checked: set[str] = set()
    for version in published_versions(store):
        try:
            manifest = _read_manifest(store, version, int(config["shards"]))
        except StoreError as exc:
            problems.append(str(exc))
            continue
        for shard, state in sorted(manifest.trees.items()):
            for run in state.runs:
                if run in checked:
                    continue
                checked.add(run)
                try:
                    ShardTree(store, ShardState((run,)), shard=shard).check()
                except (CorruptPageError, StoreError) as exc:
                    problems.append(str(exc))
            for name in sorted(state.files() - checked):
                checked.add(name)
                problem = _check_pending_file(store, name)
                if problem:
                    problems.append(f"Shard {shard}: {problem}")
    return problems + check_dedup_index(store)
