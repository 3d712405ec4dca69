"""Running a path over one tree a level at a time, on columns: the scan engine.

:func:`run_path_columns` gives the same rows, in the same order, as
:func:`query.walk.row_walker.run_path`, but as Arrow columns. Each element works on
the whole frontier (the nodes the previous element reached) at once: the
frontier's children are read as columns (:meth:`ShardTree.children_columns`),
matched with Arrow and numpy kernels, and bounded, skipped and limited per
parent with group ranks. A level keeps, for each of its rows, the row of the
level before it (``src``), so the rows' columns are put together only at the
end. A level bigger than ``chunk_rows`` is walked in slices, depth first, so
rows stream out in tree order and memory stays bounded; on the way to a tree's first
rows each level's first slice is small (``first_rows``), so they go out at once. A
level's nodes are picked from the columns they were read into, each column gathered
only when something uses it.

Elements that read attachments (``%name``, ``$field``), have traps or follow a
reference (``@@a/b``) are not handled here:
:func:`supports` says whether a path can run on columns.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from query.ops.columns import ColumnType, join_groups
from query.syntax.ast import Bound, Element, Path
from query.walk.row_walker import STAND_IN_ID, prefix_range
from treestore.arrays import distinct_sorted
from treestore.settings import env_number
from treestore.storage.entries import ChildColumns, expand_ranges
from treestore.storage.tree import ShardTree

__all__ = ["CHUNK_ROWS", "column_types", "rows_reason", "run_path_columns", "supports"]

CHUNK_ROWS = 65536
"""Levels bigger than this are walked in slices of this many rows."""
FIRST_CHUNK_ROWS = 64
"""The first slice of each level on the way to a tree's first rows (see ``walk``)."""
WHOLE_TREE_SHARE = 64
"""A frontier holding more than this share of the tree's nodes reads the whole tree."""


def rows_reason(path: Path) -> str | None:
    """Why ``path`` cannot run on columns (the first element that reads an attachment, a
    field, a trap or an ``@@`` reference), or ``None`` when it can."""
    for number, element in enumerate(path.elements, 1):
        what = (
            "reads an attachment"
            if element.kind == "data"
            else "is an @@ reference"
            if element.kind == "reference"
            else "shows attachment fields ($)"
            if element.fields
            else "has traps (-name)"
            if element.traps
            else None
        )
        if what is not None:
            return f"element {number} ({element}) {what}"
    return None


def supports(path: Path) -> bool:
    """Whether ``path`` can run on columns (no attachment, trap or ``@@`` reference)."""
    return rows_reason(path) is None


def column_types(path: Path) -> list[ColumnType]:
    """The type of each column the path's rows have (names and joined values are text)."""
    types: list[ColumnType] = []
    for element in path.elements:
        added = ["str"] if element.show else []
        if element.kind != "up":
            added += ["int" for prop in element.properties if prop.show]
        types += ["str"] * len(added) if element.flat else added
    return types


class _Picked:
    """Entries picked from columns (``base``) by index, gathered column by column when a
    column is first asked for: a full scan's last level gathers only the names it shows,
    and picking from picked entries composes the indices instead of copying columns."""

    def __init__(self, base: ChildColumns, rows: np.ndarray) -> None:
        self.base = base
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    @cached_property
    def parents(self) -> np.ndarray:
        return self.base.parents[self.rows]

    @cached_property
    def names(self) -> pa.Array:
        return self.base.names.take(self.rows)

    @cached_property
    def ids(self) -> np.ndarray:
        return self.base.ids[self.rows]

    @cached_property
    def hits(self) -> np.ndarray:
        return self.base.hits[self.rows]

    @cached_property
    def counts(self) -> np.ndarray:
        return self.base.counts[self.rows]

    def take(self, rows: np.ndarray) -> _Picked:
        return _Picked(self.base, self.rows[rows])

    def slice(self, start: int, stop: int) -> _Picked:
        return _Picked(self.base, self.rows[start:stop])


_Nodes = ChildColumns | _Picked
"""A level's nodes: columns, or entries picked from columns."""


@dataclass(frozen=True)
class _Level:
    """The rows one element produced: their nodes, the row before each, the columns added."""

    nodes: _Nodes
    src: np.ndarray
    columns: tuple[pa.Array, ...]

    def __len__(self) -> int:
        return len(self.nodes)

    def slice(self, start: int, stop: int) -> _Level:
        """Rows ``start`` to ``stop - 1`` (views, no copies)."""
        stop = min(stop, len(self))
        return _Level(
            self.nodes.slice(start, stop),
            self.src[start:stop],
            tuple(c.slice(start, max(0, stop - start)) for c in self.columns),
        )


@cache
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


def _group_ranks(src: np.ndarray) -> np.ndarray:
    """Each row's position among the rows with the same (sorted) ``src``."""
    return np.arange(len(src)) - np.searchsorted(src, src, "left")


def whole_tree_budget() -> int:
    """The encoded size up to which a scan reads a shard's whole tree into memory
    (``TREESTORE_SCAN_MB`` megabytes, default 512; columns take about twice that)."""
    return int(env_number("TREESTORE_SCAN_MB", 512) * 1024 * 1024)


class _ChildSource:
    """Where a walk's children come from: the pages that hold them, level by level, until
    a frontier holds more than 1/:data:`WHOLE_TREE_SHARE` of the tree's nodes; from then on
    the whole tree, read once, with each node's children found by its id. A tree bigger
    than :func:`whole_tree_budget` is always read by pages (through the page cache)."""

    def __init__(self, tree: ShardTree) -> None:
        self.tree = tree
        self.whole: ChildColumns | None = None
        self.first_child = self.child_count = np.zeros(0, dtype=np.int64)

    def _load_whole(self) -> None:
        whole = self.whole = self.tree.all_columns()
        size = max(self.tree.next_id, int(whole.ids.max(initial=0)) + 1)
        per_parent = np.bincount(whole.parents + 1, minlength=size + 1)
        self.child_count = per_parent[1:]
        self.first_child = (np.cumsum(per_parent) - per_parent)[1:]

    def children(self, frontier: _Nodes) -> tuple[np.ndarray, _Picked]:
        """Every child of every frontier row: (the frontier row of each, the children)."""
        has_children = frontier.counts > 0
        if (
            self.whole is None
            and len(frontier) * WHOLE_TREE_SHARE > max(self.tree.state.nodes, 1)
            and self.tree.state.bytes <= whole_tree_budget()
        ):
            self._load_whole()
        if self.whole is not None:
            ids = np.where(has_children, frontier.ids, 0)
            starts = self.first_child[ids]
            lengths = np.where(has_children, self.child_count[ids], 0)
            found = self.whole
        else:
            parents = distinct_sorted(frontier.ids[has_children])
            found = self.tree.children_columns(parents) if len(parents) else ChildColumns.empty()
            starts = np.searchsorted(found.parents, frontier.ids, "left")
            lengths = np.searchsorted(found.parents, frontier.ids, "right") - starts
            lengths[~has_children] = 0
        src = np.repeat(np.arange(len(frontier)), lengths)
        return src, _Picked(found, expand_ranges(starts, lengths))


def _in_range(names: pa.Array, start: str, stop: str | None) -> np.ndarray:
    mask = pc.greater_equal(names, pa.scalar(start))
    if stop is not None:
        mask = pc.and_(mask, pc.less(names, pa.scalar(stop)))
    return mask.to_numpy(zero_copy_only=False)


def _select(element: Element, src: np.ndarray, children: _Nodes) -> np.ndarray | None:
    """The children ``element`` takes, as indices in walk order (per parent, per
    alternative); ``None`` for all of them."""
    kind = element.kind
    if kind == "all":
        return None
    if kind == "range":
        stop = element.names[1] if len(element.names) > 1 else None
        return np.flatnonzero(_in_range(children.names, element.names[0], stop))
    if kind == "regex":
        patterns = [_pattern(p) for p in element.names]
        matched = np.array(
            [any(p.fullmatch(n) for p in patterns) for n in children.names.to_pylist()], dtype=bool
        )
        return np.flatnonzero(matched != element.negate)
    masks = []
    for name in element.names:
        if kind == "names":
            masks.append(pc.equal(children.names, pa.scalar(name)).to_numpy(zero_copy_only=False))
        else:
            masks.append(_in_range(children.names, *prefix_range(name)))
    picked = [np.flatnonzero(m) for m in masks]
    rows = np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)
    alternative = np.repeat(np.arange(len(picked)), [len(p) for p in picked])
    return rows[np.lexsort((rows, alternative, src[rows]))]


def _with_defaults(
    element: Element, frontier_size: int, src: np.ndarray, nodes: _Nodes
) -> tuple[np.ndarray, _Nodes]:
    """Add a stand-in node for every frontier row without candidates (``+[default]``)."""
    if element.stand_in is None:
        return src, nodes
    missing = np.setdiff1d(np.arange(frontier_size), src)
    if not len(missing):
        return src, nodes
    size = len(missing)
    stand_ins = ChildColumns(
        np.full(size, STAND_IN_ID),
        pa.array([element.stand_in] * size, pa.string()),
        np.full(size, STAND_IN_ID),
        np.full(size, element.default_hits or 0),
        np.zeros(size, dtype=np.int64),
    )
    both = np.concatenate([src, missing])
    order = np.argsort(both, kind="stable")
    merged = ChildColumns(
        np.concatenate([nodes.parents, stand_ins.parents])[order],
        pa.concat_arrays([nodes.names, stand_ins.names]).take(order),
        np.concatenate([nodes.ids, stand_ins.ids])[order],
        np.concatenate([nodes.hits, stand_ins.hits])[order],
        np.concatenate([nodes.counts, stand_ins.counts])[order],
    )
    return both[order], merged


def _admitted(values: np.ndarray, bounds: tuple[Bound, ...]) -> np.ndarray:
    mask = np.ones(len(values), dtype=bool)
    for bound in bounds:
        if bound.op == ">":
            mask &= values > bound.value
        elif bound.op == "<":
            mask &= values < bound.value
        else:
            mask &= values == bound.value
    return mask


def _step(source: _ChildSource, element: Element, levels: list[_Level]) -> _Level:
    """The level ``element`` makes from the last of ``levels``."""
    frontier = levels[-1]
    if element.kind == "up":
        if len(levels) < 2:
            return _Level(ChildColumns.empty(), np.zeros(0, dtype=np.int64), ())
        above = levels[-2].nodes.take(frontier.src)
        return _Level(above, np.arange(len(frontier)), (above.names,) if element.show else ())
    src, children = source.children(frontier.nodes)
    rows = _select(element, src, children)
    if rows is not None:
        src, children = src[rows], children.take(rows)
    src, nodes = _with_defaults(element, len(frontier), src, children)
    keep = np.ones(len(src), dtype=bool)
    if element.skip:
        keep &= _group_ranks(src) >= element.skip
    shown: list[pa.Array] = [nodes.names] if element.show else []
    nulls: list[tuple[int, np.ndarray]] = []
    for prop in element.properties:
        values = nodes.hits if prop.name == "hits" else nodes.counts
        admitted = _admitted(values, prop.bounds)
        if element.null_ok:
            if prop.show:
                nulls.append((len(shown), ~admitted))
        else:
            keep &= admitted
        if prop.show:
            shown.append(pa.array(values, pa.int64()))
    for position, null in nulls:
        shown[position] = pa.array(shown[position].to_numpy(), pa.int64(), mask=null)
    if element.limit:
        passing = np.flatnonzero(keep)
        keep[passing[_group_ranks(src[passing]) >= element.limit]] = False
    if keep.all():
        level = _Level(nodes, src, tuple(shown))
    else:
        rows = np.flatnonzero(keep)
        level = _Level(nodes.take(rows), src[rows], tuple(c.take(rows) for c in shown))
    return _flattened(level) if element.flat else level


def _flattened(level: _Level) -> _Level:
    """One row per parent: each column's values (nulls left out) joined by ``,``."""
    if not len(level):
        return level
    firsts = np.flatnonzero(np.diff(level.src, prepend=level.src[0] - 1))
    columns = [join_groups(column, firsts) for column in level.columns]
    return _Level(level.nodes.take(firsts), level.src[firsts], tuple(columns))


def _rows(levels: list[_Level]) -> tuple[int, list[pa.Array]]:
    """The last level's row count and its rows' columns, taken back through every level."""
    parts: list[tuple[pa.Array, ...]] = [levels[-1].columns] if len(levels) > 1 else []
    rows = levels[-1].src
    for level in reversed(levels[1:-1]):
        parts.append(tuple(c.take(rows) for c in level.columns))
        rows = level.src[rows]
    return len(levels[-1]), [column for part in reversed(parts) for column in part]


def _coded_level(level: _Level) -> _Level:
    """``level`` with its text columns coded (each distinct value once)."""
    columns = tuple(
        pc.dictionary_encode(c) if pa.types.is_string(c.type) else c for c in level.columns
    )
    return _Level(level.nodes, level.src, columns)


def run_path_columns(
    tree: ShardTree,
    path: Path,
    chunk_rows: int = CHUNK_ROWS,
    first_rows: int = FIRST_CHUNK_ROWS,
    coded: bool = False,
) -> Iterator[tuple[int, list[pa.Array]]]:
    """``path``'s rows over ``tree``, in tree order, a chunk at a time: each chunk's row
    count and columns (a path that shows nothing makes rows without columns).

    With ``coded``, the text columns of the upper elements come coded (see
    :mod:`query.ops.columns`) where every element below takes all children (so about
    every row of the level is read again below it): each level's text is coded once,
    and its rows' columns are its codes taken, not its text taken again for every row
    below it (``cross``'s keys and sides). The dictionaries hold the whole level: for an
    op that reads them, not one that sends them on."""
    elements = path.elements
    if not elements:
        return
    root = tree.root
    source = _ChildSource(tree)
    start = _Level(
        ChildColumns(
            np.array([root.key[0]]),
            pa.array([root.name], pa.string()),
            np.array([root.id]),
            np.array([root.hits]),
            np.array([root.child_count]),
        ),
        np.zeros(1, dtype=np.int64),
        (),
    )

    # depth first, with a stack of its own (a path of any length runs): the levels walked
    # so far (a slice of each) and, per element being walked, its level and where its
    # slices are cut, the next slice to take and whether it is on the way to the first rows
    levels = [start]
    walking: list[tuple[_Level, list[int], list[int], bool]] = []

    def enter(first: bool) -> None:
        level = _step(source, elements[len(levels) - 1], levels)
        below = elements[len(levels) :]
        if coded and below and all(element.kind == "all" for element in below):
            level = _coded_level(level)
        # the walk to the tree's first rows takes a small slice first, so they go out
        # before the rest of the tree is read
        cuts = [0, first_rows] if first and len(level) > first_rows else [0]
        cuts += range(cuts[-1] + chunk_rows, len(level), chunk_rows)
        walking.append((level, cuts, [0], first))

    enter(True)
    while walking:
        level, cuts, taken, first = walking[-1]
        number = taken[0]
        if number == len(cuts):
            walking.pop()
            levels.pop()  # the slice this level was walked under (the start, at the end)
            continue
        taken[0] += 1
        begin = cuts[number]
        end = cuts[number + 1] if number + 1 < len(cuts) else len(level)
        part = level if begin == 0 and end == len(level) else level.slice(begin, end)
        if len(levels) == len(elements):
            yield _rows([*levels, part])
        else:
            levels.append(part)
            enter(first and number == 0)
