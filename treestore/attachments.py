"""Data attachments: small per-node summaries kept next to a node's hits.

A node's ``data`` is a dict ``name -> [kind, state]`` (msgpack-encodable). The kinds and
their meaning follow Hydra's ``data`` section of a path element:

``sum``
    ``[sum, num]``: the sum of a field's numeric values and how many were added.
    Read as ``sum`` (default), ``num`` / ``count``, or ``avg`` (sum / num).
``count``
    A HyperLogLog sketch (Apache DataSketches, ``lg_k`` 12, about 1.6% relative
    error) of a field's distinct values. Read as ``count``: the estimate, rounded.
``key.top``
    ``{key: [count, error]}``: the ``size`` most frequent values of a field, kept
    with the space-saving rule (a new key evicting the smallest entry starts at
    that entry's count, which becomes its error). Read per key (``g<key>``), as
    the i-th key (``k<i>`` or ``<i>``, 1-based), its count (``v<i>``) or error (``e<i>``).
``time``
    ``[first, last]``: the smallest and largest whole number seen in a field
    (e.g. epoch milliseconds). Read as ``first``, ``last`` or ``life`` (last - first).

Updates take the values a record carries for the field (a list when it fans
out) and a weight: the number of identical records the update stands for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "KINDS",
    "NotANumber",
    "attachment_value",
    "read_attachment",
    "top_entries",
    "update_attachment",
]

KINDS = ("sum", "count", "key.top", "time")
HLL_LG_K = 12


class NotANumber(ValueError):
    """A value a ``sum`` or ``time`` attachment cannot take."""


def _number(text: Any, whole: bool) -> int | float:
    if isinstance(text, int | float) and not isinstance(text, bool):
        return int(text) if whole else text
    try:
        return int(text)
    except (TypeError, ValueError):
        if whole:
            raise NotANumber(f"{text!r} is not a whole number") from None
    try:
        return float(text)
    except (TypeError, ValueError):
        raise NotANumber(f"{text!r} is not a number") from None


def _sum(state: Any, values: Sequence[Any], weight: int, options: dict[str, Any]) -> Any:
    total, num = state if state is not None else (0, 0)
    if not values and options.get("countMissing", True):
        values = [options.get("value", 0)]
    for value in values:
        total += _number(value, whole=False) * weight
        num += weight
    return [total, num]


def _count(state: Any, values: Sequence[Any], weight: int, options: dict[str, Any]) -> Any:
    import datasketches

    if not values:
        return state
    sketch = (
        datasketches.hll_sketch.deserialize(state)
        if state is not None
        else datasketches.hll_sketch(HLL_LG_K)
    )
    for value in values:
        sketch.update(str(value))
    return sketch.serialize_compact()


def _top(state: Any, values: Sequence[Any], weight: int, options: dict[str, Any]) -> Any:
    top: dict[str, list[int]] = dict(state) if state is not None else {}
    size = int(options["size"])
    for value in values:
        key = str(value)
        found = top.get(key)
        if found is not None:
            top[key] = [found[0] + weight, found[1]]
        elif len(top) < size:
            top[key] = [weight, 0]
        else:
            smallest = min(top, key=lambda k: (top[k][0], k))
            floor = top.pop(smallest)[0]
            top[key] = [floor + weight, floor]
    return top


def _time(state: Any, values: Sequence[Any], weight: int, options: dict[str, Any]) -> Any:
    if not values:
        return state
    stamps = [int(_number(v, whole=True)) for v in values]
    first, last = min(stamps), max(stamps)
    if state is not None:
        first, last = min(first, state[0]), max(last, state[1])
    return [first, last]


_UPDATES = {"sum": _sum, "count": _count, "key.top": _top, "time": _time}


def update_attachment(
    kind: str, state: Any, values: Sequence[Any], weight: int, options: dict[str, Any]
) -> Any:
    """The new state of a ``kind`` attachment after ``weight`` records carrying ``values``.

    Raises :class:`NotANumber` when ``sum`` or ``time`` gets a value that is not one.

    >>> update_attachment("sum", [1, 1], ["2.5"], 2, {})
    [6.0, 3]
    >>> update_attachment("key.top", {"a": [3, 0]}, ["b", "c"], 1, {"size": 2})
    {'a': [3, 0], 'c': [2, 1]}
    """
    return _UPDATES[kind](state, values, weight, options)


def top_entries(state: Any) -> list[tuple[str, int, int]]:
    """A ``key.top`` state as ``(key, count, error)``, largest count first, then by key."""
    if not state:
        return []
    return sorted(((k, v[0], v[1]) for k, v in state.items()), key=lambda e: (-e[1], e[0]))


def attachment_value(kind: str, state: Any, key: str | None = None) -> Any:
    """What ``$name`` (``key`` None) or ``$name=key`` reads from an attachment; None if nothing.

    >>> attachment_value("sum", [7, 2], "avg")
    3.5
    >>> attachment_value("time", [10, 25], "life")
    15
    """
    if state is None:
        return None
    if kind == "sum":
        total, num = state
        if key in ("num", "count"):
            return num
        if key == "avg":
            return total / num if num else 0
        return total
    if kind == "count":
        import datasketches

        return round(datasketches.hll_sketch.deserialize(state).get_estimate())
    if kind == "time":
        first, last = state
        return {"first": first, "last": last, "life": last - first}.get(key or "")
    entries = top_entries(state)
    if key is None or key == "size":
        return len(entries)
    if key.startswith("g"):
        found = state.get(key[1:])
        return found[0] if found else 0
    field, digits = (key[0], key[1:]) if key[0] in "kve" else ("k", key)
    if not digits.isdigit() or not 1 <= int(digits) <= len(entries):
        return None
    entry = entries[int(digits) - 1]
    return {"k": entry[0], "v": entry[1], "e": entry[2]}[field]


def read_attachment(data: Any, name: str, key: str | None = None) -> Any:
    """What ``$name`` / ``$name=key`` reads from a node's ``data``; None if it has no such one.

    >>> read_attachment({"n": ["sum", [6, 4]]}, "n", "avg")
    1.5
    """
    found = data.get(name) if data else None
    if found is None:
        return None
    kind, state = found
    return attachment_value(kind, state, key)
