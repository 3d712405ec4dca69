"""Sealed JSON: a store's JSON documents (manifests, the dedup index) carry their own checksum.

A sealed document is the document's JSON (``indent=1``, keys sorted) with two keys added
at its end::

    {
     ...the document...,
     "sealed": "xxh64",
     "checksum": "0123456789abcdef"
    }

``checksum`` is the XXH64 of every byte before the ``,`` that starts its line, so any
edit (a run taken out of a list, a number changed, even a space) is found by one hash
over the bytes a reader reads anyway. ``sealed`` lies inside the checksummed part:
a document that has it but lost its checksum line was edited too, and so was one whose
parsed keys include ``sealed`` or ``checksum`` but whose bytes are not laid out as above
(a JSON tool wrote it again, with another indent, say): sealed-ness is read from the
document, not only from its bytes. A document with neither was written before treestore
sealed its documents: it reads as before, and :func:`unseal` says it is not sealed; the
callers then decide from what the store knows whether it may be (see
:func:`sealed_from`: a store written since says in ``store.json`` from which version on
all its documents are sealed).

>>> data = seal(b'{\\n "a": 1\\n}')
>>> unseal(data)
({'a': 1}, True)
>>> unseal(data.replace(b'"a": 1', b'"a": 2'))
Traceback (most recent call last):
ValueError: its checksum does not match: the file was edited or damaged since it was written
>>> unseal(b'{"a": 1}')
({'a': 1}, False)
>>> unseal(b'{"a": 1, "sealed": "xxh64"}')  # doctest: +ELLIPSIS
Traceback (most recent call last):
ValueError: it was sealed with a checksum of its exact bytes, but they are not as ...
"""

from __future__ import annotations

import json
from typing import Any

import xxhash

from treestore.errors import StoreError
from treestore.storage.pagestore import PageStore
from treestore.store.layout import CONFIG

__all__ = ["SEALED_FROM", "seal", "sealed_from", "unseal"]

_SEALED = b',\n "sealed": "xxh64"'
_CHECKSUM = b',\n "checksum": "'
_KEYS = ("sealed", "checksum")

SEALED_FROM = "sealed_from"
"""The key of ``store.json`` that says from which version on the store seals: every
manifest of that version or later is sealed and records the sums of each of its runs, and
so is a dedup index that covers it or later. Stores written before have no such key."""


def seal(body: bytes) -> bytes:
    """``body`` (a JSON object as ``json.dumps(doc, indent=1)`` writes it) with its checksum."""
    if not body.endswith(b"\n}") or body == b"{\n}":
        raise ValueError("only a non-empty JSON object written with indent=1 can be sealed")
    covered = body[:-2] + _SEALED
    return covered + _CHECKSUM + xxhash.xxh64_hexdigest(covered).encode() + b'"\n}'


def unseal(data: bytes) -> tuple[dict[str, Any], bool]:
    """The document in ``data`` and whether it was sealed; ``ValueError`` if it is not a JSON
    object, or if it is sealed (by its bytes or by its keys) and fails its checksum."""
    at = data.rfind(_CHECKSUM)
    laid_out = at >= 0 or _SEALED in data
    if laid_out:
        covered = data[:at]
        expected = _CHECKSUM + xxhash.xxh64_hexdigest(covered).encode() + b'"\n}'
        if at < 0 or not covered.endswith(_SEALED) or data[at:].rstrip() != expected:
            raise ValueError(
                "its checksum does not match: the file was edited or damaged since it was written"
            )
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError(f"it holds a JSON {type(doc).__name__}, not an object")
    if not laid_out and any(key in doc for key in _KEYS):
        raise ValueError(
            "it was sealed with a checksum of its exact bytes, but they are not as treestore "
            "wrote them: another program wrote it again, or it was damaged"
        )
    for key in _KEYS:
        doc.pop(key, None)
    return doc, laid_out


def sealed_from(pages: PageStore) -> int | None:
    """The version from which the store in ``pages`` seals its documents (its
    ``store.json``'s :data:`SEALED_FROM`); None for a store written before treestore kept
    it, or one whose ``store.json`` cannot be read (its readers refuse that already)."""
    try:
        config = json.loads(pages.read(CONFIG))
        found = config.get(SEALED_FROM) if isinstance(config, dict) else None
    except (StoreError, OSError, ValueError):
        return None
    return found if isinstance(found, int) and not isinstance(found, bool) else None
