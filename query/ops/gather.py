"""``gather`` (alias ``top``): fold every row of a key into one, whatever the row order."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from query.ops.base import OpArgs, Row, Value, as_number, cell
from query.ops.columns import (
    ARROW_FOLDS,
    Chunk,
    column_at,
    encode_key,
    first_seen_groups,
    fold_groups,
    join_groups,
    plain,
    unify_codes,
)
from query.ops.items import Items, distinct_items_of
from query.ops.merge import MergeOp, _Run

__all__ = ["GatherOp"]


class GatherOp(MergeOp):
    """gather=LETTERS[tN] : fold all rows with equal key columns into one row per key.

    The letters are merge's (``k`` key, ``i`` ignore, ``s`` sum, ``a`` average,
    ``m``/``M`` min/max, ``l`` last, ``j`` join, ``p`` product, ``d`` diff,
    ``c`` count distinct, ``J`` distinct items sorted (ours), ``u`` row count)
    but rows need not be adjacent: it emits one row per key at the end, in the
    order keys first appeared. On rows it holds one row per key; on columns it
    holds its input as Arrow columns (a few bytes per value) until the end.
    ``t`` before a column's letter makes that column rank the keys, and the
    digits N keep only the N keys with the largest values (a key pushed out
    is forgotten; if it comes back it starts again).

    Example: ``gather=iks`` on ``0 A 3`` / ``1 A 1`` / ``1 B 2`` / ``0 A 5``
    gives ``A 9`` / ``B 2``; ``top=2,ktsu`` keeps the two keys with the
    largest sums.
    """

    name = "gather"
    aliases = ("top",)
    table = True
    takes_top = True
    takes_coded = True
    gives_plain = True  # J as text, read straight out of its fold
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
        """Columns unless ``t`` ranks the keys, a number letter (``s``, ``m``, ``M``) meets a
        column that is not whole numbers, ``j`` meets whole numbers (one stays a number,
        several join as text), or a letter is ``a``, ``p`` or ``d``."""
        if self.top_column is not None:
            return None
        out = []
        for i, column in enumerate(self.columns):
            kind = types[i] if i < len(types) else "null"
            letter = column.letter
            if letter in "apd" or (letter in "smM" and kind != "int"):
                return None
            if letter == "j" and kind == "int":
                return None
            if letter == "c":
                kind = "int"
            elif letter in "jJ":
                kind = "str"
            if letter != "i":
                out.append(kind)
        return [*out, "int"] if self.count_rows else out

    def run_columns(self, chunks: Iterator[Chunk], plain_output: bool = False) -> Iterator[Chunk]:
        """Read every chunk (encoding its keys and ``J`` items as it arrives), then fold
        each key's rows with vectorized kernels: one chunk of keys in the order they
        first appeared. Coded keys and items are read as they are; coded keys stay coded,
        and ``J`` gives each key its items coded (see :mod:`query.ops.columns`), or with
        ``plain_output`` as text, read straight out of its fold."""
        whole = [i for i, column in enumerate(self.columns) if column.letter not in "ikJ"]
        kept: dict[int, list[pa.Array]] = {i: [] for i in whole}  # what a fold reads whole
        rows = 0
        keys: list[list[pa.DictionaryArray]] = [[] for _ in self.keys]
        typed: set[int] = set()  # the key columns with a chunk not all null
        items: dict[int, list[Items]] = {
            i: [] for i, c in enumerate(self.columns) if c.letter == "J"
        }
        for count, chunk_columns in chunks:
            if not count:
                continue
            rows += count
            for i, found in kept.items():
                found.append(plain(column_at(chunk_columns, i, count)))
            for key, place in zip(keys, self.keys, strict=True):
                column = column_at(chunk_columns, place, count)
                if column.type != pa.null():
                    typed.add(place)
                key.append(encode_key(column))
            for index, found in items.items():
                found.append(Items.of(column_at(chunk_columns, index, count)))
        if not rows:
            return
        columns = {i: pa.concat_arrays(found) for i, found in kept.items()}
        unified = dict(zip(self.keys, map(unify_codes, keys), strict=True))
        group, first = first_seen_groups(list(unified.values()), rows)
        groups = len(first)
        order: np.ndarray | None = None
        out: list[pa.Array] = []
        for i, column in enumerate(self.columns):
            letter = column.letter
            values = columns.get(i)
            if letter == "J":
                out.append(distinct_items_of(items[i], group, groups, as_text=plain_output))
            elif letter == "k":  # its codes, or nulls typed null
                coded = unified[i].take(pa.array(first)).combine_chunks() if i in typed else None
                out.append(coded if coded is not None else pa.nulls(groups))
            elif values is None:
                continue  # i: dropped
            elif letter in ARROW_FOLDS:
                out.append(fold_groups(values, group, groups, ARROW_FOLDS[letter]))
            elif letter == "l":
                marked = np.where(
                    pc.is_valid(values).to_numpy(zero_copy_only=False), np.arange(rows), -1
                )
                last = np.full(groups, -1, dtype=np.int64)
                np.maximum.at(last, group, marked)
                out.append(values.take(pa.array(last, mask=last < 0)))
            elif letter == "j":
                if order is None:
                    order = np.argsort(group, kind="stable")
                starts = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=groups))[:-1]])
                out.append(join_groups(values.take(pa.array(order)), starts))
        if self.count_rows:
            out.append(pa.array(np.bincount(group, minlength=groups), pa.int64()))
        yield groups, out

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
