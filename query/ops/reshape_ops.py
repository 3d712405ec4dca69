"""Ops that reshape the table: ``pivot``, ``depivot``, ``fold`` and ``groupby``."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from query.ops.base import Op, OpArgs, Row, Value, as_number, as_text, cell, column_number
from query.syntax.lark_support import offset_of
from treestore.errors import OpError

__all__ = ["DepivotOp", "FoldOp", "GroupByOp", "PivotOp"]


def _average(values: list[int | float]) -> int | float:
    """Hydra's average: whole numbers divide as Java longs (toward 0), reals stay real."""
    total = sum(values)
    if isinstance(total, float):
        return total / len(values)
    quotient = abs(total) // len(values)
    return quotient if total >= 0 else -quotient


_CELL_OPS: dict[str, Callable[[list[int | float]], int | float]] = {
    "sum": sum,
    "min": min,
    "max": max,
    "avg": _average,
}


def _combine_cell(op: str | None, values: list[int | float]) -> int | float:
    """A cell's values as Hydra's pivot combines them: no CELLOP keeps the first value, and
    ``avg`` gives the sum (Hydra wraps the sum for averaging but never divides a cell)."""
    if op is None:
        return values[0]
    return sum(values) if op == "avg" else _CELL_OPS[op](values)


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
    ``max``; as in Hydra, ``avg`` gives the sum and an empty CELLOP (``-``) keeps
    the first value). ROWOP adds a last column combining each row's cells,
    COLOP a last row combining each column's (``sum``, ``min``, ``max``, ``avg``;
    whole-number averages divide as Java longs). With either, empty cells show
    0 but are not combined. The first row is the header: null, then the column
    labels in first-seen order; as in Hydra, the ROWOP column and the COLOP row
    have no label (null), nor does the COLOP row fill the ROWOP column.
    Rows come sorted by label; SORT ``a``/``d`` sorts them by their total
    instead, ``la``/``ld`` by label. Example: ``x a 1`` / ``y b 2`` / ``z c 3``
    with ``pivot=1,0,2,sum,sum`` gives ``null x y z null`` / ``a 1 0 0 1`` /
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
        named = len(ops)
        ops += [None] * (3 - len(ops))
        self.cell_op = ops[0] if named else "sum"
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
        present: dict[Value, list[int | float | None]] = {}
        for label in row_labels:
            cells_of_row: list[int | float | None] = []
            for column in columns:
                values = cells.get((label, column))
                cells_of_row.append(_combine_cell(self.cell_op, values) if values else None)
            line: list[Value] = [0 if v is None and totals else v for v in cells_of_row]
            if self.row_op is not None:
                line.append(self._combine(self.row_op, cells_of_row))
            present[label] = cells_of_row
            table.append((label, line))
        table.sort(key=self._order)
        yield [None, *columns, *([None] if self.row_op is not None else [])]
        for label, line in table:
            yield [label, *line]
        if self.col_op is not None:
            footer: Row = [None]
            for i in range(len(columns)):
                footer.append(self._combine(self.col_op, [present[label][i] for label, _ in table]))
            yield footer

    @staticmethod
    def _combine(op: str, cells: list[int | float | None]) -> Value:
        """A row or column total over its non-empty cells (null when all are empty)."""
        values = [v for v in cells if v is not None]
        return _CELL_OPS[op](values) if values else None

    def _order(self, item: tuple[Value, list[Value]]) -> tuple[object, ...]:
        label, line = item
        if self.sort in ("a", "d"):
            # by the ROWOP column, as Hydra sorts; without one, by the cells' sum
            numbers = line[-1:] if self.row_op is not None else line
            total = sum(v for v in numbers if isinstance(v, int | float))
            return (-total if self.sort == "d" else total, as_text(label))
        text = as_text(label)
        return (tuple(-ord(c) for c in text),) if self.sort == "ld" else (text,)


class DepivotOp(Op):
    """depivot[=ORDER] : undo a pivot: one row (row label, column label, value) per cell.

    A row whose first cell is null is a header (as a pivot makes: null, the
    column labels, then a null over a totals column): it names the columns,
    from the second cell up to the next null; cells under no label are skipped,
    and header rows give no output. ORDER places the parts, as words ``row``,
    ``col``, ``val`` and ``sum`` (the row's last cell, e.g. its total); the
    default is ``row,col,val``. Example: header ``null a b null`` and row
    ``aaa 1 3 4`` give ``aaa a 1`` / ``aaa b 3``; with ``depivot=row,col,val,sum``
    ``aaa a 1 4`` / ``aaa b 3 4``.
    """

    name = "depivot"
    arguments = (
        ("row", "the row label"),
        ("col", "the column label"),
        ("val", "the cell"),
        ("sum", "the row's last cell"),
    )

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        self.order = [w for w, _ in args.split(",")] if args.text else ["row", "col", "val"]
        for word, index in args.split(",") if args.text else []:
            if word not in ("row", "col", "val", "sum"):
                raise args.error(index, f"unknown part {word!r}", hint="Use row, col, val and sum.")

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """The cells, one row each."""
        labels: list[Value] = []
        for row in rows:
            if not row or row[0] is None:
                labels = []
                for label in row[1:]:
                    if label is None:
                        break
                    labels.append(label)
                continue
            for position, label in enumerate(labels, start=1):
                parts = {"row": row[0], "col": label, "val": cell(row, position), "sum": row[-1]}
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
    OPS is an op string whose ``;`` are escaped (``\\;``); it may hold a groupby of its
    own, at most 32 deep. Each key's rows go
    through their own copy of OPS as they arrive, and results come out when
    Hydra's would: a streaming op (``limit``, ``num``...) passes a row on as soon
    as it arrives, so groups interleave in arrival order; what an op gives only
    at the end of its input (``sort``, a last ``merge`` run) comes after every
    row, key by key in the order keys first appeared.
    Example: ``groupby=kik:limit=2`` on ``cat a 1`` / ``dog a 6`` / ``dog a 7`` /
    ``dog b 6`` / ``dog c 6`` keeps all but ``dog c 6``, in that order.
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
        self.ops_start = len(letters) + 1
        self.compile: Callable[[str], Any] | None = None

    def bind(self, compile_ops: Callable[[str], Any]) -> None:
        """Take the op compiler (the pipeline hands it over) and check OPS now."""
        self.compile = compile_ops
        try:
            compile_ops(self.ops_text)
        except OpError as error:
            raise self._placed(error) from None

    def _placed(self, error: OpError) -> OpError:
        """An error of OPS (placed in OPS alone) placed in the whole op string, named by
        one ``groupby:`` however deep the groupby that holds it."""
        offset = offset_of(self.ops_text, error.line, error.column)
        reason = error.reason.removeprefix(f"{self.name}: ")
        return self.args.error(self.ops_start + offset, reason, error.hint)

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Each key's rows through its own ops, results in Hydra's order.

        Each output is stamped with the arrival number of the last input row its
        ops had pulled when it came out (or "at the end" once they had pulled
        past their last row); outputs then come in stamp order.
        """
        assert self.compile is not None, "groupby runs inside an ops pipeline"
        groups: dict[tuple[Value, ...], list[tuple[int, Row]]] = {}
        for arrival, row in enumerate(rows):
            key = tuple(cell(row, k) for k in self.keys)
            groups.setdefault(key, []).append((arrival, row))
        stamped: list[tuple[float, int, int, Row]] = []
        for group_order, members in enumerate(groups.values()):
            reader = _GroupReader(members)
            outputs = self.compile(self.ops_text).run(reader.rows())
            try:
                for sequence, out in enumerate(outputs):
                    stamped.append((reader.stamp(), group_order, sequence, list(out)))
            except OpError as error:  # an op of OPS refusing a row
                raise self._placed(error) from None
        stamped.sort(key=lambda item: item[:3])
        for *_, out in stamped:
            yield out


class _GroupReader:
    """Feeds one group's rows to its ops and remembers how far they have read."""

    def __init__(self, members: list[tuple[int, Row]]) -> None:
        self.members = members
        self.last_arrival = -1
        self.exhausted = False

    def rows(self) -> Iterator[Row]:
        """The group's rows, noting each one's arrival number as it is pulled."""
        for arrival, row in self.members:
            self.last_arrival = arrival
            yield row
        self.exhausted = True

    def stamp(self) -> float:
        """When an output produced now would have left Hydra's op."""
        return math.inf if self.exhausted else self.last_arrival
