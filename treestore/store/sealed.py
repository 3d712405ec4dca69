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
a document that has it but lost its checksum line was edited too. A document with
neither was written before treestore sealed its documents: it reads as before, and
:func:`unseal` says it is not sealed.

>>> data = seal(b'{\\n "a": 1\\n}')
>>> unseal(data)
({'a': 1}, True)
>>> unseal(data.replace(b'"a": 1', b'"a": 2'))
Traceback (most recent call last):
ValueError: its checksum does not match: the file was edited or damaged since it was written
>>> unseal(b'{"a": 1}')
({'a': 1}, False)
"""

from __future__ import annotations

import json
from typing import Any

import xxhash

__all__ = ["seal", "unseal"]

_SEALED = b',\n "sealed": "xxh64"'
_CHECKSUM = b',\n "checksum": "'


def seal(body: bytes) -> bytes:
    """``body`` (a JSON object as ``json.dumps(doc, indent=1)`` writes it) with its checksum."""
    if not body.endswith(b"\n}") or body == b"{\n}":
        raise ValueError("only a non-empty JSON object written with indent=1 can be sealed")
    covered = body[:-2] + _SEALED
    return covered + _CHECKSUM + xxhash.xxh64_hexdigest(covered).encode() + b'"\n}'


def unseal(data: bytes) -> tuple[dict[str, Any], bool]:
    """The document in ``data`` and whether it was sealed; ``ValueError`` if it is not a JSON
    object, or if it is sealed and fails its checksum."""
    at = data.rfind(_CHECKSUM)
    if at >= 0 or _SEALED in data:
        covered = data[:at]
        expected = _CHECKSUM + xxhash.xxh64_hexdigest(covered).encode() + b'"\n}'
        if at < 0 or not covered.endswith(_SEALED) or data[at:].rstrip() != expected:
            raise ValueError(
                "its checksum does not match: the file was edited or damaged since it was written"
            )
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError(f"it holds a JSON {type(doc).__name__}, not an object")
    sealed = doc.pop("sealed", None) is not None
    doc.pop("checksum", None)
    return doc, sealed
