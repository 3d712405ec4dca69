"""The numpy helpers give what numpy's own functions give."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from treestore.arrays import distinct_sorted, unique_first_inverse


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
