"""The page cache: decoded pages of every run, one LRU cache per process with a byte
budget (``TREESTORE_CACHE_MB``, default 256), keyed by (store location, run, page).

The budget is the process's for pages and a writer's memtable together: a memtable may
hold half the budget beside the cache's whole, and a load's task lends it half the
cache's on top (:meth:`PageCache.lend`): a load reads few pages twice (its lookups read
runs in long stretches, past the cache), and a memtable that holds the tree's hot upper
nodes beside the new ones spills and merges far less (see
:func:`~treestore.storage.visits.memtable_limit`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from cachetools import LRUCache

from treestore.settings import env_number
from treestore.storage.pages import Page

__all__ = ["PageCache", "cache", "reset_cache"]


class PageCache:
    """An LRU cache of decoded pages with a byte budget, shared by every run in a process."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self._pages: LRUCache[tuple[str, str, int], Page] = LRUCache(
            maxsize=budget_bytes, getsizeof=lambda page: page.cost
        )
        self._lock = threading.Lock()
        self.lent = 0
        """The bytes of the budget lent to memtables now (:meth:`lend`): the cache holds
        pages of at most the rest."""
        self.hits = 0
        self.misses = 0
        self.peak_bytes = 0

    @property
    def bytes(self) -> int:
        """The bytes the cached pages are estimated to take now."""
        return int(self._pages.currsize)

    def get(self, key: tuple[str, str, int]) -> Page | None:
        with self._lock:
            page = self._pages.get(key)
            if page is None:
                self.misses += 1
            else:
                self.hits += 1
            return page

    def put(self, key: tuple[str, str, int], page: Page) -> None:
        with self._lock:
            if page.cost <= self.budget - self.lent:
                self._pages[key] = page
                self._fit()
                self.peak_bytes = max(self.peak_bytes, int(self._pages.currsize))

    def _fit(self) -> None:
        """Drop the least recently used pages until the cache holds its share."""
        while self._pages.currsize > self.budget - self.lent:
            self._pages.popitem()

    @contextlib.contextmanager
    def lend(self, share: int) -> Iterator[None]:
        """Lend ``share`` bytes of the budget to memtables for the block (a load's task):
        the least recently used pages beyond the rest are dropped, and the cache holds at
        most the rest until the block ends."""
        with self._lock:
            share = max(0, min(share, self.budget - self.lent))
            self.lent += share
            self._fit()
        try:
            yield
        finally:
            with self._lock:
                self.lent -= share

    def clear(self) -> None:
        """Forget every cached page and the counters."""
        with self._lock:
            self._pages.clear()
            self.hits = self.misses = self.peak_bytes = 0


_CACHE: PageCache | None = None


def cache() -> PageCache:
    """The process's page cache (budget ``TREESTORE_CACHE_MB`` megabytes, default 256)."""
    global _CACHE
    if _CACHE is None:
        megabytes = env_number("TREESTORE_CACHE_MB", 256)
        _CACHE = PageCache(int(megabytes * 1024 * 1024))
    return _CACHE


def reset_cache(budget_bytes: int | None = None) -> PageCache:
    """Replace the process's page cache (for tests and benchmarks)."""
    global _CACHE
    _CACHE = PageCache(budget_bytes if budget_bytes is not None else cache().budget)
    return _CACHE
