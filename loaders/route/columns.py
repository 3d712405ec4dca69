"""The columns a mapped record carries besides the job's fields, whichever way it was
mapped (in Spark or on Arrow arrays), and the readers' own (``__file``, ``__line``,
``__reject``, ``__text``: :mod:`loaders.formats.read_spec`)."""

from __future__ import annotations

__all__ = ["DHASH", "DKEY", "KEEP", "ORDER", "SHARD"]

SHARD = "__shard"
"""The record's shard (``pmod(xxhash64(shard_by), shards)``)."""
ORDER, KEEP = "__source_order", "__keep"
"""A record's source, by its place in the job; whether the map's filters keep it."""
DKEY, DHASH = "__dkey", "__dhash"
"""A dedup source's record's exact key (Spark's ``to_json`` of its key fields) and its
64-bit hash (``xxhash64`` of the key); null for other sources."""
