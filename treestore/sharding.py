"""Which shard a record belongs to.

The shard of a key is ``pmod(xxhash64(utf8(key), seed=42), shards)``: the XXH64
hash of the key's UTF-8 bytes with seed 42, read as a signed 64-bit integer, then
taken modulo the shard count into ``0 .. shards-1``. This is exactly Spark SQL's
``pmod(xxhash64(CAST(key AS STRING)), shards)``, so the loader computes shards in
Spark's engine and any Python code (tests, tools, other writers) gets the same
answer from :func:`shard_of` (one key) or :func:`treestore.native.shards_of` (an Arrow
array of them, compiled). A null key hashes as Spark hashes a null: to the
seed itself, 42.
"""

from __future__ import annotations

import xxhash

__all__ = ["HASH_NAME", "HASH_SEED", "shard_of"]

HASH_NAME = "xxhash64-utf8-seed42"
"""The name a store records for this hash; a job with another hash is refused."""

HASH_SEED = 42


def shard_of(key: str | None, shards: int) -> int:
    """Return the shard of ``key`` among ``shards`` shards.

    >>> shard_of("12345", 8) == shard_of("12345", 8)
    True
    >>> [shard_of(k, 1) for k in ("a", "b", None)]
    [0, 0, 0]
    """
    if shards < 1:
        raise ValueError(f"shards must be at least 1, not {shards}")
    if key is None:
        return HASH_SEED % shards
    digest = xxhash.xxh64_intdigest(key.encode("utf-8"), seed=HASH_SEED)
    signed = digest - (1 << 64) if digest >= (1 << 63) else digest
    return signed % shards
