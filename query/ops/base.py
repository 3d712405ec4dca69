"""What every op is made of: its arguments with their positions, and the Op base class."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from treestore.errors import OpError

__all__ = [
    "Op",
    "OpArgs",
    "Row",
    "Value",
    "as_number",
    "as_text",
    "cell",
    "set_cell",
    "with_table_width",
]

Value = str | int | float | None
Row = list[Value]


@dataclass(frozen=True)
class OpArgs:
    """An op's argument text (escapes removed) and where each character stood.

    Attributes:
        op_name: the op's name as written.
        text: the arguments with backslash escapes resolved.
        columns: for each character of ``text``, its 1-based column in ``source``;
            one more entry gives the column just after the arguments.
        source: the whole op string, for error snippets.
    """

    op_name: str
    text: str
    columns: tuple[int, ...]
    source: str

    def error(self, index: int, reason: str, hint: str | None = None) -> OpError:
        """An :class:`OpError` pointing at character ``index`` of :attr:`text`."""
        column = self.columns[min(index, len(self.columns) - 1)]
        return OpError(f"{self.op_name}: {reason}", self.source, 1, column, hint=hint)

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

    def __init__(self, args: OpArgs) -> None:
        self.args = args
        self.warnings: list[OpError] = []
        """Problems that do not stop the op (each once): an argument Hydra reads leniently,
        a column past a row's width. :meth:`OpsPipeline.warnings` collects them."""

    def warn(self, index: int, reason: str, hint: str | None = None) -> None:
        """Record a warning pointing at argument character ``index`` (once per place)."""
        column = self.args.columns[min(index, len(self.args.columns) - 1)]
        if all(w.column != column for w in self.warnings):
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
        return int(text)
    except ValueError:
        try:
            return float(text)
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
