"""A rolled-back ``CURRENT``, told from a manifest a load left unpublished.

A load writes its version's manifest, then ``CURRENT``, then the dedup index covering
that version (every load, with dedup sources or not). A load killed between its
manifest and ``CURRENT`` leaves a manifest above ``CURRENT`` that was never published
(the next load removes it). A version above ``CURRENT`` was published when the store
shows a step that only follows its publication:

- the dedup index covers it, or a version after it (``dedup/INDEX``'s ``covers``);
- a later manifest was built on it: a load starts from the version ``CURRENT`` names,
  so the load reports a manifest keeps (one per version, oldest first) name only
  versions that were published, its own aside.

Then ``CURRENT`` was rolled back: written back to an older version, by hand or by a
tool that restored it from a copy. Readers answer the version it names, as they
should; ``check`` names the rollback (:func:`check_rollback`), and a load starts from
that version, rebuilding a dedup index that covers a later one
(:func:`loaders.load.dedup_step.prepare_index`).
"""

from __future__ import annotations

from treestore.errors import StoreError
from treestore.storage.pagestore import PageStore
from treestore.store.dedup_index import read_dedup_manifest
from treestore.store.layout import CURRENT, manifest_name
from treestore.store.versions import read_manifest

__all__ = ["check_rollback"]


def check_rollback(pages: PageStore, current: int, listed: list[int]) -> tuple[str | None, int]:
    """Whether ``CURRENT`` (naming ``current``) was rolled back, given the versions whose
    manifests are kept (``listed``): the problem in one line (None: it was not), and the
    newest version the store shows was published (``current`` when none above it was;
    manifests above it were never published)."""
    evidence: dict[int, str] = {}  # version -> why it was published
    try:
        index = read_dedup_manifest(pages)
    except StoreError:
        index = None  # a damaged index: check reports it on its own
    if index is not None and index.covers > current:
        evidence[index.covers] = "the dedup index covers it"
    for version in (v for v in listed if v > current):
        try:
            manifest = read_manifest(pages, version, None)
        except StoreError:
            continue  # check reports a damaged manifest of a published version
        for load in manifest.loads:
            earlier = int(load.get("version", 0))
            if current < earlier < version:
                evidence.setdefault(earlier, f"version {version}'s manifest was built on it")
    if not evidence:
        return None, current
    newest = max(evidence)
    try:
        read_manifest(pages, newest, None)
        state, fix = "its manifest is complete", f"; otherwise write {newest} into {CURRENT}"
    except StoreError:
        missing = not pages.exists(manifest_name(newest))
        state, fix = f"its manifest is {'gone' if missing else 'damaged'}", ""
    later = f"{current + 1}-{newest}" if newest > current + 1 else f"{newest}"
    return (
        f"{pages.location}/{CURRENT} names version {current}, but version {newest} was "
        f"published ({state} and {evidence[newest]}): {CURRENT} was rolled back. If that "
        f"was meant, the next load starts from version {current} and drops version(s) "
        f"{later}, reading their input files again{fix}."
    ), newest
