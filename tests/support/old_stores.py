"""Stores as earlier treestore versions wrote them: a store written today, rewritten in an
older form, for the tests that check such stores still open.

Before treestore sealed its manifests (issue 22) a manifest was its JSON (``indent=1``,
keys sorted) without ``sealed``, ``checksum`` and the shards' ``run_sums`` and
``side_sums``; before ``store.json`` said from which version on a store seals, it had
no ``sealed_from``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from treestore.storage.pagestore import PageStore
from treestore.store.layout import CONFIG, manifest_name
from treestore.store.sealed import SEALED_FROM, unseal

__all__ = ["as_before_sealed_from", "as_before_sealing"]


def as_before_sealed_from(pages: PageStore) -> None:
    """Rewrite the store's ``store.json`` as treestore wrote it before it said from which
    version on the store seals (its manifests stay as they are: sealed, with sums)."""
    config = json.loads(pages.read(CONFIG))
    config.pop(SEALED_FROM, None)
    pages.write(CONFIG, json.dumps(config, indent=1).encode())


def as_before_sealing(
    pages: PageStore, version: int, edit: Callable[[dict[str, Any]], None] | None = None
) -> None:
    """Rewrite version ``version``'s manifest (and ``store.json``) as treestore wrote them
    before it sealed manifests: no checksum, no sums; ``edit`` changes the document first
    (an older form of another part of it)."""
    as_before_sealed_from(pages)
    doc, _ = unseal(pages.read(manifest_name(version)))
    for tree in doc["trees"].values():
        tree.pop("run_sums", None)
        tree.pop("side_sums", None)
    if edit is not None:
        edit(doc)
    pages.write(manifest_name(version), json.dumps(doc, indent=1, sort_keys=True).encode())
