"""Ops that reshape the table: ``pivot``, ``depivot``, ``fold`` and ``groupby``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from query.ops.base import Op, OpArgs, Row, Value, as_number, as_text, cell
from query.ops.row_ops import column_number

__all__ = ["DepivotOp", "FoldOp", "GroupByOp", "PivotOp"]

_CELL_OPS: dict[str, Callable[[list[int | float]], int | float]] = {
    "sum": sum,
    "min": min,
    "max": max,
    "avg": lambda values: sum(values) / len(values),
}


def _columns(args: OpArgs, text: str, start: int) -> list[int]:
    return [column_number(args, part, start) for part in text.split(":")]


def _label(row: Row, columns: list[int]) -> Value:
    """One column's value, or the values of several joined with ':' (a header needs one cell)."""
    values = [cell(row, c) for c in columns]
    if len(values) == 1:
        return values[0]
    return ":".join(as_text(v) for v in values)


class PivotOp(Op):
    """pivot=ROWS,COLS,CELL[,CELLOP[,ROWOP[,COLOP]]][,SORT] : a cross table.

    ROWS and COLS are column numbers (several joined with ``:``): each distinct
    ROWS value becomes a row, each COLS value a column, and the CELL column's
    numbers meeting there are combined with CELLOP (``sum`` by default; ``min``,
    ``max``, ``avg``). ROWOP adds a last column ``total`` combining each row,
    COLOP a last row combining each column (empty cells count as 0 then). The
    first row is the header: null, then the column labels in first-seen order.
    Rows come sorted by label; SORT ``a``/``d`` sorts them by their total
    instead, ``la``/``ld`` by label. Example: ``x a 1`` / ``y b 2`` / ``z c 3``
    with ``pivot=1,0,2,sum,sum`` gives ``null x y z total`` / ``a 1 0 0 1`` /
    ``b 0 2 0 2`` / ``c 0 0 3 3``.
    """

    name = "pivot"
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        parts = args.split(",")
        if len(parts) < 3:
            raise args.error(len(args.text), "expected ROWS,COLS,CELL")
        self.rows = _columns(args, parts[0][0], parts[0][1])
        self.cols = _columns(args, parts[1][0], parts[1][1])
        self.cell = column_number(args, parts[2][0], parts[2][1])
        ops: list[str | None] = []
        self.sort = "la"
        for text, index in parts[3:]:
            if text in ("a", "d", "la", "ld", "sa", "sd"):
                self.sort = text.replace("s", "")
            elif text in _CELL_OPS or text in ("", "-"):
                ops.append(text if text in _CELL_OPS else None)
            else:
                raise args.error(
                    index,
                    f"unknown pivot word {text!r}",
                    hint="Use sum, min, max, avg, a, d, la, ld.",
                )
        ops += [None] * (3 - len(ops))
        self.cell_op = ops[0] or "sum"
        self.row_op, self.col_op = ops[1], ops[2]

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """The header, the rows, and the totals row when asked."""
        cells: dict[tuple[Value, Value], list[int | float]] = {}
        row_labels: dict[Value, None] = {}
        col_labels: dict[Value, None] = {}
        for row in rows:
            row_key, col_key = _label(row, self.rows), _label(row, self.cols)
            value = as_number(cell(row, self.cell))
            row_labels.setdefault(row_key)
            col_labels.setdefault(col_key)
            if value is not None:
                cells.setdefault((row_key, col_key), []).append(value)
        if not row_labels:
            return
        totals = self.row_op is not None or self.col_op is not None
        columns = list(col_labels)
        table: list[tuple[Value, list[Value]]] = []
        for label in row_labels:
            line: list[Value] = []
            for column in columns:
                values = cells.get((label, column))
                line.append(_CELL_OPS[self.cell_op](values) if values else (0 if totals else None))
            if self.row_op is not None:
                line.append(_CELL_OPS[self.row_op]([v for v in line if isinstance(v, int | float)]))
            table.append((label, line))
        table.sort(key=self._order)
        yield [None, *columns, *(["total"] if self.row_op is not None else [])]
        for label, line in table:
            yield [label, *line]
        if self.col_op is not None:
            width = len(table[0][1])
            combine = _CELL_OPS[self.col_op]
            yield ["total", *(combine([line[i] for _, line in table]) for i in range(width))]  # type: ignore[misc]

    def _order(self, item: tuple[Value, list[Value]]) -> tuple[object, ...]:
        label, line = item
        if self.sort in ("a", "d"):
            total = sum(v for v in line if isinstance(v, int | float))
            return (-total if self.sort == "d" else total, as_text(label))
        text = as_text(label)
        return (tuple(-ord(c) for c in text),) if self.sort == "ld" else (text,)


class DepivotOp(Op):
    """depivot[=ORDER] : undo a pivot: one row (row label, column label, value) per cell.

    The first row is the header (its first cell null, then the column labels);
    a ``total`` column or row is left out. ORDER places the parts, as words
    ``row``, ``col``, ``val`` (default ``row,col,val``). Example: header
    ``null a b`` and row ``aaa 1 3`` give ``aaa a 1`` / ``aaa b 3``.
    """

    name = "depivot"
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        self.order = [w for w, _ in args.split(",")] if args.text else ["row", "col", "val"]
        for word, index in args.split(",") if args.text else []:
            if word not in ("row", "col", "val"):
                raise args.error(index, f"unknown part {word!r}; use row, col and val")

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """The cells, one row each."""
        header: Row | None = None
        for row in rows:
            if header is None:
                header = row
                continue
            if row and row[0] == "total":
                continue
            for index in range(1, len(header)):
                if header[index] == "total":
                    continue
                parts = {
                    "row": row[0],
                    "col": header[index],
                    "val": cell(row, index),
                }
                yield [parts[word] for word in self.order]


class FoldOp(Op):
    """fold=KEYS:COL:V1,V2,...:COPY : fold adjacent rows of a key into one wide row.

    For each value Vi, the row whose column COL equals Vi adds ``Vi`` and its
    COPY columns (several joined with ``,``); a missing one leaves nulls.
    KEYS are column numbers joined with ``,``. Example: ``dog red 3`` /
    ``dog green 4`` with ``fold=0:1:red,green:2`` gives ``dog red 3 green 4``.
    """

    name = "fold"

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        parts = args.text.split(":")
        if len(parts) != 4:
            raise args.error(len(args.text), "expected KEYS:COL:V1,V2,...:COPY")
        self.keys = [column_number(args, k, 0) for k in parts[0].split(",")]
        self.column = column_number(args, parts[1], len(parts[0]) + 1)
        self.values = parts[2].split(",")
        start = len(parts[0]) + len(parts[1]) + len(parts[2]) + 3
        self.copy = [column_number(args, c, start) for c in parts[3].split(",")]

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """One row per run of a key."""
        current: tuple[Value, ...] | None = None
        slots: dict[str, Row] = {}
        for row in rows:
            key = tuple(cell(row, k) for k in self.keys)
            if current is not None and key != current:
                yield self._row(current, slots)
                slots = {}
            current = key
            slots[as_text(cell(row, self.column))] = row
        if current is not None:
            yield self._row(current, slots)

    def _row(self, key: tuple[Value, ...], slots: dict[str, Row]) -> Row:
        out: Row = list(key)
        for value in self.values:
            found = slots.get(value)
            out.append(value if found is not None else None)
            out += [found[c] if found is not None and c < len(found) else None for c in self.copy]
        return out


class GroupByOp(Op):
    """groupby=LETTERS:OPS : run OPS separately on the rows of each key.

    LETTERS mark the key columns with ``k`` (other letters skip a column);
    OPS is an op string whose ``;`` are escaped (``\\;``). Each key's rows go
    through their own copy of OPS as they arrive; the results come out key by
    key, in the order keys first appeared. Example: ``groupby=k:limit=2`` keeps
    the first 2 rows of each value of column 0.
    """

    name = "groupby"
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        letters, colon, ops = args.text.partition(":")
        if not colon or "k" not in letters:
            raise args.error(
                0 if colon else len(letters), "expected LETTERS:OPS with at least one k"
            )
        self.keys = [i for i, letter in enumerate(letters) if letter == "k"]
        self.ops_text = ops
        self.compile: Callable[[str], Any] | None = None

    def bind(self, compile_ops: Callable[[str], Any]) -> None:
        """Take the op compiler (the pipeline hands it over) and check OPS now."""
        self.compile = compile_ops
        compile_ops(self.ops_text)

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Each key's rows through its own ops."""
        assert self.compile is not None, "groupby runs inside an ops pipeline"
        groups: dict[tuple[Value, ...], list[Row]] = {}
        for row in rows:
            key = tuple(cell(row, k) for k in self.keys)
            groups.setdefault(key, []).append(row)
        for group in groups.values():
            for out in self.compile(self.ops_text).run(group):
                yield list(out)
