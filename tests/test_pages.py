"""The page codec: round trips of every column type, and pages of the first format."""

from __future__ import annotations

import msgpack
import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from treestore.pages import Page, encode_page, int_dtypes

_INT = st.integers(-(1 << 62), 1 << 62)


def _encode(parents, names, ids, hits, counts, data):  # type: ignore[no-untyped-def]
    ints = tuple(np.asarray(c, dtype=np.int64) for c in (parents, ids, hits, counts))
    array = pa.array(names, pa.string())
    offsets = np.frombuffer(array.buffers()[1], np.int32, len(names) + 1)
    raw = array.buffers()[2]
    return encode_page(ints, int_dtypes(ints), offsets, raw.to_pybytes() if raw else b"", data)


@settings(deadline=None)
@given(
    st.lists(
        st.tuples(_INT, st.text(), _INT, _INT, _INT, st.none() | st.dictionaries(st.text(), _INT)),
        max_size=40,
    )
)
def test_a_page_gives_back_every_entry(entries: list[tuple]) -> None:  # type: ignore[type-arg]
    columns = [list(c) for c in zip(*entries, strict=True)] if entries else [[]] * 6
    has_data = any(d is not None for d in columns[5])
    page = Page(_encode(*columns[:5], columns[5] if has_data else None))
    assert len(page) == len(entries)
    assert [page.entry(i) for i in range(len(page))] == [
        ((p, n), i, h, c, d) for p, n, i, h, c, d in entries
    ]
    assert page.names.to_pylist() == columns[1]
    assert [c.tolist() for c in page.ints] == [columns[0], columns[2], columns[3], columns[4]]


def test_small_values_are_stored_as_int32_and_big_ones_as_int64() -> None:
    small = _encode([1, 2], ["a", "b"], [3, 4], [5, 6], [0, 0], None)
    big = _encode([1, 2], ["a", "b"], [3, 1 << 40], [5, 6], [0, 0], None)
    assert len(big) > len(small)
    assert [c.dtype.itemsize for c in Page(small).ints] == [4, 4, 4, 4]
    assert Page(big).ints[1].tolist() == [3, 1 << 40]


def test_pages_of_the_first_format_are_read() -> None:
    encoded = msgpack.packb([[0, 0], ["a", "é"], [1, 2], [3, 4], [0, 1], [None, {"s": ["sum", 2]}]])
    page = Page(encoded)
    assert page.entry(1) == ((0, "é"), 2, 4, 1, {"s": ["sum", 2]})
    assert page.find((0, "b")) == 1
    assert page.ints[2].tolist() == [3, 4]
