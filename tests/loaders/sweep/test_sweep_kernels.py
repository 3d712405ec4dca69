"""The sweep's per-partition kernels against a brute-force oracle, with random partitioning."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from loaders.sweep.kernels import (
    END,
    EVENT,
    KIND_ORDER,
    START,
    PartitionSummary,
    carry_ins,
    make_aggregation,
    replay,
    sweep_rows,
)
from loaders.sweep.options import AGGREGATIONS, CLOSED
from tests.support.sweep_oracle import expected

ids = st.sampled_from([1, 2, 3])
times = st.integers(0, 12)
events_strategy = st.lists(st.tuples(ids, times), max_size=25)
intervals_strategy = st.lists(st.tuples(ids, times, times, st.integers(-3, 9)), max_size=25)


def _sweep(
    events: list[tuple[Any, int]],
    intervals: list[Any],
    agg: str,
    closed: str,
    cuts: list[int],
    batch: int,
) -> list[Any]:
    order = KIND_ORDER[closed]
    rows = [(i, t, order[EVENT], EVENT, None, n) for n, (i, t) in enumerate(events)]
    for i, s, e, v in intervals:
        if s > e or (closed != "both" and s == e):
            continue
        rows.append((i, s, order[START], START, v, -1))
        rows.append((i, e, order[END], END, v, -1))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    bounds = sorted({0, len(rows), *(c % (len(rows) + 1) for c in cuts)})
    partitions = [rows[a:b] for a, b in itertools.pairwise(bounds)]
    summaries = []
    for p, part in enumerate(partitions):
        summary = PartitionSummary()
        for k in range(0, len(part), batch):
            chunk = part[k : k + batch]
            summary.feed([r[0] for r in chunk], [r[3] for r in chunk], [r[4] for r in chunk])
        summaries.append(summary.to_dict(p))
    carry = carry_ins(summaries)
    aggregation = make_aggregation(agg)
    results: dict[int, Any] = {}
    for p, part in enumerate(partitions):
        state = None
        if p in carry:
            state = (carry[p][0], replay(aggregation, carry[p][1]))
        for k in range(0, len(part), batch):
            chunk = part[k : k + batch]
            out, state = sweep_rows(
                aggregation,
                [r[0] for r in chunk],
                [r[3] for r in chunk],
                [r[4] for r in chunk],
                state,
            )
            for row, value in zip([r for r in chunk if r[3] == EVENT], out, strict=True):
                results[row[5]] = value
    return [results[n] for n in range(len(events))]


def _normal(value: Any) -> Any:
    return list(value) if isinstance(value, list | tuple) else value


@given(
    events=events_strategy,
    intervals=intervals_strategy,
    agg=st.sampled_from(AGGREGATIONS),
    closed=st.sampled_from(CLOSED),
    cuts=st.lists(st.integers(0, 200), max_size=6),
    batch=st.integers(1, 7),
)
def test_partitioned_sweep_matches_the_oracle(
    events: list[Any], intervals: list[Any], agg: str, closed: str, cuts: list[int], batch: int
) -> None:
    got = [_normal(v) for v in _sweep(events, intervals, agg, closed, cuts, batch)]
    assert got == expected(events, intervals, agg, closed)


def test_seed_example_in_minutes() -> None:
    events = [(1, 600), (1, 615), (2, 601)]
    intervals = [
        (1, 570, 630, 10),
        (1, 601, 605, 20),
        (1, 608, 620, 30),
        (1, 630, 645, 40),
        (2, 570, 630, 50),
    ]
    assert _sweep(events, intervals, "sum", "both", [], 100) == [10, 40, 50]
    assert _sweep(events, intervals, "set", "both", [3, 5, 9], 2) == [[10], [10, 30], [50]]


def test_custom_merge_pair() -> None:
    aggregation = make_aggregation((lambda s, v: s | {v}, lambda s, v: s - {v}), frozenset())
    out, _ = sweep_rows(
        aggregation, [1, 1, 1, 1], [START, EVENT, END, EVENT], ["x", None, "x", None]
    )
    assert out == [frozenset({"x"}), frozenset()]
