"""What every op is made of: its arguments with their positions, and the Op base class.

Lives here: :class:`OpArgs`, :class:`Op`, the cell helpers every family of ops shares
(``cell``, ``as_text``, ``as_number``, ``with_table_width``...) and the reading of whole
numbers and column numbers in an op's arguments. A room of its own below the op
catalogue (``query.ops``, which registers every op) and the analysis ops
(``query.ops.analysis``), so both build on it and neither imports the other back.

May import: ``query.syntax``, ``treestore``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from query.syntax.lark_support import LARGEST_WHOLE, bounded_whole, line_column
from treestore.errors import OpError

__all__ = [
    "LARGEST_WHOLE",
    "MOST_COLUMNS",
    "Op",
    "OpArgs",
    "Row",
    "Value",
    "as_number",
    "as_text",
    "cell",
    "column_number",
    "set_cell",
    "to_long",
    "whole_argument",
    "with_table_width",
]

Value = str | int | float | None
Row = list[Value]

MOST_COLUMNS = 1_000_000
"""The most columns a row may have: a column number is below it (ops such as ``pad``
or ``sum=s...`` make a row that wide)."""


MOST_WARNINGS = 10
"""How many warnings one op records at most."""


@dataclass(frozen=True)
class OpArgs:
    """An op's argument text (escapes removed) and where each character stood.

    Attributes:
        op_name: the op's name as written.
        text: the arguments with backslash escapes resolved.
        offsets: for each character of ``text``, its 0-based offset in ``source``;
            one more entry gives the offset just after the arguments.
        source: the whole op string, for error snippets.
    """

    op_name: str
    text: str
    offsets: tuple[int, ...]
    source: str

    def position(self, index: int) -> tuple[int, int]:
        """The line and column in :attr:`source` of character ``index`` of :attr:`text`."""
        return line_column(self.source, self.offsets[max(0, min(index, len(self.offsets) - 1))])

    def error(self, index: int, reason: str, hint: str | None = None) -> OpError:
        """An :class:`OpError` pointing at character ``index`` of :attr:`text`."""
        line, column = self.position(index)
        return OpError(f"{self.op_name}: {reason}", self.source, line, column, hint=hint)

    def split(self, separator: str = ",") -> list[tuple[str, int]]:
        """The arguments split at ``separator``, each piece with its start index."""
        pieces, start = [], 0
        for part in self.text.split(separator):
            pieces.append((part, start))
            start += len(part) + len(separator)
        return pieces


class Op:
    """Base of every op. A subclass's docstring is its help text.

    Ops are built once from their arguments (raising :class:`OpError` at the
    offending column) and may run many times: each :meth:`run` keeps its own state.
    """

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    table: ClassVar[bool] = False
    """True for table ops, which read all their input before the first output row."""
    arguments: ClassVar[tuple[tuple[str, str], ...]] = ()
    """The letters or words its arguments are made of, with what each means (for completion)."""
    separator: ClassVar[str] = ""
    """What separates argument words ('' when each character is one letter)."""
    keeps_columns: ClassVar[bool] = False
    """True when the op keeps each column where it was (it may drop rows, change values or
    append columns), so the columns keep their names."""
    takes_coded: ClassVar[bool] = False
    """True when :meth:`run_columns` takes coded columns (dictionary-encoded text, lists
    of items: see :func:`query.ops.columns.plain`); other ops are given plain ones."""
    gives_plain: ClassVar[bool] = False
    """True when :meth:`run_columns` takes ``plain_output=True``: its output's columns
    then come plain (text, not codes), made more cheaply than coded ones that are then
    made plain (the last op of a result, whose reader makes them plain anyway)."""
    codes_path_levels: ClassVar[bool] = False
    """True when the op, first on a shard's path, reads the path's upper levels better
    coded (its keys and sides read by codes, never output): the walk then codes them."""

    def __init__(self, args: OpArgs) -> None:
        self.args = args
        self.warnings: list[OpError] = []
        """Problems that do not stop the op (each once): an argument Hydra reads leniently,
        a column past a row's width. :meth:`OpsPipeline.warnings` collects them."""

    def warn(self, index: int, reason: str, hint: str | None = None) -> None:
        """Record a warning pointing at argument character ``index`` (once per place, and
        at most :data:`MOST_WARNINGS` per op: an argument of 4,000 unknown letters gives
        ten warnings, not 4,000 errors each quoting the whole op string)."""
        if len(self.warnings) >= MOST_WARNINGS:
            return
        place = self.args.position(index)
        if all((w.line, w.column) != place for w in self.warnings):
            self.warnings.append(self.args.error(index, reason, hint))

    def bind(self, compile_ops: Callable[[str], Any]) -> None:
        """Receive the op-string compiler, for ops that hold ops of their own (``groupby``)."""

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Transform a stream of rows."""
        raise NotImplementedError

    def column_names(self, names: tuple[str, ...]) -> tuple[str, ...] | None:
        """The names of the columns this op makes from columns named ``names`` (columns
        it appends past them are named ``cN``), or ``None`` when they cannot be told."""
        return names if self.keeps_columns else None

    def column_types(self, types: list[str]) -> list[str] | None:
        """The column types this op makes from chunks of columns typed ``types`` (see
        :mod:`query.ops.columns`), or ``None`` when it runs on rows only."""
        return None

    def run_columns(self, chunks: Iterator[Any]) -> Iterator[Any]:
        """Transform a stream of column chunks, as :meth:`run` does rows (when
        :meth:`column_types` is not ``None``)."""
        raise NotImplementedError


def whole_argument(
    args: OpArgs,
    text: str,
    index: int,
    what: str,
    largest: int = LARGEST_WHOLE,
    smallest: int = 0,
) -> int:
    """``text`` (at ``index`` of the arguments) as a whole number from ``smallest`` to
    ``largest``: ASCII digits (a leading ``-`` when ``smallest`` is negative), blanks
    around allowed; an :class:`OpError` there otherwise."""
    word = text.strip()
    digits = word[1:] if word[:1] == "-" and smallest < 0 else word
    if not (digits.isascii() and digits.isdigit()):
        raise args.error(index, f"expected {what} (a whole number), not {text!r}")
    number = bounded_whole(digits, max(largest, -smallest))
    if number is not None and word[:1] == "-":
        number = -number
    if number is None or not smallest <= number <= largest:
        raise args.error(index, f"{what} must lie between {smallest} and {largest}")
    return number


def column_number(args: OpArgs, text: str, index: int) -> int:
    """``text`` (starting at ``index`` of the arguments) as a column number (below
    :data:`MOST_COLUMNS`), or an error there."""
    return whole_argument(args, text, index, "a column number", MOST_COLUMNS - 1)


def to_long(number: int | float) -> int:
    """A number as Java casts it to a ``long``: reals truncated, NaN 0, anything past the
    range (infinities too) clamped to it, as Hydra's ops read whole numbers."""
    if isinstance(number, float):
        if math.isnan(number):
            return 0
        if math.isinf(number):
            return LARGEST_WHOLE if number > 0 else -LARGEST_WHOLE - 1
    return max(-LARGEST_WHOLE - 1, min(LARGEST_WHOLE, int(number)))


def as_text(value: Value) -> str:
    """A value as the ops see it in string context (null is the empty string)."""
    if value is None:
        return ""
    return str(value)


def as_number(value: Value) -> int | float | None:
    """A value as a number, or ``None`` if it is null or not a number."""
    if value is None or isinstance(value, int | float):
        return value
    text = value.strip()
    try:
        whole: int | None = int(text)
    except ValueError:  # not whole, or past 4300 digits (which int() refuses)
        whole = None
    if whole is not None and -LARGEST_WHOLE - 1 <= whole <= LARGEST_WHOLE:
        return whole
    try:
        return float(text)  # past a long a whole number is a real, as Hydra reads it
    except ValueError:
        return None


def cell(row: Row, column: int) -> Value:
    """``row[column]``, or null past the row's end."""
    return row[column] if 0 <= column < len(row) else None


def set_cell(row: Row, column: int, value: Value) -> Row:
    """Set ``row[column]``, appending when the column is past the row's end (as Hydra does)."""
    if 0 <= column < len(row):
        row[column] = value
    else:
        row.append(value)
    return row


def with_table_width(rows: Iterable[Row]) -> tuple[list[Row], int]:
    """All the rows, and the table's width: its widest row.

    Hydra's rows share one growing format, so a short row still has the table's
    columns (as nulls): ``fill`` fills them and the running ops append after them.
    Ops that need that width read their whole input first.
    """
    table = [list(row) for row in rows]
    return table, max((len(row) for row in table), default=0)
