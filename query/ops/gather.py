"""``gather`` (alias ``top``): fold every row of a key into one, whatever the row order."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from query.ops.base import OpArgs, Row, Value, as_number, cell
from query.ops.merge import MergeOp, _Run

__all__ = ["GatherOp"]


class GatherOp(MergeOp):
    """gather=LETTERS[tN] : fold all rows with equal key columns into one row per key.

    The letters are merge's (``k`` key, ``i`` ignore, ``s`` sum, ``a`` average,
    ``m``/``M`` min/max, ``l`` last, ``j`` join, ``p`` product, ``d`` diff,
    ``c`` count distinct, ``u`` row count) but rows need not be adjacent: it
    holds one row per key and emits them at the end, in the order keys first
    appeared. ``t`` before a column's letter makes that column rank the keys,
    and the digits N keep only the N keys with the largest values (a key
    pushed out is forgotten; if it comes back it starts again).

    Example: ``gather=iks`` on ``0 A 3`` / ``1 A 1`` / ``1 B 2`` / ``0 A 5``
    gives ``A 9`` / ``B 2``; ``top=2,ktsu`` keeps the two keys with the
    largest sums.
    """

    name = "gather"
    aliases = ("top",)
    table = True
    takes_top = True
    arguments = (*MergeOp.arguments, ("t", "the next column ranks the keys (with digits: top N)"))

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        if self.top_column is not None and not self.every:
            raise args.error(
                args.text.index("t"), "t needs a number of keys to keep, e.g. top=10,kts"
            )
        if self.top_column is not None and self.top_column >= len(self.columns):
            raise args.error(args.text.index("t"), "t must come before a column letter")

    def _rank(self, run: _Run) -> int | float:
        assert self.top_column is not None
        value = run.values[self.top_column]
        return as_number(value) or 0

    def column_types(self, types: list[str]) -> list[str] | None:
        """Rows only (gather holds one row per key over the whole input)."""
        return None

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Fold every row into its key's row; emit them at the end."""
        groups: dict[tuple[Value, ...], _Run] = {}
        for row in rows:
            key = tuple(cell(row, i) for i in self.keys)
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Run(len(self.columns))
            self._add(group, row)
            if self.top_column is not None and len(groups) > self.every:
                self._keep_top(groups, key)
        for group in groups.values():
            yield self._emit(group)

    def _keep_top(self, groups: dict[tuple[Value, ...], _Run], key: tuple[Value, ...]) -> None:
        """Over N keys: drop the lowest other key if ``key`` ranks as high, else ``key``."""
        value = self._rank(groups[key])
        others = [k for k in groups if k != key]
        lowest = min(others, key=lambda k: self._rank(groups[k]))
        if value >= self._rank(groups[lowest]):
            del groups[lowest]
        else:
            del groups[key]
