"""The broadcast plan's index (binary searches over per-id running totals), and the same
searches over the range plan's packed keys, against the oracle."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loaders.sweep.cover_index import CoverIndex, open_totals
from loaders.sweep.kernels import END, EVENT, KIND_ORDER, START
from loaders.sweep.options import CLOSED
from tests.support.sweep_oracle import expected

STRING = pa.string()
ids = st.sampled_from(["a", "b", "c"])
times = st.integers(-5, 12)
events_strategy = st.lists(st.tuples(ids, times), max_size=30)
intervals_strategy = st.lists(st.tuples(ids, times, times, st.integers(-3, 9)), max_size=30)


def _lookup(
    events: list[Any],
    intervals: list[Any],
    closed: str,
    agg: str,
    as_float: bool = False,
    time_type: Any = np.int64,
    id_type: pa.DataType = STRING,
) -> list[Any]:
    kept = intervals  # the index itself leaves out start > end and empty half-open intervals
    values = np.array([v for *_, v in kept], dtype=np.float64 if as_float else np.int64)
    index = CoverIndex.build(
        pa.array([i for i, *_ in kept], id_type),
        np.array([s for _, s, _, _ in kept], dtype=time_type),
        np.array([e for _, _, e, _ in kept], dtype=time_type),
        None if agg == "count" else values,
        closed,
    )
    found = index.lookup(
        pa.array([i for i, _ in events], id_type),
        np.array([t for _, t in events], dtype=time_type),
    )
    return found.tolist()


@pytest.mark.parametrize("time_type", [np.int64, np.float64], ids=["offsets", "ranks"])
@pytest.mark.parametrize("agg", ["sum", "count"])
@pytest.mark.parametrize("closed", CLOSED)
@given(events=events_strategy, intervals=intervals_strategy)
def test_lookup_matches_the_oracle(
    agg: str, closed: str, time_type: Any, events: list[Any], intervals: list[Any]
) -> None:
    # equal times, zero-length, nested and identical intervals, start > end, an unknown id
    intervals = [*intervals, ("a", 3, 3, 7), ("a", 2, 6, 1), ("a", 2, 6, 1), ("b", 8, 1, 4)]
    events = [*events, ("a", 3), ("a", 2), ("a", 6), ("z", 3)]
    got = _lookup(events, intervals, closed, agg, time_type=time_type)
    assert got == expected(events, intervals, agg, closed)


NUMBERED = {"a": 7, "b": -3, "c": 12, "z": 9}  # z: between the interval ids, none of them


@pytest.mark.parametrize("spread", [1, 2**45], ids=["offsets", "hashed"])
@pytest.mark.parametrize("agg", ["sum", "count"])
@pytest.mark.parametrize("closed", CLOSED)
@given(
    events=events_strategy,
    intervals=intervals_strategy,
    weights=st.sampled_from([(-3, 9), (0, 9), (0, 2**58)]),
)
def test_whole_number_ids_and_weights_match_the_oracle(
    agg: str,
    closed: str,
    spread: int,
    events: list[Any],
    intervals: list[Any],
    weights: tuple[int, int],
) -> None:
    """Ids as offsets (or hashed when they span too many bits); weights that ride in the
    sort key (small and non-negative) or that do not (negative, or too wide)."""
    low, high = weights
    intervals = [(i, s, e, min(max(v, low), high)) for i, s, e, v in intervals]
    intervals = [*intervals, ("a", 2, 6, high), ("c", 0, 9, 1), ("b", 8, 1, 4)]
    events = [*events, ("a", 3), ("z", 3), ("b", 5), ("c", 9)]

    def numbered(rows: list[Any]) -> list[Any]:
        return [(NUMBERED[i] * spread, *rest) for i, *rest in rows]

    got = _lookup(numbered(events), numbered(intervals), closed, agg, id_type=pa.int64())
    assert got == expected(events, intervals, agg, closed)


@pytest.mark.parametrize("closed", CLOSED)
def test_times_too_wide_to_offset_are_ranked(closed: str) -> None:
    far = 2**62
    intervals = [("a", -far, far, 1), ("a", 0, far, 2), ("a", -far, 0, 4), ("b", far, far, 8)]
    events = [("a", -far), ("a", 0), ("a", far), ("a", -(2**63)), ("b", far), ("b", 0)]
    assert _lookup(events, intervals, closed, "sum") == expected(events, intervals, "sum", closed)


def test_double_sums_restart_per_id() -> None:
    # a huge total on one id must not blur an exact small sum on another
    intervals = [("a", 0, 10, 1e17), ("a", 0, 10, 3.0), ("b", 0, 10, 0.1), ("b", 5, 6, 0.2)]
    events = [("b", 5), ("b", 7), ("a", 11), ("b", 11)]
    found = _lookup(events, intervals, "both", "sum", as_float=True)
    assert found == pytest.approx([0.3, 0.1, 0.0, 0.0], rel=1e-12, abs=1e-12)


def test_no_intervals_and_no_events() -> None:
    assert _lookup([("a", 1)], [], "both", "sum") == [0]
    assert _lookup([], [("a", 0, 1, 5)], "left", "count") == []


def test_ids_far_outside_the_intervals_find_nothing() -> None:
    # offset 2**60 shifted past the time bits wraps to the key of id 0: it must not match
    intervals = [(0, 0, 9, 5), (1, 0, 9, 2)]
    events = [(2**60, 3), (-(2**60), 3), (0, 3), (1, 3), (2, 3)]
    assert _lookup(events, intervals, "both", "sum", id_type=pa.int64()) == [0, 0, 5, 2, 0]


@pytest.mark.parametrize("closed", CLOSED)
@given(
    events=st.lists(st.tuples(st.integers(0, 3), times), max_size=30),
    intervals=st.lists(
        st.tuples(st.integers(0, 3), times, st.integers(0, 6), st.integers(-3, 9)), max_size=30
    ),
    agg=st.sampled_from(["sum", "count", "float"]),
)
def test_open_totals_over_packed_keys_follow_the_oracle(
    closed: str, events: list[Any], intervals: list[Any], agg: str
) -> None:
    """Keys packing (id, time + 5, rank) with the ranks ``closed`` implies: each event's
    total is that of its id's intervals covering its time (ties at equal times
    included), whole or fractional values, or the count."""
    intervals = [(i, s, s + length, v) for i, s, length, v in intervals]
    if closed != "both":  # the range plan keeps no empty interval but for closed="both"
        intervals = [r for r in intervals if r[1] < r[2]]
    rank = KIND_ORDER[closed]

    def keys(rows: list[tuple[int, int]], kind: int) -> np.ndarray:
        return np.array([(i << 7) + ((t + 5) << 2) + rank[kind] for i, t in rows], np.int64)

    weights = None
    if agg != "count":
        weights = np.array([v / (4 if agg == "float" else 1) for *_, v in intervals])
        weights = weights if agg == "float" else weights.astype(np.int64)
    got = open_totals(
        keys([(i, s) for i, s, _, _ in intervals], START),
        keys([(i, e) for i, _, e, _ in intervals], END),
        weights,
        keys(events, EVENT),
        7,
    )
    scaled = [(i, s, e, v / 4 if agg == "float" else v) for i, s, e, v in intervals]
    assert got.tolist() == expected(events, scaled, "count" if agg == "count" else "sum", closed)
