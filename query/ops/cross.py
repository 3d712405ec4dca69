"""``cross`` (ours, not Hydra's): pair two kinds of rows of one key, on rows or on columns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from query.ops.base import Op, OpArgs, Row, Value, as_text, cell, column_number
from query.ops.columns import Chunk, as_text_column, column_at, plain, whole_runs
from query.syntax.ast import unique_names

__all__ = ["LIST_CHUNK_VALUES", "CrossOp", "ListCoder", "ListsOfBlock", "list_chunk"]


class CrossOp(Op):
    """cross=KEY,SIDE,VALUE,LEFT,RIGHT[,list] : pair the LEFT rows of a key with its RIGHT rows.

    Ours (Hydra has no such op). Within each run of adjacent rows with equal
    column KEY, every row whose column SIDE reads LEFT is paired with every
    row whose column SIDE reads RIGHT: one output row ``LEFT's VALUE, RIGHT's
    VALUE`` per pair, left rows outer, both in input order. Other rows are
    dropped, and a key without both kinds gives nothing. With ``gather`` after
    it, this regroups a tree by a value found under its keys.

    With ``list``: one row per left row instead, ``LEFT's VALUE, the key's
    RIGHT VALUEs`` (those not null, in input order, joined by ``,`` as text); a
    key without a right value gives nothing. ``gather``'s ``J`` reads the lists
    as they are, and the pairs are never spelled out: the same regrouping with
    far less to move and fold.

    Example: on ``root/UID/{A,M}/value`` rows ``u1 A 1`` / ``u1 A 3`` /
    ``u1 M p`` / ``u2 A 2``, ``cross=0,1,2,M,A`` gives ``p 1`` / ``p 3``, and
    ``cross=0,1,2,M,A,list`` gives ``p 1,3``; ``cross=0,1,2,M,A,list;gather=kJ``
    then gives each PUID its sorted attribute ids.
    """

    name = "cross"
    takes_coded = True  # its KEY and SIDE columns are read as codes; VALUE as text
    codes_path_levels = True
    arguments = (
        ("KEY", "the column whose runs of equal values hold one key's rows"),
        ("SIDE", "the column that tells left rows from right rows"),
        ("VALUE", "the column whose values are paired"),
        ("LEFT", "the SIDE text of the left rows"),
        ("RIGHT", "the SIDE text of the right rows"),
        ("list", "optional: one row per left row, with the key's right values as one list"),
    )
    separator = ","

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        parts = args.split(",")
        if len(parts) not in (5, 6):
            raise args.error(
                len(args.text),
                f"expected KEY,SIDE,VALUE,LEFT,RIGHT[,list] (5 or 6 parts), not {len(parts)}",
                hint="e.g. cross=0,1,2,M,A",
            )
        if len(parts) == 6 and parts[5][0] != "list":
            raise args.error(
                parts[5][1], f"the sixth part can only be 'list', not {parts[5][0]!r}",
                hint="e.g. cross=0,1,2,M,A,list",
            )  # fmt: skip
        self.key, self.side, self.value = (column_number(args, t, i) for t, i in parts[:3])
        self.left, self.right = parts[3][0], parts[4][0]
        self.lists = len(parts) == 6

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
                yield from self._paired(lefts, rights)
                lefts, rights = [], []
            current, started = key, True
            side = as_text(cell(row, self.side))
            if side == self.left:
                lefts.append(cell(row, self.value))
            if side == self.right:
                rights.append(cell(row, self.value))
        yield from self._paired(lefts, rights)

    def _paired(self, lefts: list[Value], rights: list[Value]) -> Iterator[Row]:
        """One key's output rows: its pairs, or each left row with the right values."""
        if not self.lists:
            yield from ([a, b] for a in lefts for b in rights)
            return
        present = [as_text(value) for value in rights if value is not None]
        if present:
            joined = ",".join(present)
            yield from ([a, joined] for a in lefts)

    def column_types(self, types: list[str]) -> list[str] | None:
        """The VALUE column's type, twice (the lists: text)."""
        kind = types[self.value] if self.value < len(types) else "null"
        return [kind, "str" if self.lists else kind]

    def run_columns(self, chunks: Iterator[Chunk]) -> Iterator[Chunk]:
        """Pair chunk by chunk; the last key of a chunk waits for the next chunk. The pairs
        come coded: the values as dictionary codes (see :mod:`query.ops.columns`); with
        ``list``, each left row's right values as a list view of codes."""
        if self.lists:
            yield from self._list_chunks(whole_runs(chunks, self._key_of))
            return
        for rows, columns, starts in whole_runs(chunks, self._key_of):
            yield self._pairs(rows, columns, starts)

    def _list_chunks(
        self, blocks: Iterable[tuple[int, list[pa.Array], np.ndarray]]
    ) -> Iterator[Chunk]:
        """:meth:`_lists` of the blocks, held until they hold :data:`LIST_CHUNK_VALUES`
        values (or the input ends) and coded together: one dictionary for many blocks
        (a shard's left values repeat across its blocks: each is coded, sent and
        unified once per chunk, not once per block)."""
        coder = ListCoder(LIST_CHUNK_VALUES)
        for found in self._blocks_lists(blocks):
            if (chunk := coder.add(found)) is not None:
                yield chunk
        if (chunk := coder.take()) is not None:
            yield chunk

    def uncoded_lists(self, chunks: Iterator[Chunk]) -> Iterator[ListsOfBlock]:
        """With ``list``: the lists of ``chunks`` (a path's columns) block by block, not
        yet coded, for a caller that codes the lists of several shards together
        (:func:`list_chunk`): their dictionaries then hold each value once for all of
        them, not once per shard."""
        if not self.lists:
            raise ValueError("cross gives lists only with 'list'")
        return self._blocks_lists(whole_runs(chunks, self._key_of))

    def _blocks_lists(
        self, blocks: Iterable[tuple[int, list[pa.Array], np.ndarray]]
    ) -> Iterator[ListsOfBlock]:
        for rows, columns, starts in blocks:
            found = self._lists(rows, columns, starts)
            if found is not None:
                yield found

    def _key_of(self, columns: list[pa.Array], rows: int) -> list[pa.Array]:
        key = column_at(columns, self.key, rows)  # coded text stays coded
        return [key if isinstance(key, pa.DictionaryArray) else plain(key)]

    def _pairs(self, rows: int, columns: list[pa.Array], starts: np.ndarray) -> Chunk:
        """Every (left, right) pair of each key whose rows start at ``starts``."""
        values = plain(column_at(columns, self.value, rows))
        group, left, right, right_counts, right_first = self._sides(rows, columns, starts)
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

    def _sides(
        self,
        rows: int,
        columns: list[pa.Array],
        starts: np.ndarray,
        present: pa.Array | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For keys whose rows start at ``starts``: each row's key, the left rows, the
        right rows (those ``present`` marks, if given), and per key its number of right
        rows and where they start among the right rows."""
        side = column_at(columns, self.side, rows)
        if not isinstance(side, pa.DictionaryArray):  # coded text stays coded
            side = as_text_column(plain(side), rows)
        group = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, rows)))
        left = _rows_where(side, self.left, rows)
        right = _rows_where(side, self.right, rows)
        if present is not None:
            right = right[present.to_numpy(zero_copy_only=False)[right]]
        right_counts = np.bincount(group[right], minlength=len(starts))
        return group, left, right, right_counts, np.cumsum(right_counts) - right_counts

    def _lists(self, rows: int, columns: list[pa.Array], starts: np.ndarray) -> ListsOfBlock | None:
        """Each left row of a key whose rows start at ``starts`` with the key's right
        values (not null), as a list view (see :class:`ListsOfBlock`). Every left row of a key
        views the same stretch of the right values, so nothing is repeated. None when
        the values are all null."""
        values = plain(column_at(columns, self.value, rows))
        if values.type == pa.null():
            return None
        present = pc.is_valid(values) if values.null_count else None
        group, left, right, right_counts, right_first = self._sides(rows, columns, starts, present)
        left = left[right_counts[group[left]] > 0]
        return ListsOfBlock(
            values.take(pa.array(left)),
            right_first[group[left]],
            right_counts[group[left]],
            values.take(pa.array(right)),
        )


class ListsOfBlock(NamedTuple):
    """A block's left rows with list views of right values, not yet coded."""

    left: pa.Array
    """The left rows' values."""
    firsts: np.ndarray
    """Each left row's first right value (its place in ``right``)."""
    sizes: np.ndarray
    """Each left row's number of right values."""
    right: pa.Array
    """The right values, each key's together."""

    @property
    def values(self) -> int:
        """How many values it holds (left and right)."""
        return len(self.left) + len(self.right)


LIST_CHUNK_VALUES = 1 << 22
"""``cross ... list`` codes its output this many values (left and right) at a time."""


class ListCoder:
    """Lists of blocks held until they hold ``limit`` values (left and right), then coded
    together as one chunk (:func:`list_chunk`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held: list[ListsOfBlock] = []
        self.values = 0

    def add(self, lists: ListsOfBlock) -> Chunk | None:
        """Hold ``lists``; the chunk of all held once they reach the limit."""
        self.held.append(lists)
        self.values += lists.values
        return self.take() if self.values >= self.limit else None

    def take(self) -> Chunk | None:
        """The chunk of the lists held (None when none are)."""
        if not self.held:
            return None
        chunk = list_chunk(self.held)
        self.held, self.values = [], 0
        return chunk


def list_chunk(held: list[ListsOfBlock]) -> Chunk:
    """The lists of blocks one after another as one chunk: the left values coded, and a
    list view of the right values coded."""
    bases = np.cumsum([0, *(len(lists.right) for lists in held)])
    offsets = np.concatenate(
        [lists.firsts + base for lists, base in zip(held, bases[:-1], strict=True)]
    )
    sizes = np.concatenate([lists.sizes for lists in held])
    left = pc.dictionary_encode(_concatenated([lists.left for lists in held]))
    right = pc.dictionary_encode(_concatenated([lists.right for lists in held]))
    kind = np.int32 if bases[-1] < 1 << 31 else np.int64
    view = pa.ListViewArray.from_arrays(
        pa.array(offsets.astype(kind)), pa.array(sizes.astype(kind)), right
    )
    return len(left), [left, view]


def _concatenated(parts: list[pa.Array]) -> pa.Array:
    """``parts`` as one array; text of both widths (the blocks of several shards: a level
    whose names outgrow 2 GB reads as ``large_string``) as ``large_string``."""
    if len({part.type for part in parts}) > 1 and all(
        pa.types.is_string(part.type) or pa.types.is_large_string(part.type) for part in parts
    ):
        parts = [part.cast(pa.large_string()) for part in parts]
    return pa.concat_arrays(parts)


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
    """The row numbers (ascending) whose side column reads ``text`` (a null reads as
    the empty text); a coded column is compared on its dictionary, then its codes."""
    if isinstance(side, str):
        return np.arange(rows) if side == text else np.zeros(0, dtype=np.int64)
    if isinstance(side, pa.DictionaryArray):
        reads = pc.fill_null(pc.equal(side.dictionary.cast(pa.string()), text), False)
        matches = np.append(reads.to_numpy(zero_copy_only=False), text == "")
        codes = pc.fill_null(side.indices.cast(pa.int64()), -1)  # a null: the last mark
        return np.flatnonzero(matches[codes.to_numpy(zero_copy_only=False)])
    matches = pc.fill_null(pc.equal(side, text), False)
    return np.flatnonzero(matches.to_numpy(zero_copy_only=False))
