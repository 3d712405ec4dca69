"""The pure parts of the tree: the compaction policy, the acceptance rule of a visit, and
the docstring examples of the storage modules that have them."""

from __future__ import annotations

import doctest
import itertools
import math
from types import ModuleType

import numpy as np
import pytest

from treestore.storage import compaction, keyfilter, tree, visits
from treestore.storage.compaction import after_flush, own_runs_at_commit, size_tiered
from treestore.storage.visits import ANY_AGE, accepts, counted_hits


@pytest.mark.parametrize("module", [compaction, keyfilter, visits, tree], ids=lambda m: m.__name__)
def test_docstring_examples(module: ModuleType) -> None:
    failures, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0


def test_size_tiered_merges_small_new_runs_and_leaves_big_old_ones() -> None:
    assert size_tiered([100] * 6) == 0  # up to MAX_RUNS: nothing
    assert size_tiered([1000, 600, 320, 310, 10, 5, 3]) == 3  # 18 < 310 (328 > 320): the deltas
    assert size_tiered([1000, 800, 600, 400, 300, 200, 100]) == 7  # no small group: all
    assert size_tiered([5, 4, 3], max_runs=2) == 3


def _spill(flushes: int, shrink: float = 1.0) -> tuple[list[int], int]:
    """A load's runs after ``flushes`` flushes of 100 entries, merging as :func:`after_flush`
    says (a merge keeps ``shrink`` of its entries); returns the runs and the entries written."""
    runs: list[int] = []
    written = 0
    for _ in range(flushes):
        runs.append(100)
        written += 100
        while newest := after_flush(runs):
            merged = int(sum(runs[-newest:]) * shrink)
            runs[-newest:] = [merged]
            written += merged
    return runs, written


@pytest.mark.parametrize("shrink", [1.0, 0.6])
def test_after_flush_keeps_runs_and_rewrites_logarithmic_in_the_load(shrink: float) -> None:
    for flushes in (*range(1, 70), 256, 1000):
        runs, written = _spill(flushes, shrink)
        levels = math.log(flushes, compaction.FAN_IN) + 1
        assert len(runs) <= 3 * levels, (flushes, runs)
        assert written <= 100 * flushes * (levels + 1), (flushes, written)
    assert _spill(3) == ([100, 100, 100], 300)
    assert _spill(4) == ([400], 800)  # FAN_IN alike: one run
    assert _spill(16)[0] == [1600]


def test_own_runs_merge_at_commit_only_when_they_fit() -> None:
    assert own_runs_at_commit([], 100) == 0
    assert own_runs_at_commit([50], 100) == 0  # one run: nothing to merge
    assert own_runs_at_commit([50, 50], 100) == 2
    assert own_runs_at_commit([50, 51], 100) == 0  # too big to merge in memory


def _rule_by_cases(stored: int, create: bool, once: bool, created_before: int) -> bool:
    """The rule as the visit docstring states it, case by case."""
    exists = stored >= 0
    if once:
        return create and not exists
    if create:
        return True
    return exists and stored < created_before


def test_the_acceptance_rule_on_one_id_and_on_arrays_agrees_with_its_cases() -> None:
    ids = [-1, 0, 3, 4, 9]
    for create, once, before in itertools.product([True, False], [True, False], [4, ANY_AGE]):
        expected = [_rule_by_cases(i, create, once, before) for i in ids]
        assert [bool(accepts(i, create, once, before)) for i in ids] == expected
        vector = np.asarray(accepts(np.array(ids, np.int64), create, once, before), dtype=bool)
        assert vector.tolist() == expected
    assert counted_hits(5, once=False) == 5 and counted_hits(5, once=True) == 1
    assert counted_hits(np.array([0, 1, 3]), once=True).tolist() == [0, 1, 1]
