"""Merging runs too big to hold in memory: a streaming merge of column blocks.

Each run is read as blocks of consecutive pages (:meth:`RunReader.column_blocks`).
Every step takes, from each run, the entries up to the smallest last key any run
still reading has buffered, and merges those with :func:`merge_columns` (array
operations). Entries of one key are therefore always merged in the same step, and
memory holds about one block per run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from treestore.storage.entries import ChildColumns, merge_columns

__all__ = ["merge_blocks"]


def merge_blocks(runs: Iterable[Iterator[ChildColumns]]) -> Iterator[ChildColumns]:
    """Merge runs given as iterators of key-ordered column blocks (oldest run first) into
    key-ordered blocks, equal keys added up and the newest data kept, as
    :func:`merge_columns` does for whole runs."""
    sources: list[Iterator[ChildColumns] | None] = list(runs)
    buffered = [ChildColumns.empty() for _ in sources]
    while True:
        for i, source in enumerate(sources):
            while source is not None and not len(buffered[i]):
                block = next(source, None)
                if block is None:
                    sources[i] = source = None
                else:
                    buffered[i] = block
        if not any(len(b) for b in buffered):
            return
        reading = [b.last_key() for b, s in zip(buffered, sources, strict=True) if s is not None]
        bound = min(reading) if reading else None
        parts = []
        for i, block in enumerate(buffered):
            cut = len(block) if bound is None else block.count_up_to(bound)
            parts.append(block.slice(0, cut))
            buffered[i] = block.slice(cut, len(block))
        yield merge_columns(parts)
