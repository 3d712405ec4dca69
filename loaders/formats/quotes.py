"""csv quoting: the lines where a quoted value does not end on its line.

A csv value in quotes may hold the delimiter, and pyarrow's parser also lets it hold
newlines; but a record is one line here (its line number is its place in the file),
so a quoted value that runs past the end of its line would swallow the lines after it
into one value, silently. Such lines are set aside instead, each with its own number:
the line whose quote does not close, and, when the quote closes on a later line (a
value spanning lines, as RFC 4180 allows), every line up to that one. A quote that
never closes swallows nothing: only its own line is set aside, and the next line is a
record again.

The quote state follows pyarrow's parser: a quote opens a quoted value only at the
start of a field (after the delimiter, a carriage return or the line's start); inside
one, two quotes are a quote and a lone quote closes it; elsewhere a quote is a
character like any other. So at the end of a line the state depends only on the runs
of quotes (their length and whether one starts a field), which numpy finds for a whole
chunk at once (:func:`open_quote_lines`); only a file with such a line is read again,
line by line from it (:func:`quoted_spans`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

__all__ = ["ends_inside", "open_quote_lines", "quoted_spans"]

_QUOTE, _COMMA, _CR, _LF = 34, 44, 13, 10
_RUNS = re.compile(b'"+')
_NONE = np.zeros(0, dtype=np.int64)


def open_quote_lines(chunk: bytes) -> np.ndarray:
    """The lines of ``chunk`` (0-based) that end inside a quoted value, each line read on
    its own.

    >>> open_quote_lines(b'a,"b\\n"c,d",e\\nf,"g""\\nh"i,"j"\\n').tolist()
    [0, 2]
    """
    if b'"' not in chunk:
        return _NONE
    data = np.frombuffer(chunk, dtype=np.uint8)
    events = np.flatnonzero((data == _QUOTE) | (data == _LF))  # in order, at once
    quote = data[events] == _QUOTE
    if not chunk.endswith(b"\n"):  # the last line ends with the chunk
        events, quote = np.append(events, len(data)), np.append(quote, False)
    # a run of quotes stands as its first quote, with its length
    goes_on = np.zeros(len(events), dtype=bool)
    goes_on[1:] = quote[1:] & quote[:-1] & (np.diff(events) == 1)
    heads = np.flatnonzero(~goes_on)
    odd = (np.diff(np.append(heads, len(events))) & 1).astype(bool)
    at, quote = events[heads], quote[heads]
    before = data[np.maximum(at - 1, 0)]
    starts_field = (at == 0) | (before == _COMMA) | (before == _CR) | (before == _LF)
    # as a change of state: an odd run that starts a field flips it (opens a value, or
    # closes one); an odd run inside a field ends any quoted value (it closes one, or is
    # text); an even run changes nothing; a line's end starts afresh
    flip = quote & starts_field & odd
    reset = ~quote | (quote & ~starts_field & odd)
    flips = np.cumsum(flip)
    order = np.arange(len(at))
    last_reset = np.maximum.accumulate(np.where(reset, order, -1))
    ends = np.flatnonzero(~quote)
    before_end = np.where(ends > 0, last_reset[np.maximum(ends - 1, 0)], -1)
    since = flips[ends] - np.where(before_end >= 0, flips[np.maximum(before_end, 0)], 0)
    return np.flatnonzero(since & 1).astype(np.int64)


def ends_inside(line: bytes, inside: bool = False) -> bool:
    """Whether ``line`` ends inside a quoted value, when it starts inside one or not.

    >>> ends_inside(b'a,"b'), ends_inside(b'b",c'), ends_inside(b'b",c', inside=True)
    (True, False, False)
    """
    for run in _RUNS.finditer(line):
        odd = (run.end() - run.start()) & 1
        if inside:
            inside = not odd
        elif odd and (run.start() == 0 or line[run.start() - 1] in (_COMMA, _CR, _LF)):
            inside = True
    return inside


def _reasons(start: int, end: int, blanks: set[int]) -> dict[int, str]:
    """Why each line of a value spanning lines ``start`` to ``end`` is set aside."""
    found = {
        start: f"a quoted value runs past the end of its line, to line {end} "
        "(a value may not span lines)"
    }
    for number in range(start + 1, end + 1):
        if number not in blanks:
            found[number] = f"inside the quoted value that line {start} starts"
    return found


def quoted_spans(
    chunks: Iterable[tuple[int, bytes]], starts: np.ndarray, blanks: np.ndarray
) -> dict[int, str]:
    """The lines to set aside and why, given a file's ``chunks`` of whole lines (its
    first line's number, bytes), the lines that end inside a quoted value when read on
    their own (``starts``, sorted) and its blank lines (never set aside).

    A quote that closes on a later line sets aside every line up to that one; one that
    never closes only its own line (then no later one closes either: once inside a value
    to the end, reading on from any later start is inside it too).
    """
    pending = [int(n) for n in starts]
    skip = set(blanks.tolist())
    found: dict[int, str] = {}
    start = None  # the line the value being followed starts on
    index = 0
    for first, chunk in chunks:
        if start is None and (index == len(pending) or pending[index] > first + chunk.count(b"\n")):
            continue  # nothing to follow in this chunk
        lines = chunk.split(b"\n")
        if chunk.endswith(b"\n"):
            lines.pop()
        for number, line in enumerate(lines, first):
            if start is None:
                while index < len(pending) and pending[index] < number:
                    index += 1
                if index == len(pending) or pending[index] != number:
                    continue
                start, index = number, index + 1
            elif b'"' in line and not ends_inside(line, inside=True):
                found.update(_reasons(start, number, skip))
                start = None
    if start is not None:
        never = "a quoted value does not end on its line (its quote never closes)"
        found.update(dict.fromkeys([start, *pending[index:]], never))
    return found
