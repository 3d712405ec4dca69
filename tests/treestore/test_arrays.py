"""The numpy helpers give what numpy's own functions give."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from treestore.arrays import distinct_of_sorted, distinct_sorted, pooled_empty, unique_first_inverse


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50))
def test_distinct_sorted_is_np_unique(values: list[int]) -> None:
    array = np.array(values, dtype=np.int64)
    assert distinct_sorted(array).tolist() == np.unique(array).tolist()


@given(st.lists(st.integers(-5, 5), max_size=60))
def test_unique_first_inverse_is_np_unique(values: list[int]) -> None:
    array = np.array(values, dtype=np.int64)
    expected = np.unique(array, return_index=True, return_inverse=True)
    for got, want in zip(unique_first_inverse(array), expected, strict=True):
        assert got.tolist() == want.tolist()


@given(st.lists(st.integers(0, 5), max_size=40), st.integers(1, 7))
def test_distinct_of_sorted_moves_the_distinct_values_to_the_front(
    values: list[int], block: int
) -> None:
    """Blocks of any size (down to one value): a run of equal values that crosses a block's
    end is kept once."""
    import treestore.arrays as arrays

    saved = arrays._BLOCK
    arrays._BLOCK = block
    try:
        ordered = np.sort(np.array(values, dtype=np.int32))
        got = distinct_of_sorted(ordered)
    finally:
        arrays._BLOCK = saved
    assert got.tolist() == sorted(set(values))
    assert got.base is ordered or got is ordered or not len(got)  # in place, a view


def test_pooled_arrays_are_writable_numpy_arrays() -> None:
    array = pooled_empty(5, np.int32)
    array[:] = 3
    assert array.dtype == np.int32 and array.tolist() == [3] * 5
