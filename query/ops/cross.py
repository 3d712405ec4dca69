"""``cross`` (ours, not Hydra's): pair two kinds of rows of one key, on rows or on columns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from query.ops.base import Op, OpArgs, Row, Value, as_text, cell
from query.ops.columns import Chunk, as_text_column, column_at, whole_runs
from query.ops.row_ops import column_number
from query.syntax.ast import unique_names

__all__ = ["CrossOp"]


class CrossOp(Op):
    """cross=KEY,SIDE,VALUE,LEFT,RIGHT : pair the LEFT rows of a key with its RIGHT rows.

    Ours (Hydra has no such op). Within each run of adjacent rows with equal
    column KEY, every row whose column SIDE reads LEFT is paired with every
    row whose column SIDE reads RIGHT: one output row ``LEFT's VALUE, RIGHT's
    VALUE`` per pair, left rows outer, both in input order. Other rows are
    dropped, and a key without both kinds gives nothing. With ``gather`` after
    it, this regroups a tree by a value found under its keys.

    Example: on ``root/UID/{A,M}/value`` rows ``u1 A 1`` / ``u1 A 3`` /
    ``u1 M p`` / ``u2 A 2``, ``cross=0,1,2,M,A`` gives ``p 1`` / ``p 3``;
    ``cross=0,1,2,M,A;gather=kJ`` then gives each PUID its sorted attribute ids.
    """

    name = "cross"
    arguments = (
        ("KEY", "the column whose runs of equal values hold one key's rows"),
        ("SIDE", "the column that tells left rows from right rows"),
        ("VALUE", "the column whose values are paired"),
        ("LEFT", "the SIDE text of the left rows"),
        ("RIGHT", "the SIDE text of the right rows"),
    )
    separator = ","

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        parts = args.split(",")
        if len(parts) != 5:
            raise args.error(
                len(args.text),
                f"expected KEY,SIDE,VALUE,LEFT,RIGHT (5 parts), not {len(parts)}",
                hint="e.g. cross=0,1,2,M,A",
            )
        self.key, self.side, self.value = (column_number(args, t, i) for t, i in parts[:3])
        self.left, self.right = parts[3][0], parts[4][0]

    def column_names(self, names: tuple[str, ...]) -> tuple[str, ...] | None:
        """Two columns, named by the LEFT and RIGHT texts."""
        return unique_names([self.left or "left", self.right or "right"])

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Pair each key's left and right rows once its run of rows ends."""
        lefts: list[Value] = []
        rights: list[Value] = []
        current: Value = None
        started = False
        for row in rows:
            key = cell(row, self.key)
            if started and key != current:
                yield from ([a, b] for a in lefts for b in rights)
                lefts, rights = [], []
            current, started = key, True
            side = as_text(cell(row, self.side))
            if side == self.left:
                lefts.append(cell(row, self.value))
            if side == self.right:
                rights.append(cell(row, self.value))
        yield from ([a, b] for a in lefts for b in rights)

    def column_types(self, types: list[str]) -> list[str] | None:
        """The VALUE column's type, twice."""
        kind = types[self.value] if self.value < len(types) else "null"
        return [kind, kind]

    def run_columns(self, chunks: Iterator[Chunk]) -> Iterator[Chunk]:
        """Pair chunk by chunk; the last key of a chunk waits for the next chunk. The pairs
        come coded: the values as dictionary codes (see :mod:`query.ops.columns`)."""
        for rows, columns, starts in whole_runs(chunks, self._key_of):
            yield self._pairs(rows, columns, starts)

    def _key_of(self, columns: list[pa.Array], rows: int) -> list[pa.Array]:
        return [column_at(columns, self.key, rows)]

    def _pairs(self, rows: int, columns: list[pa.Array], starts: np.ndarray) -> Chunk:
        """Every (left, right) pair of each key whose rows start at ``starts``."""
        side = as_text_column(column_at(columns, self.side, rows), rows)
        values = column_at(columns, self.value, rows)
        group = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, rows)))
        left = _rows_where(side, self.left, rows)
        right = _rows_where(side, self.right, rows)
        right_counts = np.bincount(group[right], minlength=len(starts))
        right_first = np.cumsum(right_counts) - right_counts
        per_left = right_counts[group[left]]
        total = int(per_left.sum())
        kind = np.int32 if max(total, rows) < 1 << 31 else np.int64
        # each output row's place among the right rows: its left row's block of right
        # rows starts at right_first, and output rows run through the block in order
        shift = right_first[group[left]] - (np.cumsum(per_left) - per_left)
        right_out = np.arange(total, dtype=kind)
        np.add(right_out, np.repeat(shift.astype(kind), per_left), out=right_out)
        left_codes = _coded(values, left)
        right_codes = _coded(values, right)
        return total, [
            _repeated(left_codes, lambda codes: np.repeat(codes, per_left), total),
            _repeated(right_codes, lambda codes: codes[right_out], total),
        ]


def _coded(values: pa.Array, rows: np.ndarray) -> pa.Array:
    """The values of ``rows``, dictionary-coded (each distinct value once)."""
    chosen = values.take(pa.array(rows))
    return chosen if chosen.type == pa.null() else pc.dictionary_encode(chosen)


def _repeated(coded: pa.Array, pick: Callable[[np.ndarray], np.ndarray], total: int) -> pa.Array:
    """The ``total`` rows ``pick`` chooses from ``coded``'s rows (given their numbers):
    on the codes in numpy where it can (the pairs are most of a query's rows)."""
    if coded.type == pa.null():
        return pa.nulls(total)
    if coded.null_count:
        return coded.take(pa.array(pick(np.arange(len(coded)))))
    codes = coded.indices.to_numpy()
    return pa.DictionaryArray.from_arrays(pa.array(pick(codes)), coded.dictionary)


def _rows_where(side: pa.Array | str, text: str, rows: int) -> np.ndarray:
    """The row numbers (ascending) whose side column reads ``text``."""
    if isinstance(side, str):
        return np.arange(rows) if side == text else np.zeros(0, dtype=np.int64)
    matches = pc.fill_null(pc.equal(side, text), False)
    return np.flatnonzero(matches.to_numpy(zero_copy_only=False))
