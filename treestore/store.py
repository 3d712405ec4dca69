"""The store folder: one tree per shard, published in atomic versions.

Layout of a store folder::

    store.json                       shard count and shard hash, fixed for life
    CURRENT                          the published version number
    versions/000007.json             a version's manifest
    trees/shard-0003/<tag>.msgpack   tree files, never rewritten once written

A load writes new tree files for the shards it touched (each under a fresh
name), then writes the next version's manifest, then replaces ``CURRENT``
with an atomic rename. A reader resolves ``CURRENT`` once and reads only the
files that version's manifest names, so it never sees a half-written load.
Shards a load did not touch keep pointing at their previous file.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treestore.errors import StoreError
from treestore.sharding import HASH_NAME
from treestore.tree import Tree

__all__ = ["Manifest", "StoreVersion", "StoreWriter", "open_version", "write_atomically"]

_STORE_FORMAT = 1
_KEPT_LOAD_REPORTS = 100


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new bytes, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(temp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


@dataclass(frozen=True)
class Manifest:
    """What one published version holds.

    Attributes:
        version: the version number (1 for the first load).
        shards: the store's shard count.
        trees: shard number -> tree file, relative to the store folder.
        inputs: input file path -> {source, size, mtime_ns, records}.
        loads: the reports of the most recent loads, oldest first.
    """

    version: int
    shards: int
    trees: Mapping[int, str] = field(default_factory=dict)
    inputs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    loads: tuple[Mapping[str, Any], ...] = ()

    def to_json(self) -> bytes:
        """Encode for the ``versions/`` folder."""
        doc = {
            "version": self.version,
            "shards": self.shards,
            "trees": {str(k): v for k, v in sorted(self.trees.items())},
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
                trees={int(k): str(v) for k, v in doc["trees"].items()},
                inputs=doc["inputs"],
                loads=tuple(doc["loads"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StoreError(f"{where} is not a valid manifest ({exc}).") from exc


class StoreVersion:
    """A read-only view of one published version of a store."""

    def __init__(self, root: Path, manifest: Manifest) -> None:
        self.root = root
        self.manifest = manifest

    @property
    def version(self) -> int:
        """The version number this view reads."""
        return self.manifest.version

    @property
    def shards(self) -> int:
        """The store's shard count."""
        return self.manifest.shards

    def tree_file(self, shard: int) -> Path | None:
        """The absolute path of ``shard``'s tree file, or ``None`` for an empty shard."""
        relative = self.manifest.trees.get(shard)
        return self.root / relative if relative else None

    def load_tree(self, shard: int) -> Tree:
        """Read ``shard``'s tree (an empty tree for a shard no load has touched)."""
        return load_tree_file(self.tree_file(shard), shard)


def load_tree_file(path: Path | None, shard: int) -> Tree:
    """Read the tree at ``path`` (``None``: an empty tree); errors name the shard."""
    if path is None:
        return Tree()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"Shard {shard}'s tree {path} cannot be read: {exc.strerror}.") from exc
    return Tree.from_bytes(data, where=f"Shard {shard}'s tree {path}")


def _read_store_config(root: Path) -> dict[str, Any]:
    config_path = root / "store.json"
    if not root.is_dir():
        raise StoreError(f"{root} does not exist: load a job into it first (treestore load).")
    if not config_path.is_file():
        raise StoreError(f"{root} is not a treestore store (it has no store.json).")
    try:
        config = json.loads(config_path.read_bytes())
        int(config["shards"])
        str(config["hash"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{config_path} is damaged ({exc}).") from exc
    return dict(config)


def _current_version(root: Path) -> int:
    current = root / "CURRENT"
    if not current.is_file():
        return 0
    text = current.read_text().strip()
    if not text.isdigit():
        raise StoreError(f"{current} is damaged: it should hold a version number, not {text!r}.")
    return int(text)


def _manifest_path(root: Path, version: int) -> Path:
    return root / "versions" / f"{version:06d}.json"


def _read_manifest(root: Path, version: int, shards: int) -> Manifest:
    if version == 0:
        return Manifest(version=0, shards=shards)
    path = _manifest_path(root, version)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"Version {version}'s manifest {path} is missing.") from exc
    return Manifest.from_json(data, str(path))


def open_version(path: str | os.PathLike[str]) -> StoreVersion:
    """Open the newest published version of the store at ``path``, read-only."""
    root = Path(path).expanduser().resolve()
    config = _read_store_config(root)
    version = _current_version(root)
    return StoreVersion(root, _read_manifest(root, version, int(config["shards"])))


class StoreWriter:
    """Creates a store or opens it for one load, and publishes the load's version."""

    def __init__(self, path: str | os.PathLike[str], shards: int, hash_name: str = HASH_NAME):
        self.root = Path(path).expanduser().resolve()
        if (self.root / "store.json").is_file():
            config = _read_store_config(self.root)
            if int(config["shards"]) != shards or config["hash"] != hash_name:
                raise StoreError(
                    f"{self.root} was created with {config['shards']} shards and hash "
                    f"{config['hash']}; this job asks for {shards} shards and hash {hash_name}. "
                    "A store keeps its shard count and hash for life: load into a new store."
                )
        else:
            if self.root.exists() and any(self.root.iterdir()):
                raise StoreError(
                    f"{self.root} is not empty and is not a treestore store: "
                    "give an empty or new folder."
                )
            config = {"format": _STORE_FORMAT, "shards": shards, "hash": hash_name}
            write_atomically(self.root / "store.json", json.dumps(config, indent=1).encode())
        self.shards = shards
        self.base = _read_manifest(self.root, _current_version(self.root), shards)

    def new_tree_path(self, shard: int) -> str:
        """A fresh tree file name for ``shard``, relative to the store folder."""
        return f"trees/shard-{shard:04d}/v{self.base.version + 1:06d}-{uuid.uuid4().hex}.msgpack"

    def publish(
        self,
        trees: Mapping[int, str],
        inputs: Mapping[str, Mapping[str, Any]],
        report: Mapping[str, Any],
    ) -> Manifest:
        """Publish the next version: new tree files for ``trees``' shards, new ``inputs``."""
        version = self.base.version + 1
        manifest = Manifest(
            version=version,
            shards=self.shards,
            trees={**self.base.trees, **trees},
            inputs={**self.base.inputs, **inputs},
            loads=(*self.base.loads, {**report, "version": version})[-_KEPT_LOAD_REPORTS:],
        )
        write_atomically(_manifest_path(self.root, version), manifest.to_json())
        write_atomically(self.root / "CURRENT", f"{version}\n".encode())
        self.base = manifest
        return manifest
