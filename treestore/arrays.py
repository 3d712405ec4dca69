"""numpy helpers the hot paths share.

``np.unique`` without ``return_index``/``return_inverse`` hashes its input in numpy 2.x,
which is 50-70x slower than sorting on these machines (1M int64: 0.67 s against 0.01 s);
the helpers here sort instead.
"""

from __future__ import annotations

import numpy as np

__all__ = ["distinct_of_sorted", "distinct_sorted", "expand_ranges", "unique_first_inverse"]


def distinct_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values of ``values``, sorted ascending (``np.unique(values)``, by a sort)."""
    return distinct_of_sorted(np.sort(values))


def distinct_of_sorted(ordered: np.ndarray) -> np.ndarray:
    """The distinct values of ``ordered``, which is sorted ascending."""
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def unique_first_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(values, return_index=True, return_inverse=True)``: the distinct values
    sorted, the first position of each, and each value's place among them, by numpy's
    quicksort (np.unique's stable sort is about 4x slower on int64)."""
    if not len(values):
        empty = np.zeros(0, dtype=np.int64)
        return values[:0], empty, empty
    order = np.argsort(values)
    ordered = values[order]
    starts = np.empty(len(ordered), dtype=bool)
    starts[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    begins = np.flatnonzero(starts)
    inverse = np.empty(len(values), dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return ordered[begins], np.minimum.reduceat(order, begins), inverse


def expand_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``starts[0] .. starts[0]+lengths[0]-1``, then the next range, ... as one index array."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    before = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) + np.repeat(starts - before, lengths)
