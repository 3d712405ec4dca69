"""The result cache: whole answers kept by (store, version, path, rops, ops, format,
limit), least recently used first out, bounded in bytes (``--cache-mb``).

An answer larger than the bound is never kept; a new version of a store makes its old
entries unreachable (the version is in the key), and they age out. Used from the event
loop only, so it needs no lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

__all__ = ["CachedAnswer", "ResultCache"]

_ENTRY_OVERHEAD = 256
"""Bytes an entry costs besides its body (its key, its record), roughly."""


@dataclass(frozen=True)
class CachedAnswer:
    """A complete answer: its body, how many rows it holds, where it ran."""

    body: bytes
    rows: int
    where: str


class ResultCache:
    """Answers by key, at most ``megabytes`` MiB of them (0: nothing is kept)."""

    def __init__(self, megabytes: int) -> None:
        self.max_entry_bytes = megabytes * 1024 * 1024
        """The largest answer kept: the whole bound."""
        self._entries: LRUCache[Any, CachedAnswer] | None = None
        if megabytes > 0:
            self._entries = LRUCache(
                maxsize=self.max_entry_bytes + _ENTRY_OVERHEAD,
                getsizeof=lambda answer: len(answer.body) + _ENTRY_OVERHEAD,
            )

    @property
    def enabled(self) -> bool:
        """Whether answers are kept at all."""
        return self._entries is not None

    def get(self, key: tuple[object, ...]) -> CachedAnswer | None:
        """The answer kept under ``key``, if any."""
        return None if self._entries is None else self._entries.get(key)

    def put(self, key: tuple[object, ...], body: bytes, rows: int, where: str) -> None:
        """Keep a complete answer (not when it is over the bound)."""
        if self._entries is not None and len(body) <= self.max_entry_bytes:
            self._entries[key] = CachedAnswer(body, rows, where)

    @property
    def size(self) -> int:
        """Bytes held now."""
        return 0 if self._entries is None else int(self._entries.currsize)
