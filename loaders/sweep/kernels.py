"""The interval sweep's per-partition work, in plain Python and numpy (no Spark).

Events (``a``), interval starts (``b+``) and interval ends (``b-``) of one id
arrive sorted by (time, kind). The order of kinds at equal times decides which
interval ends are included (:data:`KIND_ORDER`): for closed intervals
``[start, end]`` a start comes before an event and an event before an end. A
running state per id adds a value at ``b+``, removes it at ``b-``, and each
``a`` row reads the aggregate of the state.

Aggregations: ``sum`` and ``count`` run vectorized (numpy cumulative sums);
``set``, ``list``, ``min``, ``max`` and a user's ``(add, remove)`` pair keep a
multiset of the open intervals' values.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sortedcontainers import SortedList

from loaders.sweep.options import AGGREGATIONS

__all__ = [
    "END",
    "EVENT",
    "KIND_ORDER",
    "START",
    "Aggregation",
    "RunningSums",
    "carry_totals",
    "make_aggregation",
    "summable",
    "sweep_rows",
]

EVENT, START, END = 0, 1, 2
"""Roles of sweep rows."""

KIND_ORDER: dict[str, dict[int, int]] = {
    # role -> sort rank at equal times
    "both": {START: 0, EVENT: 1, END: 2},  # [start, end]
    "left": {END: 0, START: 1, EVENT: 2},  # [start, end)
    "right": {EVENT: 0, START: 1, END: 2},  # (start, end]
    "neither": {END: 0, EVENT: 1, START: 2},  # (start, end)
}


@dataclass(frozen=True)
class Aggregation:
    """How a sweep folds the values of the intervals covering an event.

    ``new`` makes an empty state; ``add`` / ``remove`` change it and return it;
    ``result`` reads it for an event. ``vectorized`` aggregations (sum, count)
    are computed with numpy instead of the state functions.
    """

    name: str
    new: Callable[[], Any]
    add: Callable[[Any, Any], Any]
    remove: Callable[[Any, Any], Any]
    result: Callable[[Any], Any]
    vectorized: bool = False


def _counter_add(state: SortedList, value: Any) -> SortedList:
    state.add(value)
    return state


def _counter_remove(state: SortedList, value: Any) -> SortedList:
    state.remove(value)
    return state


def _distinct(state: SortedList) -> list[Any]:
    out: list[Any] = []
    for value in state:
        if not out or out[-1] != value:
            out.append(value)
    return out


def make_aggregation(
    agg: str | tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]],
    initial: Any = 0,
) -> Aggregation:
    """The :class:`Aggregation` for ``agg``: a name, or a user's ``(add, remove)`` pair."""
    if isinstance(agg, tuple):
        add, remove = agg
        return Aggregation("custom", lambda: initial, add, remove, lambda state: state)
    if agg == "sum":
        return Aggregation(
            agg, lambda: 0, lambda s, v: s + v, lambda s, v: s - v, lambda s: s, vectorized=True
        )
    if agg == "count":
        return Aggregation(
            agg, lambda: 0, lambda s, v: s + 1, lambda s, v: s - 1, lambda s: s, vectorized=True
        )
    results: dict[str, Callable[[SortedList], Any]] = {
        "set": _distinct,
        "list": list,
        "min": lambda state: state[0] if state else None,
        "max": lambda state: state[-1] if state else None,
    }
    if agg not in results:
        raise ValueError(f"unknown aggregation {agg!r}; use one of {', '.join(AGGREGATIONS)}")
    return Aggregation(agg, SortedList, _counter_add, _counter_remove, results[agg])


def replay(aggregation: Aggregation, carried: Iterable[tuple[Any, int]]) -> Any:
    """A fresh state holding ``carried`` (value, count) pairs: intervals already open."""
    state = aggregation.new()
    for value, count in carried:
        for _ in range(count):
            state = aggregation.add(state, value)
    return state


def summable(values: np.ndarray) -> np.ndarray:
    """Interval values as a sum adds them: decimals as doubles, whole numbers as int64 (so
    that negating the smallest cannot wrap), NaN as 0."""
    if values.dtype.kind == "O":  # decimals: their sum is a double
        return np.nan_to_num(values.astype(np.float64))
    if values.dtype.kind in "iub":
        return values.astype(np.int64)
    return np.nan_to_num(values.astype(np.float64))


def _vectorized(
    aggregation: Aggregation,
    ids: np.ndarray,
    roles: np.ndarray,
    values: np.ndarray,
    first_id: Any,
    first_total: float,
) -> np.ndarray:
    """Running sums restarted at every id change; ``first_total`` seeds the first id's run."""
    if aggregation.name == "count":
        step = np.where(roles == START, 1, np.where(roles == END, -1, 0)).astype(np.int64)
    else:
        filled = summable(values)
        step = np.where(roles == START, filled, np.where(roles == END, -filled, 0))
    totals = np.cumsum(step)
    boundary = np.ones(len(ids), dtype=bool)
    boundary[1:] = ids[1:] != ids[:-1]
    starts = np.maximum.accumulate(np.where(boundary, np.arange(len(ids)), 0))
    before = np.where(starts > 0, totals[starts - 1], 0)
    running = totals - before
    if len(ids) and ids[0] == first_id:
        first_run = starts == 0
        running = running + np.where(first_run, first_total, 0).astype(running.dtype)
    return running


def running_totals(
    aggregation: Aggregation, ids: Any, roles: Any, values: Any, state: tuple[Any, Any] | None
) -> np.ndarray:
    """The running sum/count at every row, restarting at id changes and continuing ``state``."""
    first_id, first_total = state if state is not None else (None, 0)
    return _vectorized(
        aggregation, np.asarray(ids), np.asarray(roles), np.asarray(values), first_id, first_total
    )


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


class RunningSums:
    """The one pass of sum/count over one partition's sorted rows, fed in slices.

    Each row gets its running total from zero (restarting at id changes); the rows of
    the partition's first id are flagged as its head (a carry-in from earlier
    partitions corrects them afterwards); :meth:`summary` tells the driver the
    partition's first and last ids and their totals (see :func:`carry_totals`).
    """

    def __init__(self, aggregation: Aggregation) -> None:
        self.aggregation = aggregation
        self.state: tuple[Any, Any] | None = None
        self.first: Any = None
        self.first_net: Any = 0
        self.head_open = True
        self.rows = 0

    def feed(self, ids: Any, roles: Any, values: Any) -> tuple[np.ndarray, np.ndarray]:
        """The running totals and head flags of the next (non-empty) slice of rows."""
        self.rows += len(ids)
        if self.first is None:
            self.first = _plain(ids[0])
        running = running_totals(self.aggregation, ids, roles, values, self.state)
        head = np.zeros(len(ids), dtype=bool)
        if self.head_open:
            other = np.flatnonzero(ids != ids[0]) if ids[0] == self.first else np.array([0])
            end = int(other[0]) if len(other) else len(ids)
            head[:end] = True
            if end:
                self.first_net = running[end - 1].item()
            self.head_open = end == len(ids)
        self.state = (_plain(ids[-1]), running[-1].item())
        return running, head

    def summary(self, partition: int) -> dict[str, Any]:
        """A msgpack-able summary of the rows fed so far, for :func:`carry_totals`."""
        last_id, last_net = self.state if self.state is not None else (None, 0)
        return {
            "partition": partition,
            "first": self.first,
            "last": last_id,
            "rows": self.rows,
            "first_net": self.first_net,
            "last_net": last_net,
        }


def carry_totals(summaries: list[dict[str, Any]]) -> dict[int, Any]:
    """Each partition's carry-in for sum/count: its first id's total from earlier partitions."""
    carry: dict[int, Any] = {}
    open_id: Any = object()
    total: Any = 0
    for summary in sorted(summaries, key=lambda s: s["partition"]):
        if summary["rows"] == 0:
            continue
        first, last = summary["first"], summary["last"]
        if first == open_id and total:
            carry[summary["partition"]] = total
        if first == last and first == open_id:
            total += summary["first_net"]
        else:
            open_id, total = last, summary["last_net"]
    return carry


def sweep_rows(
    aggregation: Aggregation,
    ids: Sequence[Any],
    roles: Sequence[int],
    values: Sequence[Any],
    first_state: tuple[Any, Any] | None = None,
) -> tuple[list[Any], tuple[Any, Any] | None]:
    """Sweep sorted rows; return the result of each event row and the state to carry on.

    ``first_state`` is ``(id, state)``: the state the run of that id starts
    from (intervals opened in earlier batches or partitions). The returned
    state is the last id's, for the next batch.
    """
    if aggregation.vectorized:
        id_array = np.asarray(ids)
        role_array = np.asarray(roles)
        value_array = (
            values
            if isinstance(values, np.ndarray)
            else np.asarray([0 if v is None else v for v in values])
        )
        first_id, first_total = first_state if first_state is not None else (None, 0)
        running = _vectorized(aggregation, id_array, role_array, value_array, first_id, first_total)
        results = running[role_array == EVENT].tolist()
        carry = (id_array[-1].item(), running[-1].item()) if len(id_array) else first_state
        return results, carry
    out: list[Any] = []
    current_id, state = first_state if first_state is not None else (object(), None)
    for row_id, role, value in zip(ids, roles, values, strict=True):
        if row_id != current_id:
            current_id, state = row_id, aggregation.new()
        if role == START:
            state = aggregation.add(state, value)
        elif role == END:
            state = aggregation.remove(state, value)
        else:
            out.append(aggregation.result(state))
    return out, ((current_id, state) if ids else first_state)


def net_open(
    ids: Sequence[Any], roles: Sequence[int], values: Sequence[Any], which: set[Any]
) -> dict[Any, Counter[Any]]:
    """For each id in ``which``: each value's starts minus ends among these rows (one pass)."""
    nets: dict[Any, Counter[Any]] = {w: Counter() for w in which}
    for row_id, role, value in zip(ids, roles, values, strict=True):
        if role != EVENT and row_id in nets:
            nets[row_id][value] += 1 if role == START else -1
    return nets


class PartitionSummary:
    """What the sweep's first pass learns of one partition, fed batch by batch.

    It keeps the partition's first and last id, its row count, and for those
    two ids the values opened minus closed in the partition.
    """

    def __init__(self) -> None:
        self.first: Any = None
        self.last: Any = None
        self.rows = 0
        self.nets: dict[Any, Counter[Any]] = {}

    def feed(self, ids: Sequence[Any], roles: Sequence[int], values: Sequence[Any]) -> None:
        """Take the next batch of sorted rows."""
        if not ids:
            return
        if self.first is None:
            self.first = ids[0]
        wanted = {which for which in (ids[0], ids[-1]) if which in (self.first, ids[-1])}
        for which, net in net_open(ids, roles, values, wanted).items():
            self.nets.setdefault(which, Counter()).update(net)
        self.last = ids[-1]
        self.nets = {k: v for k, v in self.nets.items() if k in (self.first, self.last)}
        self.rows += len(ids)

    def to_dict(self, partition: int) -> dict[str, Any]:
        """A msgpack-able form for the driver."""
        nets = [[k, [[v, c] for v, c in counter.items() if c]] for k, counter in self.nets.items()]
        return {
            "partition": partition,
            "first": self.first,
            "last": self.last,
            "rows": self.rows,
            "nets": nets,
        }


def carry_ins(summaries: Iterable[dict[str, Any]]) -> dict[int, tuple[Any, list[tuple[Any, int]]]]:
    """Each partition's first id and the (value, count) pairs still open at its lower bound.

    Partitions are in key order, so an id continues only from the partitions
    just before it; the intervals open at a partition's start are the sum of
    what its first id opened minus closed in those partitions.
    """
    carry: dict[int, tuple[Any, list[tuple[Any, int]]]] = {}
    open_values: Counter[Any] = Counter()
    open_id: Any = object()
    for summary in sorted(summaries, key=lambda s: s["partition"]):
        if summary["rows"] == 0:
            continue
        first, last = summary["first"], summary["last"]
        if first == open_id and +open_values:
            carry[summary["partition"]] = (first, sorted((+open_values).items()))
        nets = {k: Counter(dict((v, c) for v, c in pairs)) for k, pairs in summary["nets"]}
        if first == last and first == open_id:
            open_values.update(nets.get(first, Counter()))
        else:
            open_id, open_values = last, Counter(nets.get(last, Counter()))
    return carry
