"""The store: per-shard paged trees, published in atomic, retained versions.

The files and folders of a store are named in :mod:`treestore.store.layout`.

A load writes new runs (never touching existing ones), then the next version's
manifest, then replaces ``CURRENT`` atomically. A reader resolves ``CURRENT``
once and then reads only what that manifest names, so it keeps seeing its
version while loads run, and a load killed at any moment leaves the previous
version intact: its runs are unreferenced files that ``gc`` removes (a load that
fails cleanly removes them itself, see :mod:`treestore.store.lock`). Versions
beyond the retention count (default 5) are deleted by ``gc``, which loads run too.

Every reader verifies the manifest's checksum as it reads it, and each run's recorded
sizes and index checksum as it opens the run; ``check`` reads every byte. A manifest
written before manifests had checksums reads as before (``Manifest.sealed`` is False),
unless its store says it seals from that version on (``store.json``'s ``sealed_from``,
written when a store is created and at the first load into an older store whose runs all
have sums) or the manifest records sums (only a treestore that seals writes them): then an
unsealed manifest was written again by another program, and readers refuse it. Readers
also refuse a manifest whose lists disagree (sums of a run or side file it does not name,
a run named twice, a run without its sums where the store seals).
A store created since stores had an identity keeps one in ``store.json`` (``id``): its
runs carry it with their shard (:func:`store_owner`), and readers refuse a run that says
it belongs to another store or shard.

This module reads and publishes versions; the store's lock is in
:mod:`treestore.store.lock`, ``gc`` and ``check`` in :mod:`treestore.store.maintenance`.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from treestore.errors import StoreError
from treestore.sharding import HASH_NAME
from treestore.storage.pagestore import PageStore, page_store_for, require_folder
from treestore.storage.state import ShardState
from treestore.storage.tree import ShardTree
from treestore.store.layout import (
    CONFIG,
    CURRENT,
    LOCKS,
    VERSIONS,
    manifest_name,
    number_of,
    tree_folder,
)
from treestore.store.sealed import SEALED_FROM, seal, sealed_from, unseal

__all__ = [
    "DEFAULT_RETENTION",
    "Manifest",
    "RecordFiles",
    "StoreVersion",
    "StoreWriter",
    "config_disagreement",
    "current_version",
    "manifest_versions",
    "open_version",
    "published_versions",
    "read_config",
    "read_manifest",
    "read_store_manifest",
    "store_owner",
]

_STORE_FORMAT = 2
_KEPT_LOAD_REPORTS = 100
_PUT_BACK = "; put back the file treestore wrote (from a copy of the store)."
DEFAULT_RETENTION = 5


@dataclass(frozen=True)
class RecordFiles:
    """The files of records one load set aside, which a version keeps while it keeps that
    load's report: its rejected records (``rejected/``) and its expired pending records
    (``expired/``). The load names them when it publishes; ``gc`` keeps what kept versions
    name and removes the rest.
    """

    rejected: tuple[str, ...] = ()
    expired: tuple[str, ...] = ()

    def names(self) -> tuple[str, ...]:
        """Every file named, rejected then expired."""
        return (*self.rejected, *self.expired)

    def to_json(self) -> dict[str, list[str]]:
        """As the manifest keeps it."""
        return {"rejected": list(self.rejected), "expired": list(self.expired)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> RecordFiles:
        """Read back :meth:`to_json`."""
        return cls(tuple(doc.get("rejected", ())), tuple(doc.get("expired", ())))


def _record_files_of_reports(loads: Sequence[Mapping[str, Any]]) -> dict[int, RecordFiles]:
    """The record files of a manifest written before manifests kept them (no
    ``record_files``): the files its load reports name (``rejected.files``, ``expired.files``),
    read once here so that the rest of the store reads them typed."""
    found: dict[int, RecordFiles] = {}
    for load in loads:
        files = RecordFiles(
            tuple(load.get("rejected", {}).get("files", ())),
            tuple(load.get("expired", {}).get("files", ())),
        )
        if files.names():
            found[int(load.get("version", 0))] = files
    return found


@dataclass(frozen=True)
class Manifest:
    """What one published version holds.

    Attributes:
        version: the version number (0: nothing loaded yet).
        shards: the store's shard count.
        trees: shard number -> its tree's state (shards never loaded are absent).
        inputs: the loaded input files: key -> {source, root, relative, size, mtime_ns,
            fingerprint, records, version}. The key is the source's name (URL-quoted),
            ``/``, and the file's path relative to the source's root
            (``attributes/2024/a.tsv``); stores written before keep the file's absolute
            path as the key, without root, relative and fingerprint (see
            loaders.listing.identity, which reads them).
        loads: the reports of the most recent loads, oldest first (for people: the store
            itself reads none of it).
        record_files: the files of records set aside by the loads whose reports it keeps,
            by the version each load published (loads that set none aside are absent).
        sealed: whether the manifest read carried its checksum (False: written before
            manifests had one, so it cannot be verified).
        shard_hash: the shard hash of the store that published it (``store.json``'s
            ``hash``); empty in manifests written before manifests recorded it. Readers
            refuse a ``store.json`` whose hash disagrees: every key would be looked for in
            the wrong shard.
        columns: the column names of a top-level node's levels, by its name: a query of
            ``NAME/+/+/+`` names its columns so (a sweep's ``id``, ``time``, ``value``)
            unless the path labels them. Absent from the file when empty.
    """

    version: int
    shards: int
    trees: Mapping[int, ShardState] = field(default_factory=dict)
    inputs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    loads: tuple[Mapping[str, Any], ...] = ()
    record_files: Mapping[int, RecordFiles] = field(default_factory=dict)
    sealed: bool = field(default=False, compare=False)
    shard_hash: str = ""
    columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_file(self) -> bytes:
        """The manifest file: :meth:`to_json` sealed with its checksum."""
        return seal(self.to_json())

    def to_json(self) -> bytes:
        """The manifest's JSON, without its checksum (see :meth:`to_file`)."""
        doc = {
            "version": self.version,
            "shards": self.shards,
            "trees": {str(k): v.to_json() for k, v in sorted(self.trees.items())},
            "inputs": dict(self.inputs),
            "loads": list(self.loads),
            "record_files": {
                str(v): files.to_json() for v, files in sorted(self.record_files.items())
            },
        }
        if self.shard_hash:
            doc["hash"] = self.shard_hash
        if self.columns:
            doc["columns"] = {name: list(names) for name, names in self.columns.items()}
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str, sealed_since: int | None = None) -> Manifest:
        """Decode a manifest file, verifying its checksum and that its lists agree; ``where``
        names the file in errors, ``sealed_since`` is the version from which its store seals
        (:func:`~treestore.store.sealed.sealed_from`; None: a store written before)."""
        try:
            doc, sealed = unseal(data)
        except ValueError as exc:
            raise StoreError(f"{where} is not a valid manifest ({exc}){_PUT_BACK}") from exc
        try:
            record_files = (
                {int(v): RecordFiles.from_json(f) for v, f in doc["record_files"].items()}
                if "record_files" in doc
                else _record_files_of_reports(doc["loads"])  # written before they were kept
            )
            manifest = cls(
                version=int(doc["version"]),
                shards=int(doc["shards"]),
                trees={int(k): ShardState.from_json(v) for k, v in doc["trees"].items()},
                inputs=doc["inputs"],
                loads=tuple(doc["loads"]),
                record_files=record_files,
                sealed=sealed,
                shard_hash=str(doc.get("hash", "")),
                columns={
                    str(name): tuple(str(n) for n in names)
                    for name, names in doc.get("columns", {}).items()
                },
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StoreError(f"{where} is not a valid manifest ({exc}).") from exc
        complete = sealed_since is not None and manifest.version >= sealed_since
        problem = _unsealed(manifest, sealed_since if complete else None) or _lists_disagree(
            manifest.trees, complete
        )
        if problem:
            raise StoreError(f"{where} is not a valid manifest ({problem}){_PUT_BACK}")
        return manifest

    def runs(self) -> set[str]:
        """Every run this version references (a run's name, without its files' extensions)."""
        return {run for state in self.trees.values() for run in state.runs}

    def side_files(self) -> set[str]:
        """Every side file this version keeps with its trees (see
        :class:`~treestore.storage.state.SideFiles`)."""
        return {name for state in self.trees.values() for name in state.side_files()}

    def set_aside_files(self) -> set[str]:
        """Every file of records set aside (rejected, expired) this version keeps."""
        return {name for files in self.record_files.values() for name in files.names()}


def _unsealed(manifest: Manifest, sealed_since: int | None) -> str | None:
    """Why ``manifest``, read without a checksum, cannot have been written so (None: it
    can, or it is sealed): its store seals from ``sealed_since`` (None: not at its
    version), or it records sums, which only a treestore that seals writes."""
    if manifest.sealed:
        return None
    if sealed_since is not None:
        return (
            f"it carries no checksum, though {CONFIG} says the store seals every manifest from "
            f"version {sealed_since} on: another program wrote it again, or it was damaged"
        )
    if any(state.run_sums or state.side_sums for state in manifest.trees.values()):
        return (
            "it carries no checksum, though it records sums of its files, which only a "
            "treestore that seals its manifests writes: another program wrote it again, or "
            "it was damaged"
        )
    return None


def _lists_disagree(trees: Mapping[int, ShardState], complete: bool) -> str | None:
    """Where a manifest's lists disagree, in words (None: they agree): a run named twice,
    sums of a run or a side file a shard does not name, or (``complete``: a manifest of a
    store that seals) a run without its sums."""
    owner: dict[str, int] = {}
    for shard, state in sorted(trees.items()):
        for run in state.runs:
            if run in owner:
                other = "twice" if owner[run] == shard else f"as shard {owner[run]} does"
                return f"shard {shard} names the run {run} {other}"
            owner[run] = shard
        stray = sorted(set(state.run_sums) - set(state.runs))
        if stray:
            return (
                f"shard {shard} records the sums of the run {stray[0]}, which is not among its runs"
            )
        unsummed = [run for run in state.runs if run not in state.run_sums] if complete else []
        if unsummed:
            return f"shard {shard} names the run {unsummed[0]} without its sums"
        stray = sorted(set(state.side_sums) - state.side_files())
        if stray:
            return (
                f"shard {shard} records the sums of the side file {stray[0]}, which is not "
                "among its side files"
            )
    return None


def read_config(pages: PageStore) -> dict[str, Any]:
    """The store's ``store.json`` (shard count and hash), checked."""
    require_folder(pages)
    if not pages.exists(CONFIG):
        if not pages.list():
            raise StoreError(
                f"{pages.location} does not exist or is empty: "
                "load a job into it first (treestore load)."
            )
        raise StoreError(f"{pages.location} is not a treestore store (it has no {CONFIG}).")
    try:
        config = json.loads(pages.read(CONFIG))
        int(config["shards"])
        str(config["hash"])
        marked = config.get(SEALED_FROM, 1)
        if isinstance(marked, bool) or not isinstance(marked, int):
            raise ValueError(f"its {SEALED_FROM} is not a version number")
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{pages.location}/{CONFIG} is damaged ({exc}).") from exc
    if int(config.get("format", 1)) != _STORE_FORMAT:
        raise StoreError(
            f"{pages.location} was written in store format {config.get('format', 1)}; "
            "this treestore "
            f"reads format {_STORE_FORMAT}. Load the job into a new store."
        )
    return dict(config)


def store_owner(config: Mapping[str, Any]) -> str | None:
    """The store's identity, which its runs carry as their owner (``store.json``'s ``id``);
    None for a store created before stores had one (its runs carry only their shard)."""
    owner = config.get("id")
    return str(owner) if owner else None


def current_version(pages: PageStore) -> int:
    """The version ``CURRENT`` names (0: nothing published yet)."""
    if not pages.exists(CURRENT):
        listed = manifest_versions(pages)
        if any(v > 1 for v in listed):  # only a first load stopped before publishing leaves 1
            raise StoreError(
                f"{pages.location}/{CURRENT} is missing, but {VERSIONS}/ holds the manifests of "
                f"versions {_numbers(listed)}: write the number of the newest published one "
                f"into {CURRENT} (treestore check verifies them)."
            )
        return 0
    text = pages.read(CURRENT).decode(errors="replace").strip()
    if not text.isdigit() or len(text) > 18:
        raise StoreError(
            f"{pages.location}/{CURRENT} is damaged: it should hold a version number, not "
            f"{text[:40]!r}; write the number of the newest published version into it "
            f"({VERSIONS}/ holds {_numbers(manifest_versions(pages)) or 'no manifest'})."
        )
    return int(text)


def _numbers(versions: list[int]) -> str:
    """Version numbers in words: ``1-3, 7``."""
    spans: list[list[int]] = []
    for v in versions:
        if spans and spans[-1][1] == v - 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def read_manifest(
    pages: PageStore, version: int, shards: int | None, shard_hash: str | None = None
) -> Manifest:
    """Version ``version``'s manifest (version 0: the empty store of ``shards`` shards),
    its checksum verified, and that it agrees with ``store.json``'s ``shards`` and
    ``shard_hash`` (None: not known, not compared; see :func:`read_store_manifest`)."""
    if version == 0:
        return Manifest(version=0, shards=shards or 0)
    name = manifest_name(version)
    where = f"{pages.location}/{name}"
    if not pages.exists(name):
        raise StoreError(f"Version {version}'s manifest {where} is missing.")
    manifest = Manifest.from_json(pages.read(name), where, sealed_from(pages))
    if manifest.version != version:
        raise StoreError(
            f"{where} is not a valid manifest (it holds version {manifest.version}, not "
            f"{version}): it was copied over or damaged."
        )
    problem = config_disagreement(pages, where, manifest, shards, shard_hash)
    if problem:
        raise StoreError(problem)
    return manifest


def config_disagreement(
    pages: PageStore,
    where: str,
    manifest: Manifest,
    shards: int | None,
    shard_hash: str | None,
) -> str | None:
    """How ``store.json``'s ``shards`` and ``shard_hash`` disagree with ``manifest`` (read
    from ``where``), in one line; None if they agree or are not known."""
    if shards is not None and manifest.shards != shards:
        return (
            f"{pages.location}/{CONFIG} says the store has {shards} shards, but {where} was "
            f"written for {manifest.shards}: one of them was changed by hand or copied from "
            f"another store. Put back the {CONFIG} or manifest treestore wrote."
        )
    if shard_hash is not None and manifest.shard_hash and manifest.shard_hash != shard_hash:
        return (
            f"{pages.location}/{CONFIG} says the shard hash is {shard_hash!r}, but {where} "
            f"was written with {manifest.shard_hash!r}: {CONFIG} was changed by hand or "
            "copied from another store, and every key would be looked for in the wrong "
            f"shard. Put back the {CONFIG} treestore wrote (hash {manifest.shard_hash!r})."
        )
    return None


def read_store_manifest(pages: PageStore, version: int, config: Mapping[str, Any]) -> Manifest:
    """:func:`read_manifest` checked against the store's ``store.json`` (``config``, as
    :func:`read_config` returns it): its shard count and shard hash."""
    return read_manifest(pages, version, int(config["shards"]), str(config["hash"]))


def manifest_versions(pages: PageStore) -> list[int]:
    """The version numbers of every manifest in ``versions/``, oldest first (published or
    not: a load killed between its manifest and ``CURRENT`` leaves one above it)."""
    return sorted(n for n in map(number_of, pages.list(VERSIONS)) if n is not None)


def published_versions(pages: PageStore, upto: int | None = None) -> list[int]:
    """The published versions whose manifests are still kept, oldest first: those up to
    ``upto`` (default: the version ``CURRENT`` names)."""
    newest = current_version(pages) if upto is None else upto
    return [v for v in manifest_versions(pages) if v <= newest]


class StoreVersion:
    """A read-only view of one published version of a store."""

    def __init__(self, pages: PageStore, manifest: Manifest, owner: str | None = None) -> None:
        self.pages = pages
        self.manifest = manifest
        self.owner = owner
        """The store's identity (:func:`store_owner`), which its runs must carry if they
        carry one."""

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
        return ShardTree(
            self.pages,
            self.shard_state(shard),
            shard=shard,
            folder=tree_folder(shard),
            owner=self.owner,
        )


def open_version(
    location: str | os.PathLike[str] | PageStore, version: int | None = None
) -> StoreVersion:
    """Open a version (default: the newest) of the store at ``location``, read-only."""
    pages = page_store_for(location)
    config = read_config(pages)
    number = current_version(pages) if version is None else version
    manifest = read_store_manifest(pages, number, config)
    return StoreVersion(pages, manifest, store_owner(config))


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
        require_folder(self.pages, creating=True)
        if self.pages.exists(CONFIG):
            config = read_config(self.pages)
            # store.json checked against the published manifest before against the job:
            # a store.json changed by hand is named as such, not as the job's mistake
            read_store_manifest(self.pages, current_version(self.pages), config)
            if int(config["shards"]) != shards or config["hash"] != hash_name:
                raise StoreError(
                    f"{self.pages.location} was created with {config['shards']} shards and hash "
                    f"{config['hash']}; this job asks for {shards} shards and hash {hash_name}. "
                    "A store keeps its shard count and hash for life: load into a new store."
                )
        else:
            strangers = [n for n in self.pages.list() if not n.startswith(f"{LOCKS}/")]
            if strangers:
                raise StoreError(
                    f"{self.pages.location} is not empty and is not a treestore store: "
                    "give an empty or new folder."
                )
            config = {  # "id": the store's identity, which its runs carry
                "format": _STORE_FORMAT,
                "shards": shards,
                "hash": hash_name,
                SEALED_FROM: 1,
                "id": uuid.uuid4().hex,
            }
            if create:
                self.pages.write(CONFIG, json.dumps(config, indent=1).encode())
        self.shards = shards
        self.shard_hash = str(config["hash"])
        self.sealed_since: int | None = config.get(SEALED_FROM)
        """The version from which the store seals (None: a store written before, until a
        load publishes a version whose runs all have their sums)."""
        self.owner = store_owner(config)
        """The store's identity (:func:`store_owner`): the runs of its loads carry it."""
        self.fence = fence
        """Called just before publishing: raises if this writer lost the store's lock."""
        self.columns: dict[str, tuple[str, ...]] = {}
        """Column names of top-level nodes' levels that the next version adds to the ones
        it keeps (see :attr:`Manifest.columns`)."""
        self.base = read_manifest(self.pages, current_version(self.pages), shards, self.shard_hash)

    def _mark_sealed(self, version: int) -> None:
        """Record in ``store.json`` that the store seals from ``version`` on (a store written
        before it kept that): its other keys are kept as they are."""
        config = json.loads(self.pages.read(CONFIG))
        config[SEALED_FROM] = version
        self.pages.write(CONFIG, json.dumps(config, indent=1).encode())
        self.sealed_since = version

    def drop_unpublished(self) -> list[int]:
        """Delete manifests above the published version: left by loads killed between
        writing their manifest and publishing it. Call it only while holding the lock."""
        dropped = [v for v in manifest_versions(self.pages) if v > self.base.version]
        for version in dropped:
            self.pages.delete(manifest_name(version))
        return dropped

    def publish(
        self,
        trees: Mapping[int, ShardState],
        inputs: Mapping[str, Mapping[str, Any]],
        report: Mapping[str, Any],
        failpoint: Any = None,
        record_files: RecordFiles | None = None,
    ) -> Manifest:
        """Publish the next version with the new states of the shards in ``trees``, the load's
        ``report`` and the files of records it set aside (``record_files``).

        The manifest is created exclusively, so of two writers publishing the same
        version number one fails; ``CURRENT`` then names it.
        """
        version = self.base.version + 1
        oldest = version - _KEPT_LOAD_REPORTS  # one load a version: the loads kept below
        kept_files = {v: f for v, f in self.base.record_files.items() if v > oldest}
        if record_files is not None and record_files.names():
            kept_files[version] = record_files
        manifest = Manifest(
            version=version,
            shards=self.shards,
            trees={**self.base.trees, **trees},
            inputs={**self.base.inputs, **inputs},
            loads=(*self.base.loads, {**report, "version": version})[-_KEPT_LOAD_REPORTS:],
            record_files=kept_files,
            shard_hash=self.shard_hash,
            columns={**self.base.columns, **self.columns},
        )
        complete = self.sealed_since is not None or all(
            set(state.runs) <= set(state.run_sums) for state in manifest.trees.values()
        )
        problem = _lists_disagree(manifest.trees, complete)
        if problem:  # a writer's mistake: a version readers would refuse is never published
            raise StoreError(
                f"Version {version} of {self.pages.location} was not published: {problem}."
            )
        if self.fence is not None:
            self.fence()
        if self.sealed_since is None and complete:
            self._mark_sealed(version)
        if not self.pages.create(manifest_name(version), manifest.to_file()):
            raise StoreError(
                f"Another process published version {version} of {self.pages.location} while "
                "this one ran; nothing of this run was published. Run it again."
            )
        if failpoint:
            failpoint("after-manifest")
        self.pages.write(CURRENT, f"{version}\n".encode())
        self.base = manifest
        return manifest
