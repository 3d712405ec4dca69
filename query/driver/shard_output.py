"""One shard's part of a query: the path and rops over the shard's tree, in pieces.

Used wherever a shard is read (:func:`encoded_shard` in a query's tasks, whose pieces
travel encoded): the driver's walk and the query's Spark tasks
(:mod:`query.driver.runner`), a Spark Connect session's tasks
(:mod:`query.driver.connect_pieces`) and the DataFrame source's reads
(:mod:`query.driver.spark_source`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from query.driver.plan import QueryPlan
from query.driver.transport import ERROR, encode_error, encode_piece
from query.ops import Value
from query.ops.columns import Chunk, rows_of, run_on_columns
from query.ops.compiler import OpsPipeline
from query.syntax.ast import Path
from query.walk.column_engine import run_path_columns
from query.walk.row_walker import run_path
from treestore.errors import TreestoreError
from treestore.storage.pagestore import PageStore
from treestore.storage.tree import ShardState, ShardTree
from treestore.store.versions import StoreVersion

__all__ = ["PIECE_ROWS", "cached_tree", "encoded_shard", "shard_output", "shard_rows"]

PIECE_ROWS = 8192
"""The most rows a shard sends in one piece (a task's pieces grow to it from
:data:`_FIRST_CHUNK`, so the first rows leave early)."""
_FIRST_CHUNK = 64


def shard_rows(tree: ShardTree, path: Path, rops: OpsPipeline) -> Iterator[tuple[Value, ...]]:
    """The rows of one shard: ``path`` over its tree, then ``rops``."""
    return rops.run(run_path(tree, path))


def shard_output(tree: ShardTree, plan: QueryPlan) -> Iterator[Chunk | list[Any]]:
    """One shard's rows for a scan, as ``plan`` says: column chunks while the path and the
    leading rops run on columns (see :mod:`query.walk.column_engine`; they may be coded,
    see :mod:`query.ops.columns`), else lists of rows that grow from :data:`_FIRST_CHUNK`
    to :data:`PIECE_ROWS` (so the first rows leave early)."""
    rows: Iterable[tuple[Value, ...]]
    if plan.path_on_columns:
        ops = plan.rops.on_columns
        coded = bool(ops) and ops[0].codes_path_levels  # keys and sides read as codes
        chunks = run_on_columns(ops, run_path_columns(tree, plan.path, coded=coded))
        if not plan.rops.on_rows:
            yield from chunks
            return
        rows = plan.rops.on_rows.run(rows_of(chunks))  # type: ignore[arg-type]
    else:
        rows = shard_rows(tree, plan.path, plan.rops.pipeline)
    size = _FIRST_CHUNK
    iterator = iter(rows)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk
        size = min(size * 4, PIECE_ROWS)


def cached_tree(version: StoreVersion, trees: dict[int, ShardTree], shard: int) -> ShardTree:
    """Shard ``shard``'s tree at ``version``, kept in ``trees`` (that version's cache)."""
    state = version.manifest.trees[shard]
    tree = trees.get(shard)
    if tree is None or tree.state is not state:  # another version's (a refresh raced)
        tree = trees[shard] = ShardTree(version.pages, state, shard=shard, owner=version.owner)
    return tree


def encoded_shard(
    pages: PageStore,
    state: ShardState,
    plan: QueryPlan,
    shard: int,
    owner: str | None,
    compress: bool,
) -> Iterator[tuple[int, bytes]]:
    """Shard ``shard``'s output for a Spark task, each piece encoded as
    :mod:`query.driver.transport` encodes it (``(kind, payload)``); a treestore error
    becomes a last piece of kind ``ERROR``, raised again where the pieces are read."""
    try:
        tree = ShardTree(pages, state, shard=shard, owner=owner)
        for output in shard_output(tree, plan):
            yield encode_piece(output, compress=compress)
    except TreestoreError as exc:
        yield ERROR, encode_error(exc)
