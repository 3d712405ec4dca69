"""The page cache's budget, shared with memtables: what a load's task lends them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from treestore.storage import page_cache
from treestore.storage.memtable import ENTRY_BYTES
from treestore.storage.pagestore import MemoryPageStore
from treestore.storage.tree import ShardTree, build_tree
from treestore.storage.visits import memtable_limit

BUDGET = 256 * 1024


@pytest.fixture
def small_cache() -> Iterator[page_cache.PageCache]:
    yield page_cache.reset_cache(BUDGET)
    page_cache.reset_cache(256 * 1024 * 1024)


def test_lending_drops_the_oldest_pages_and_grows_the_memtables_until_it_ends(
    small_cache: page_cache.PageCache,
) -> None:
    tree = build_tree(MemoryPageStore(), [["root", f"user{i:06d}"] for i in range(20000)])
    small_cache.clear()
    assert sum(1 for _ in tree.walk()) == 20001
    assert small_cache.bytes > BUDGET // 2  # the whole budget was used
    reader = tree.readers[0]
    reader.page(0)  # used last: the walk read it first
    assert memtable_limit() == BUDGET // 2 // ENTRY_BYTES
    with small_cache.lend(BUDGET // 2):
        assert small_cache.lent == BUDGET // 2
        assert 0 < small_cache.bytes <= BUDGET // 2
        assert small_cache.get((*reader._cache_prefix, 0)) is not None  # kept: used last
        assert memtable_limit() == BUDGET // ENTRY_BYTES
        assert ShardTree(MemoryPageStore()).memtable_limit == BUDGET // ENTRY_BYTES
        assert sum(1 for _ in tree.walk()) == 20001
        assert small_cache.bytes <= BUDGET // 2  # reads keep within the rest
    assert small_cache.lent == 0 and memtable_limit() == BUDGET // 2 // ENTRY_BYTES
    assert sum(1 for _ in tree.walk()) == 20001
    assert small_cache.bytes > BUDGET // 2  # the whole budget again


def test_lending_more_than_the_budget_lends_what_is_left(
    small_cache: page_cache.PageCache,
) -> None:
    with small_cache.lend(BUDGET // 2), small_cache.lend(BUDGET):
        assert small_cache.lent == BUDGET
        assert small_cache.bytes == 0
    assert small_cache.lent == 0
