"""Row ops: each row is handled as it arrives (limit and skip may stop reading early)."""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Iterable, Iterator

import json5

from query.ops.base import (
    LARGEST_WHOLE,
    MOST_COLUMNS,
    Op,
    OpArgs,
    Row,
    Value,
    as_number,
    as_text,
    cell,
    column_number,
    set_cell,
    whole_argument,
    with_table_width,
)
from query.syntax.ast import regex_problem, unique_names
from query.syntax.lark_support import first_surrogate

__all__ = [
    "CompareOp",
    "ContainsOp",
    "FillOp",
    "LimitOp",
    "MapOp",
    "NoDupOp",
    "OrderMapOp",
    "OrderOp",
    "PadOp",
    "SkipOp",
    "TitleOp",
]


class LimitOp(Op):
    """limit=[k...]N or limit=[k...]M:N : skip M rows, then pass N rows.

    Without key letters it stops reading once N rows passed (in a shard's
    task, the tree walk stops too). With leading ``k`` letters, one per key
    column, the counts restart whenever the key of adjacent rows changes.

    Example: ``limit=1:2`` on r0 r1 r2 r3 passes r1 r2; ``limit=k1`` on
    ``a 1`` / ``a 2`` / ``b 1`` passes ``a 1`` / ``b 1``.
    """

    name = "limit"
    keeps_columns = True
    arguments = (("k", "a key column: counts restart when it changes"), ("0", "digits: N or M:N"))

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        text = args.text
        keys = len(text) - len(text.lstrip("k"))
        numbers = text[keys:].split(":")
        if len(numbers) > 2 or not all(n.isascii() and n.isdigit() for n in numbers):
            raise args.error(keys, "expected N or M:N (skip M, then pass N)")
        self.keys = keys
        counts = [
            whole_argument(args, number, keys + len(numbers[0]) + 1 if i else keys, "a row count")
            for i, number in enumerate(numbers)
        ]
        self.skip, self.count = (0, counts[0]) if len(counts) == 1 else (counts[0], counts[1])
        if self.count <= 0:
            raise args.error(len(text) - 1, "the number of rows to pass must be at least 1")

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Pass the rows in the window, per key when there are key letters."""
        seen = passed = 0
        current: tuple[Value, ...] | None = None
        for row in rows:
            if self.keys:
                key = tuple(cell(row, i) for i in range(self.keys))
                if key != current:
                    current, seen, passed = key, 0, 0
            seen += 1
            if seen <= self.skip or passed >= self.count:
                continue
            passed += 1
            yield row
            if not self.keys and passed >= self.count:
                return


class SkipOp(Op):
    """skip=N[,A[,B]] : drop the first N rows; then pass A, drop B (B defaults to A), and so on.

    Example: ``skip=1,2`` on r1..r7 passes r2 r3 r6 r7.
    """

    name = "skip"
    keeps_columns = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        parts = args.split(",")
        if not 1 <= len(parts) <= 3:
            raise args.error(0, "expected N, N,A or N,A,B")
        numbers = [whole_argument(args, text, index, "a row count") for text, index in parts]
        self.first = numbers[0]
        self.take = numbers[1] if len(numbers) > 1 else 0
        self.drop = numbers[2] if len(numbers) > 2 else self.take

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Drop, then alternate."""
        for index, row in enumerate(rows):
            if index < self.first:
                continue
            if not self.take or (index - self.first) % (self.take + self.drop) < self.take:
                yield row


class OrderOp(Op):
    """order=C1,C2,... : a row of just these columns, in this order (repeats allowed).

    Example: ``order=1,2,0`` turns ``A 1 art`` into ``1 art A``.
    """

    name = "order"

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        self.columns = [column_number(args, text, index) for text, index in args.split(",")]

    def column_names(self, names: tuple[str, ...]) -> tuple[str, ...] | None:
        """The chosen columns' names, in their new order."""
        return unique_names([names[c] if c < len(names) else f"c{c}" for c in self.columns])

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Reorder each row."""
        for row in rows:
            yield [cell(row, c) for c in self.columns]


def _fill_value(args: OpArgs, spec: str) -> Value:
    """Hydra's fill spec: iN/lN a whole number, fX/dX a real number, sTEXT text, else a number."""
    try:
        if not spec:
            return 0
        if spec[0] in "fd":
            return float(spec[1:])
        if spec[0] == "s":
            return spec[1:]
        whole = int(spec[1:] if spec[0] in "il" else spec)
        if abs(whole) <= LARGEST_WHOLE:
            return whole
    except ValueError:
        pass
    raise args.error(
        0,
        f"cannot read the fill value {spec[:30]!r}",
        hint=f"Use iN (N at most {LARGEST_WHOLE} either way), fX or sTEXT.",
    )


class FillOp(Op):
    """fill=[SPEC] : every null cell becomes the fill value (iN, fX, sTEXT; default 0).

    Short rows are first padded to the table's width (its widest row), as Hydra's
    shared row format does, so fill reads its whole input first.
    Example: ``fill=sNA`` turns ``a null 2`` into ``a NA 2``; ``fill=0`` turns
    ``cat a 1 2`` / ``dog a`` into ``cat a 1 2`` / ``dog a 0 0``.
    """

    name = "fill"
    keeps_columns = True
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        self.value = _fill_value(args, args.text)

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Fill each row's nulls, padding it to the table's width."""
        table, width = with_table_width(rows)
        for row in table:
            row += [None] * (width - len(row))
            yield [self.value if v is None else v for v in row]


class PadOp(Op):
    """pad=SPEC:N : make the row at least N columns wide, short and null cells filled with SPEC.

    Example: ``pad=0:4`` turns ``a 1`` into ``a 1 0 0``.
    """

    name = "pad"
    keeps_columns = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        spec, colon, width = args.text.rpartition(":")
        if not colon or not width.isdigit():
            raise args.error(len(args.text), "expected SPEC:N, e.g. pad=0:4")
        self.value = _fill_value(args, spec)
        self.width = whole_argument(
            args, width, len(spec) + 1, "the width", MOST_COLUMNS, smallest=0
        )

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Pad each row."""
        for row in rows:
            out = list(row) + [None] * max(0, self.width - len(row))
            yield [self.value if (v is None and i < self.width) else v for i, v in enumerate(out)]


class TitleOp(Op):
    """title[=T1,T2,...] : put a row of these titles before the first row (none if no rows).

    A bare ``title`` titles the columns with their numbers (0, 1, ...), as many as
    the first row has.
    Example: ``title=uid,hits`` before ``12345 3`` gives ``uid hits`` / ``12345 3``;
    ``title`` before ``a 1`` gives ``0 1`` / ``a 1``.
    """

    name = "title"
    keeps_columns = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        self.titles: Row | None = [t for t, _ in args.split(",")] if args.text else None

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """The title row, then the rows."""
        first = True
        for row in rows:
            if first:
                yield (
                    list(self.titles)
                    if self.titles is not None
                    else [str(i) for i in range(len(row))]
                )
                first = False
            yield row


class ContainsOp(Op):
    """contains=C:S1,S2,... : keep rows whose column C contains any of the texts.

    Rows shorter than C+1 columns pass; a null cell contains nothing.
    Example: ``contains=0:Alpha`` keeps ``Alpha 4`` and ``3Alpha2 5``.
    """

    name = "contains"
    keeps_columns = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        column, colon, needles = args.text.partition(":")
        if not colon:
            raise args.error(len(column), "expected C:TEXT[,TEXT...]")
        self.column = column_number(args, column, 0)
        self.needles = [n for n in needles.split(",") if n]

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Filter."""
        for row in rows:
            if self.column >= len(row):
                yield row
                continue
            text = row[self.column]
            if text is not None and any(n in as_text(text) for n in self.needles):
                yield row


def _as_long(value: Value) -> int:
    """A cell as Hydra's compare reads it: a whole number (reals truncated); else 0."""
    if isinstance(value, int | float):
        return 0 if isinstance(value, float) and not math.isfinite(value) else int(value)
    try:
        return int(as_text(value).strip())
    except ValueError:
        return 0


class CompareOp(Op):
    """compare=C:OP:N : keep rows whose column C compares so with the number N.

    As in Hydra, OP is read by its letters, never rejected: a name ending in
    ``eq`` keeps rows equal to N; otherwise one starting with ``g`` keeps rows
    greater than N and one starting with ``l`` rows less than N; anything else
    drops the row. So ``eq``, ``gt``, ``gteq`` (or ``geq``), ``lt``, ``lteq`` (or
    ``leq``) work as named. The cell is read as a whole number (a real is
    truncated; a null, a non-number or a text like ``5.5`` counts as 0); rows
    shorter than C+1 columns pass.
    Example: ``compare=1:gteq:90`` keeps ``Alpha 100`` and ``Gamma 90``.
    """

    name = "compare"
    keeps_columns = True
    arguments = tuple(
        (name, "comparison") for name in ("eq", "gt", "gteq", "geq", "lt", "lteq", "leq")
    )

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        parts = args.text.split(":")
        if len(parts) != 3:
            raise args.error(0, "expected C:OP:N", hint="For example compare=1:gteq:90.")
        self.column = column_number(args, parts[0], 0)
        operator = parts[1]
        self.keep_equal = operator.endswith("eq")
        self.keep_greater = operator.startswith("g")
        self.keep_less = operator.startswith("l")
        number = as_number(parts[2])
        if number is None:
            raise args.error(len(parts[0]) + len(parts[1]) + 2, f"{parts[2]!r} is not a number")
        self.number = number

    def _keeps(self, value: Value) -> bool:
        number = _as_long(value)
        if number == self.number:
            return self.keep_equal
        return self.keep_greater if number > self.number else self.keep_less

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Filter."""
        for row in rows:
            if self.column >= len(row) or self._keeps(row[self.column]):
                yield row


def _json_object(args: OpArgs) -> tuple[int, dict[str, Value]]:
    """``C::{...}`` read as the column number and the (lenient, JSON5) object."""
    column, separator, mapping = args.text.partition("::")
    if not separator:
        raise args.error(len(column), 'expected C::{"from":"to"}')
    number = column_number(args, column, 0)
    try:
        table = json5.loads(mapping)
    except ValueError as exc:
        raise args.error(
            len(column) + 2,
            f"the map is not valid JSON ({exc})",
            hint="Write an object such as {a:'x',b:'y'}.",
        ) from None
    except RecursionError:
        raise args.error(len(column) + 2, "the map is nested too deeply") from None
    if not isinstance(table, dict):
        raise args.error(len(column) + 2, "the map must be a JSON object")
    for key, value in table.items():
        if isinstance(value, list | dict):
            raise args.error(len(column) + 2, f"the value of {key!r} must be a text or a number")
        if any(first_surrogate(text) is not None for text in (key, as_text(value))):
            raise args.error(len(column) + 2, "the map holds a lone surrogate (\\udXXX)")
    return number, table


class MapOp(Op):
    """map=C::{"from":"to",...} : replace column C's value when the JSON object has it as a key.

    The object may be written as Hydra accepts it: unquoted keys and single
    quotes (JSON5). Example: ``map=0::{"a":"x"}`` or ``map=0::{a:'x'}`` turns
    ``a 1`` into ``x 1``.
    """

    name = "map"
    keeps_columns = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        self.column, self.mapping = _json_object(args)

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Map each row's cell."""
        for row in rows:
            value = cell(row, self.column)
            if value is not None and as_text(value) in self.mapping:
                row = set_cell(list(row), self.column, self.mapping[as_text(value)])
            yield row


class RegexMapOp(Op):
    """rmap=C::{"regex":"to",...} : replace column C's value when a regular expression matches it.

    Each key is a regular expression that must match the whole cell; every key
    is tried in the object's order and each match sets the cell, so the last
    matching key wins (Hydra tries them in its hash map's order). The object may
    be lenient JSON, as for ``map``.
    Example: ``rmap=0::{"widget..\\.png":"widgetXX.png"}`` turns ``widget01.png 3``
    into ``widgetXX.png 3``.
    """

    name = "rmap"
    keeps_columns = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        self.column, mapping = _json_object(args)
        self.patterns: list[tuple[re.Pattern[str], Value]] = []
        for key, value in mapping.items():
            problem = regex_problem(key)
            if problem is not None:
                raise args.error(
                    args.text.index("::") + 2, f"bad regular expression {key!r} ({problem})"
                )
            self.patterns.append((re.compile(key), value))

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Map each row's cell."""
        for row in rows:
            value = cell(row, self.column)
            if value is None:
                yield row
                continue
            out = list(row)
            for pattern, replacement in self.patterns:
                if pattern.fullmatch(as_text(out[self.column])):
                    out[self.column] = replacement
            yield out


LONGEST_SLEEP = 3_600_000
"""The longest wait ``sleep`` takes, in milliseconds (an hour)."""


class SleepOp(Op):
    """sleep=MS[,SPREAD] : wait MS milliseconds before passing each row on (for testing).

    With SPREAD the wait varies by up to SPREAD/2 either way, at random.
    Example: ``sleep=10`` passes ``a 1`` on after 10 ms.
    """

    name = "sleep"
    keeps_columns = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        pause, comma, spread = args.text.partition(",")
        self.pause = whole_argument(args, pause, 0, "the milliseconds to wait", LONGEST_SLEEP)
        self.spread = (
            whole_argument(args, spread, len(pause) + 1, "the spread", LONGEST_SLEEP)
            if comma
            else 0
        )

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Each row, after the wait."""
        for row in rows:
            wait = self.pause + (random.random() - 0.5) * self.spread
            time.sleep(max(0.0, wait) / 1000)
            yield row


class OrderMapOp(Op):
    """ordermap=T,TEXT,FROM,TO[:T,TEXT,FROM,TO...] : where column T is TEXT, copy FROM into TO.

    Example: ``ordermap=0,C,2,1`` turns ``C 3 cog`` into ``C cog cog``.
    """

    name = "ordermap"
    keeps_columns = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        self.rules: list[tuple[int, str, int, int]] = []
        start = 0
        for rule in args.text.split(":"):
            parts = rule.split(",")
            if len(parts) != 4:
                raise args.error(start, "expected T,TEXT,FROM,TO")
            test = column_number(args, parts[0], start)
            source = column_number(args, parts[2], start)
            target = column_number(args, parts[3], start)
            self.rules.append((test, parts[1], source, target))
            start += len(rule) + 1

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Apply the rules to each row."""
        for row in rows:
            out = list(row)
            for test, text, source, target in self.rules:
                if as_text(cell(row, test)) == text:
                    set_cell(out, target, cell(row, source))
            yield out


class NoDupOp(Op):
    """nodup : a cell equal to the cell above it (in the input) becomes null.

    Example: ``a 1`` / ``a 2`` / ``b 2`` gives ``a 1`` / ``null 2`` / ``b null``.
    """

    name = "nodup"
    keeps_columns = True

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Blank repeats."""
        previous: Row = []
        for row in rows:
            yield [
                None if i < len(previous) and previous[i] == v and v is not None else v
                for i, v in enumerate(row)
            ]
            previous = row
