"""A brute-force oracle for the interval sweep, shared by the sweep tests."""

from __future__ import annotations

from typing import Any


def covers(start: int, end: int, time: int, closed: str) -> bool:
    """Whether [start, end] (with the ends ``closed`` says) contains ``time``."""
    low = start <= time if closed in ("both", "left") else start < time
    high = time <= end if closed in ("both", "right") else time < end
    return low and high


def expected(
    events: list[tuple[Any, int]], intervals: list[tuple[Any, int, int, Any]], agg: str, closed: str
) -> list[Any]:
    """For each event, the aggregate of the covering intervals' values, by brute force."""
    out = []
    for event_id, time in events:
        values = sorted(
            v for i, s, e, v in intervals if i == event_id and s <= e and covers(s, e, time, closed)
        )
        if agg == "sum":
            out.append(sum(values))
        elif agg == "count":
            out.append(len(values))
        elif agg == "set":
            out.append(sorted(set(values)))
        elif agg == "list":
            out.append(values)
        elif agg == "min":
            out.append(values[0] if values else None)
        else:
            out.append(values[-1] if values else None)
    return out
