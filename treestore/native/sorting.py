"""The compiled kernels that put tree entries in key order (by parent id, then name
bytewise, as Arrow sorts strings): a radix sort of the parent ids, the names of each
parent's children sorted where they lie, and runs already in key order merged.

Imported only through :func:`treestore.native.kernels` (by way of
:mod:`treestore.native.compiled`), which sets where numba caches the compiled code.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def radix_order(keys, low, bits):  # type: ignore[no-untyped-def]
    """The stable order sorting ``keys`` (int64, from ``low``, spanning ``bits`` bits) and
    the keys in that order less ``low``: least significant digit first, 11 bits a pass,
    each key carried with its position (no gather of the keys by the order)."""
    n = len(keys)
    digit_bits = 11
    size = 1 << digit_bits
    mask = size - 1
    passes = max(1, (bits + digit_bits - 1) // digit_bits)
    counts = np.zeros((passes, size), np.int64)
    current = np.empty(n, np.int64)
    for i in range(n):
        key = keys[i] - low
        current[i] = key
        for p in range(passes):
            counts[p, (key >> (p * digit_bits)) & mask] += 1
    order = np.arange(n).astype(np.int64)
    spare_order = np.empty(n, np.int64)
    spare_keys = np.empty(n, np.int64)
    starts = np.empty(size, np.int64)
    for p in range(passes):
        total = 0
        for digit in range(size):
            starts[digit] = total
            total += counts[p, digit]
        shift = p * digit_bits
        for i in range(n):
            key = current[i]
            digit = (key >> shift) & mask
            at = starts[digit]
            starts[digit] = at + 1
            spare_order[at] = order[i]
            spare_keys[at] = key
        order, spare_order = spare_order, order
        current, spare_keys = spare_keys, current
    return order, current


@njit(cache=True, nogil=True, inline="always")
def _bytes_less(offsets, data, a, b):  # type: ignore[no-untyped-def]
    """Whether value ``a`` sorts before value ``b``: bytewise, a prefix first (Arrow's order
    of strings)."""
    start_a, start_b = offsets[a], offsets[b]
    size_a, size_b = offsets[a + 1] - start_a, offsets[b + 1] - start_b
    for k in range(min(size_a, size_b)):
        x, y = data[start_a + k], data[start_b + k]
        if x != y:
            return x < y
    return size_a < size_b


@njit(cache=True, nogil=True)
def sort_short_runs(keys, offsets, data, most):  # type: ignore[no-untyped-def]
    """The permutation that sorts each run of equal ``keys`` (sorted) by its values (the
    strings at ``offsets`` into ``data``, in the keys' order): runs of up to ``most`` by
    insertion (stable), longer ones left as they are and listed as (start, end) pairs."""
    n = len(keys)
    perm = np.arange(n).astype(np.int64)
    longer = []
    i = 0
    while i < n:
        j = i + 1
        while j < n and keys[j] == keys[i]:
            j += 1
        if j - i > most:
            longer.append(i)
            longer.append(j)
        elif j - i > 1:
            for a in range(i + 1, j):
                moving = perm[a]
                b = a - 1
                while b >= i and _bytes_less(offsets, data, moving, perm[b]):
                    perm[b + 1] = perm[b]
                    b -= 1
                perm[b + 1] = moving
        i = j
    return perm, np.array(longer, np.int64)


@njit(cache=True, nogil=True)
def merge_sorted_parts(parents, offsets, data, bounds):  # type: ignore[no-untyped-def]
    """The stable key order of parts laid one after another (part ``p`` is positions
    ``bounds[p]`` to ``bounds[p + 1]``, each part in key order: by ``parents``, then the
    strings at ``offsets`` into ``data``), by merging neighbouring parts pairwise; of
    equal keys, the earlier part's come first."""
    parts = len(bounds) - 1
    total = bounds[parts]
    order = np.arange(total).astype(np.int64)
    spare = np.empty(total, np.int64)
    width = 1
    while width < parts:
        for start in range(0, parts, 2 * width):
            middle = min(start + width, parts)
            end = min(start + 2 * width, parts)
            i, j, k = bounds[start], bounds[middle], bounds[start]
            left_end, right_end = bounds[middle], bounds[end]
            while i < left_end and j < right_end:
                a, b = order[i], order[j]
                if parents[b] < parents[a] or (
                    parents[b] == parents[a] and _bytes_less(offsets, data, b, a)
                ):
                    spare[k] = b
                    j += 1
                else:
                    spare[k] = a
                    i += 1
                k += 1
            while i < left_end:
                spare[k] = order[i]
                i += 1
                k += 1
            while j < right_end:
                spare[k] = order[j]
                j += 1
                k += 1
        order, spare = spare, order
        width *= 2
    return order
