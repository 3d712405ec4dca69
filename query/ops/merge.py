"""``merge``: fold runs of adjacent rows that share a key."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from query.ops.base import Op, OpArgs, Row, Value, as_number, as_text, whole_argument
from query.ops.columns import (
    ARROW_FOLDS,
    Chunk,
    column_at,
    fold_groups,
    join_groups,
    whole_runs,
)
from query.ops.items import distinct_items
from query.syntax.ast import unique_names

__all__ = ["MergeOp"]

_LETTERS = {
    "k": "key",
    "i": "ignore",
    "s": "sum",
    "a": "average",
    "m": "min",
    "M": "max",
    "l": "last",
    "j": "join",
    "p": "product",
    "d": "diff",
    "c": "count distinct",
    "J": "join distinct items, sorted (ours)",
}


@dataclass(frozen=True)
class _Column:
    letter: str
    index: int  # position of the letter in the op's arguments, for errors


_NUMERIC = frozenset("sapdmM")


def _long(number: int | float) -> int | float:
    """Whole numbers wrap at 64 bits, as Hydra's Java longs do (and Arrow's sums)."""
    if isinstance(number, int):
        return ((number + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)
    return number


_FOLDS: dict[str, Callable[[Value, Value], Value]] = {
    "k": lambda old, new: new,
    "l": lambda old, new: new,
    "j": lambda old, new: f"{as_text(old)},{as_text(new)}",
    "s": lambda old, new: _long(old + new),  # type: ignore[operator, arg-type]
    "a": lambda old, new: _long(old + new),  # type: ignore[operator, arg-type]
    "p": lambda old, new: _long(old * new),  # type: ignore[operator, arg-type]
    "d": lambda old, new: _long(old - new),  # type: ignore[operator, arg-type]
    "m": lambda old, new: min(old, new),  # type: ignore[type-var]
    "M": lambda old, new: max(old, new),  # type: ignore[type-var]
}


class _Run:
    """The rows of one key merged so far."""

    def __init__(self, width: int) -> None:
        self.values: list[Value] = [None] * width
        self.distinct: list[set[Value]] = [set() for _ in range(width)]
        self.count = 0


def _average(total: int | float, count: int) -> int | float:
    """Hydra's average: whole numbers divide as Java longs (11/3 -> 3), reals stay real."""
    if isinstance(total, float):
        return total / count
    quotient = abs(total) // count
    return quotient if total >= 0 else -quotient


class MergeOp(Op):
    """merge=LETTERS[N] : merge runs of adjacent rows with equal key columns.

    One letter per column: ``k`` key, ``i`` ignore (dropped from the output),
    ``s`` sum, ``a`` average, ``m`` min, ``M`` max, ``l`` last value, ``j`` join
    with commas, ``p`` product, ``d`` diff (first minus the others), ``c`` count
    of distinct values, ``J`` the distinct comma-separated items of the values,
    sorted as text and joined by commas (ours, not Hydra's); ``u`` anywhere
    appends the number of merged rows; digits emit a merged row every N rows
    even if the key goes on; commas between letters are ignored. Columns past
    the letters are dropped. The key is the tuple of the ``k`` columns. Nulls
    are skipped by every fold; sums, products and differences of whole numbers
    wrap at 64 bits, as Hydra's Java longs do.

    Example: ``merge=kij`` turns ``1 A A=1`` / ``1 A A=3`` / ``2 M M=x`` into
    ``1 A=1,A=3`` / ``2 M=x``.
    """

    name = "merge"
    takes_top: ClassVar[bool] = False
    """Whether ``t`` marks the column whose value ranks the keys (gather/top only)."""
    arguments = (
        *_LETTERS.items(),
        ("u", "append the merged row count"),
        ("0", "digits: emit every N rows"),
    )

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        columns: list[_Column] = []
        self.count_rows = False
        self.top_column: int | None = None
        every, every_index = "", 0
        for index, letter in enumerate(args.text):
            if letter in "0123456789":
                every_index = every_index if every else index
                every += letter
            elif letter == "u":
                self.count_rows = True
            elif letter == "t" and self.takes_top:
                self.top_column = len(columns)
            elif letter in _LETTERS:
                columns.append(_Column(letter, index))
            elif letter != ",":
                raise args.error(
                    index,
                    f"unknown column letter {letter!r}",
                    hint="Use " + ", ".join(f"{k} ({v})" for k, v in _LETTERS.items()) + ", u.",
                )
        if not columns:
            raise args.error(0, "needs one letter per column, e.g. merge=kij")
        self.columns = tuple(columns)
        self.every = whole_argument(args, every, every_index, "the row count") if every else 0
        self.keys = tuple(i for i, c in enumerate(columns) if c.letter == "k")

    def column_names(self, names: tuple[str, ...]) -> tuple[str, ...] | None:
        """The names of the columns kept (every letter but ``i``), then ``count`` for ``u``."""
        kept = [
            names[i] if i < len(names) else f"c{i}"
            for i, column in enumerate(self.columns)
            if column.letter != "i"
        ]
        return unique_names([*kept, "count"] if self.count_rows else kept)

    def number(self, value: Value, column: _Column) -> int | float:
        """``value`` as a number; an error pointing at the column's letter otherwise."""
        number = as_number(value)
        if number is None:
            raise self.args.error(
                column.index, f"column {self.columns.index(column)} holds {value!r}, not a number"
            )
        return number

    def _add(self, run: _Run, row: Row) -> None:
        for i, column in enumerate(self.columns):
            value = row[i] if i < len(row) else None
            letter = column.letter
            if value is None or letter == "i":
                continue
            if letter == "c":
                run.distinct[i].add(value)
                continue
            if letter == "J":
                run.distinct[i].update(item for item in as_text(value).split(",") if item)
                continue
            if letter in _NUMERIC:
                value = self.number(value, column)
            old = run.values[i]
            run.values[i] = value if old is None else _FOLDS[letter](old, value)
        run.count += 1

    def _emit(self, run: _Run) -> Row:
        out: Row = []
        for i, column in enumerate(self.columns):
            if column.letter == "i":
                continue
            value = run.values[i]
            if column.letter == "c":
                value = len(run.distinct[i])
            elif column.letter == "J":
                value = ",".join(sorted(map(str, run.distinct[i]))) or None
            elif column.letter == "a" and value is not None:
                value = _average(value, run.count)  # type: ignore[arg-type]
            out.append(value)
        if self.count_rows:
            out.append(run.count)
        return out

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Merge adjacent rows with equal keys; emit each run when its key ends."""
        run: _Run | None = None
        current: tuple[Value, ...] = ()
        for row in rows:
            key = tuple(row[i] if i < len(row) else None for i in self.keys)
            if run is not None and key != current:
                yield self._emit(run)
                run = None
            if run is None:
                run, current = _Run(len(self.columns)), key
            self._add(run, row)
            if self.every and run.count >= self.every:
                yield self._emit(run)
                run = None
        if run is not None:
            yield self._emit(run)

    def column_types(self, types: list[str]) -> list[str] | None:
        """Chunks when every letter is k, i, j (of text), l, J, c, or s, m, M (of whole
        numbers), with no emit-every count."""
        if self.every:
            return None
        out = []
        for i, column in enumerate(self.columns):
            kind = types[i] if i < len(types) else "null"
            if column.letter not in "kijlJcsmM" or (column.letter in "smM" and kind != "int"):
                return None
            if column.letter in "Jc":
                kind = "str" if column.letter == "J" else "int"
            if column.letter == "j":
                if kind == "int":
                    return None  # one int stays an int, several join as text: no one type
                kind = "str"
            if column.letter != "i":
                out.append(kind)
        return [*out, "int"] if self.count_rows else out

    def run_columns(self, chunks: Iterator[Chunk]) -> Iterator[Chunk]:
        """Merge runs of equal keys chunk by chunk; the last run of a chunk waits for the next."""
        for rows, columns, starts in whole_runs(chunks, self._keys_of):
            yield self._emit_groups(rows, columns, starts)

    def _keys_of(self, columns: list[pa.Array], rows: int) -> list[pa.Array]:
        return [columns[i] for i in self.keys if i < len(columns)]

    def _emit_groups(self, rows: int, columns: list[pa.Array], starts: np.ndarray) -> Chunk:
        out = []
        sizes = np.diff(np.append(starts, rows))
        group = np.repeat(np.arange(len(starts)), sizes)  # each row's run
        for i, column in enumerate(self.columns):
            values = column_at(columns, i, rows)
            if column.letter == "k":
                out.append(values.take(starts))
            elif column.letter == "j":
                out.append(join_groups(values, starts))
            elif column.letter in "JcsmM":
                if column.letter == "J":
                    out.append(distinct_items(values, group, len(starts)))
                else:
                    fold = ARROW_FOLDS[column.letter]
                    out.append(fold_groups(values, group, len(starts), fold))
            elif column.letter == "l":
                valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
                lasts = np.maximum.reduceat(np.where(valid, np.arange(rows), -1), starts)
                out.append(values.take(pa.array(lasts, mask=lasts < 0)))
        if self.count_rows:
            out.append(pa.array(sizes, pa.int64()))
        return len(starts), out
