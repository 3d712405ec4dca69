"""``diff``: the change between pairs of rows that alternate between two keys."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from query.ops.base import Op, OpArgs, Row, Value, as_number, as_text, cell

__all__ = ["DiffOp"]

_LETTERS = {"k": "key", "a": "alternating key", "d": "difference", "D": "negative difference"}


def _number(value: Value) -> int | float:
    return as_number(value) or 0


class DiffOp(Op):
    """diff=LETTERS : pair up rows whose alternating key goes first, second, and subtract.

    One letter per column: ``k`` part of the key, ``a`` the alternating key, ``d``
    a column to subtract (second minus first), ``D`` the same negated. The first
    two rows of the first key name the two alternating values. Then, down the
    rows: a row with the first value opens a pair; the next row of the same key
    closes it and gives the key, an empty ``a`` cell and the differences. A row
    with the second value and no open pair gives ``+`` and its own values (added);
    an open pair followed by another key gives the open row with ``-`` and its
    values negated (dropped), and the new row opens a pair. As in Hydra, the key
    cells of a dropped row show the whole key joined into one text.
    Example: ``diff=kad`` on ``cat a 1`` / ``cat b 2`` / ``dog b 9`` / ``foo a 3`` /
    ``bar a 3`` gives ``cat "" 1`` / ``dog + 9`` / ``foo - -3``.
    """

    name = "diff"
    table = True
    arguments = tuple(_LETTERS.items())

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        if not args.text:
            raise args.error(0, "expected one letter per column", hint="For example diff=kad.")
        for index, letter in enumerate(args.text):
            if letter not in _LETTERS:
                raise args.error(index, f"unknown letter {letter!r}", hint="Use k, a, d or D.")
        self.letters = args.text

    def _keys(self, row: Row) -> tuple[str, str]:
        key, alternating = "", ""
        for column, letter in enumerate(self.letters):
            if letter == "k":
                key += as_text(cell(row, column))
            elif letter == "a":
                alternating = as_text(cell(row, column))
        return key, alternating

    def _first_alternating(self, table: list[Row]) -> str:
        last_key: str | None = None
        first = ""
        for row in table:
            key, alternating = self._keys(row)
            if last_key == key:
                break
            last_key, first = key, alternating
        return first

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """The added, dropped and paired rows, in input order."""
        table = [list(row) for row in rows]
        opening = self._first_alternating(table)
        open_row: Row | None = None
        open_key = ""
        for row in table:
            key, alternating = self._keys(row)
            if open_row is None:
                if alternating == opening:
                    open_row, open_key = row, key
                else:
                    yield self._added(row)
            elif key == open_key:
                yield self._paired(open_row, row)
                open_row = None
            else:
                yield self._dropped(open_row, open_key)
                open_row, open_key = row, key

    def _added(self, row: Row) -> Row:
        out: Row = []
        for column, letter in enumerate(self.letters):
            value = cell(row, column)
            out.append("+" if letter == "a" else -_number(value) if letter == "D" else value)
        return out

    def _dropped(self, row: Row, key: str) -> Row:
        out: Row = []
        for column, letter in enumerate(self.letters):
            value = cell(row, column)
            if letter == "a":
                out.append("-")
            elif letter == "k":
                out.append(key)
            else:
                out.append(-_number(value) if letter == "d" else value)
        return out

    def _paired(self, before: Row, after: Row) -> Row:
        out: Row = []
        for column, letter in enumerate(self.letters):
            old, new = cell(before, column), cell(after, column)
            if letter == "a":
                out.append("")
            elif letter == "d":
                out.append(_number(new) - _number(old))
            elif letter == "D":
                out.append(_number(old) - _number(new))
            else:
                out.append(new)
        return out
