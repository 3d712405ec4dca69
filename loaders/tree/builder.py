"""Applying records to a shard's tree, with Hydra's path-element semantics, in batches.

Each element applies under every node the previous element produced; each
node a record visits gets hits += 1 (``count: false``: no hit); an array value
fans out into one child per element; a null or empty value, or a failing
element filter, stops that path; a value element whose field is missing uses
its ``value`` as default; ``name`` puts a const node of that name above the
element's nodes; ``create: false`` only visits children that exist (the path
stops otherwise, and the record is counted as an update that found no node);
``once`` visits a node only when it is created (the record that creates it goes
on below it, the others stop); ``data`` attachments are updated on every node
the element visits (see :mod:`treestore.attachments`).

A batch of records (Arrow columns) is applied element by element: the live
paths of all records are arrays (record, node, weight), the names an element
gives them are grouped by (node, name) with numpy, and each distinct child is
visited once per batch with the summed weight. Per-row Python is left only in
data attachments.

Records apply in their order, as Hydra applies them one after another (the caller
gives them in order: sources in job order, a source's files in path order, lines in
file order): an update-only element (``create: false``) reaches a node made in the
same batch only from the record that made it on (the node's birth, the earliest row
that visited it with ``create``; see :class:`_Batch`), and every node older than the
batch.

Records that find no node at a pending element are kept in the
:class:`~loaders.tree.pending.PendingRecords` the caller gives (see
:mod:`loaders.tree.pending`); :meth:`TreeBuilder.retry_pending` is the separate step
that retries them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from loaders.job.model import AttachmentSpec, ElementSpec
from loaders.tree.pending import (
    ELEMENT,
    LABEL,
    LOADS_LEFT,
    NAME,
    PARENT,
    PARENT_NAME,
    PARENT_OF,
    WEIGHT,
    PendingRecords,
)
from treestore import native
from treestore.attachments import NotANumber, update_attachment
from treestore.storage.tree import ANY_AGE, Handles, ShardTree

__all__ = ["ApplyStats", "TreeBuilder"]


_NO_LIMIT = 1 << 40
"""The loads left of a record whose element waits only on the watermark of its time."""
_NO_ROW = np.iinfo(np.int64).max
"""The birth of a node no row of the batch made."""


@dataclass
class ApplyStats:
    """What applying records to one tree did, in counts (nodes created are counted by the
    tree; the pending records themselves are a :class:`~loaders.tree.pending.PendingRecords`)."""

    records: int = 0
    missed_updates: int = 0
    bad_values: int = 0
    pending_buffered: int = 0  # records kept for later loads (``pending`` elements)
    pending_applied: int = 0  # waiting records whose node now exists
    pending_expired: int = 0  # waiting records dropped: loads ran out, or past the watermark


@dataclass
class _Frontier:
    """The live paths of a batch: for each, its record, the node it is at, and its weight.

    ``nodes`` index :attr:`handles`, the (distinct) nodes this level produced. ``rows``
    never decrease (records are in their order), so the first path of a group of paths
    is its earliest record's.
    """

    rows: np.ndarray
    nodes: np.ndarray
    weights: np.ndarray
    handles: Handles

    def __len__(self) -> int:
        return len(self.rows)

    def where(self, mask: np.ndarray) -> _Frontier:
        return _Frontier(self.rows[mask], self.nodes[mask], self.weights[mask], self.handles)

    def take(self, positions: np.ndarray) -> _Frontier:
        return _Frontier(
            self.rows[positions], self.nodes[positions], self.weights[positions], self.handles
        )


def _concat(parts: list[_Frontier]) -> _Frontier:
    """Frontiers of sibling branches as one (their nodes as one list, each node once)."""
    handles = Handles.concat([p.handles for p in parts])
    offsets = np.cumsum([0, *(len(p.handles) for p in parts)])
    nodes = np.concatenate([p.nodes + offset for p, offset in zip(parts, offsets, strict=False)])
    distinct, first, inverse = native.first_inverse_groups(handles.ids)
    if len(distinct) < len(handles):  # branches that reach the same node
        handles, nodes = handles.take(first), inverse[nodes]
    rows = np.concatenate([p.rows for p in parts])
    order = np.argsort(rows, kind="stable")  # back in record order
    weights = np.concatenate([p.weights for p in parts])
    return _Frontier(rows[order], nodes[order], weights[order], handles)


@dataclass(frozen=True)
class _Retry:
    """What a batch of retried pending records is: where they stopped, and whether a record
    that still finds no node loses one of its loads."""

    place: str
    costs_load: bool


class _Batch:
    """One batch being applied: its columns, which records missed a node, and when each
    node it made was made.

    Its records apply in their order (row order), as one after another: an update-only
    visit of row ``r`` reaches a node made in this batch only if a row up to ``r`` made
    it (its *birth*, the earliest row that visited it with ``create``). Nodes older than
    the batch are reached if their id is below ``created_before``. ``retry``: set when
    the batch retries pending records. ``pending``: where records that find no node at a
    pending element are kept.
    """

    def __init__(
        self,
        tree: ShardTree,
        table: pa.Table,
        stats: ApplyStats,
        created_before: int,
        retry: _Retry | None = None,
        pending: PendingRecords | None = None,
    ) -> None:
        self.tree, self.table, self.stats = tree, table, stats
        self.created_before, self.retry, self.pending = created_before, retry, pending
        self.missed = np.zeros(table.num_rows, dtype=bool)
        self._flags: dict[str, np.ndarray] = {}
        self.first_id = tree.next_id  # the nodes this batch makes have this id or more
        self._births = np.zeros(0, dtype=np.int64)

    def born(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Row ``rows[i]`` visited node ``ids[i]`` with ``create``: a node this batch made
        is born at the earliest such row."""
        new = ids >= self.first_id
        if not new.any():
            return
        at = ids[new] - self.first_id
        if int(at.max()) >= len(self._births):
            grown = np.full(max(int(at.max()) + 1, 2 * len(self._births)), _NO_ROW, np.int64)
            grown[: len(self._births)] = self._births
            self._births = grown
        self._births[at] = np.minimum(self._births[at], rows[new])

    def sees(self, ids: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Whether row ``rows[i]`` reaches node ``ids[i]`` (-1: none) with an update-only
        visit: an older node below ``created_before``, or one born at that row or before."""
        seen = (ids >= 0) & (ids < self.first_id) & (ids < self.created_before)
        new = np.flatnonzero(ids >= self.first_id)
        if len(new):
            at = ids[new] - self.first_id
            known = at < len(self._births)
            births = np.full(len(new), _NO_ROW, np.int64)
            births[known] = self._births[at[known]]
            seen[new] = births <= rows[new]
        return seen

    def flags(self, name: str) -> np.ndarray:
        """A boolean column (an element filter's verdicts) as numpy, nulls false."""
        found = self._flags.get(name)
        if found is None:
            column = pc.fill_null(self.table.column(name), False)
            found = self._flags[name] = column.to_numpy(zero_copy_only=False).astype(bool)
        return found


class TreeBuilder:
    """Applies records (tuples of :attr:`fields` values) to a tree's root."""

    def __init__(self, elements: Sequence[ElementSpec]) -> None:
        self.elements = tuple(elements)
        # Element filters are computed in Spark, one boolean column per filtered
        # element, named in walk order; elements are told apart by their place
        # in the job file (``where``), which survives pickling to the tasks.
        walked = [found for element in self.elements for found in element.walk()]
        self.filters = [found for found in walked if found.filter is not None]
        self.filter_columns = {
            found.where: f"__element_filter_{i}" for i, found in enumerate(self.filters)
        }
        keys = {found.key for found in walked if found.key is not None}
        keys |= {a.key for found in walked for a in found.data if a.key is not None}
        timed = [found for found in walked if found.pending_time is not None]
        self.pending_time = timed[0].pending_time if timed else None
        """The time field pending records wait on (one per job), if any."""
        self.pending_delays = {found.place: found.pending_delay for found in timed}
        """Each time-waiting pending element's delay, by place."""
        keys |= {self.pending_time} if self.pending_time else set()
        self.key_fields = sorted(keys)
        self.fields = [*self.key_fields, *self.filter_columns.values()]
        """The record layout :meth:`apply_batch` takes: key fields, then filter columns."""
        self.attachments = [a for found in walked for a in found.data]
        self._resume = _resume_points(self.elements, ())
        """For each pending element (by place): the element and the lists that follow it."""
        self.keeps_pending = bool(self._resume)
        """Whether some element keeps the records that find no node (``pending``)."""
        plain = json.dumps([_canonical(e) for e in self.elements], sort_keys=True)
        self.fingerprint = xxhash.xxh64_hexdigest(plain.encode())
        """Identifies the tree's elements (kept with pending records): their settings that
        differ from the defaults, by place, whatever path names the job file."""
        self.time_only = {found.place for found in timed if not found.pending_loads}
        """Pending elements that wait only on the watermark."""

    def record(self, values: dict[str, Any]) -> tuple[Any, ...]:
        """A record tuple from field values (missing ones are null); for tests and tools."""
        return tuple(values.get(name) for name in self.fields)

    def apply_batch(
        self,
        tree: ShardTree,
        records: Sequence[Sequence[Any]],
        weights: Sequence[int],
        stats: ApplyStats,
        created_before: int = ANY_AGE,
        pending: PendingRecords | None = None,
    ) -> None:
        """Apply record tuples (each standing for ``weights[i]`` identical ones) to ``tree``
        (see :meth:`apply_table`)."""
        columns = {}
        for i, name in enumerate(self.fields):
            values = [r[i] for r in records]
            if name in self.filter_columns.values():
                columns[name] = pa.array(values, pa.bool_())
            elif any(isinstance(v, list | tuple) for v in values):
                columns[name] = pa.array(
                    [
                        list(v) if isinstance(v, list | tuple) else [v] if v is not None else None
                        for v in values
                    ],
                    pa.list_(pa.string()),
                )
            else:
                columns[name] = pa.array(values, pa.string())
        table = pa.table(columns) if columns else pa.table({"_": pa.nulls(len(records))})
        weights_array = np.asarray(weights, dtype=np.int64)
        self.apply_table(tree, table, weights_array, stats, created_before, pending)

    def apply_table(
        self,
        tree: ShardTree,
        table: pa.Table,
        weights: np.ndarray | None,
        stats: ApplyStats,
        created_before: int = ANY_AGE,
        pending: PendingRecords | None = None,
    ) -> None:
        """Apply the records of ``table`` (columns :attr:`fields`, and where each was read,
        :data:`~loaders.tree.pending.ORIGIN`, if given: kept with pending records) to ``tree``.

        ``weights`` says how many identical records each row stands for (default 1).
        Update-only elements skip nodes with an id of ``created_before`` or more (those the
        records' source made: give the tree's next node id when the source began). Records
        that find no node at a pending element are kept in ``pending`` (needed when the
        builder :attr:`keeps_pending`).
        """
        size = table.num_rows
        if weights is None:
            weights = np.ones(size, dtype=np.int64)
        batch = _Batch(tree, table, stats, created_before, pending=pending)
        start = _Frontier(
            np.arange(size, dtype=np.int64),
            np.zeros(size, dtype=np.int64),
            weights,
            Handles.of([tree.root_handle]),
        )
        self._apply_list(batch, self.elements, start)
        stats.records += int(weights.sum())
        stats.missed_updates += int(weights[batch.missed].sum())

    def _apply_list(
        self, batch: _Batch, elements: Sequence[ElementSpec], frontier: _Frontier
    ) -> _Frontier:
        for element in elements:
            if not len(frontier):
                break
            frontier = self._apply_one(batch, element, frontier)
        return frontier

    def _apply_one(self, batch: _Batch, element: ElementSpec, frontier: _Frontier) -> _Frontier:
        filter_column = self.filter_columns.get(element.where)
        if filter_column is not None:
            frontier = frontier.where(batch.flags(filter_column)[frontier.rows])
        if element.label is not None and len(frontier):
            frontier = self._visit(batch, element, frontier, element.label, label=True)
        return self._apply_own(batch, element, frontier)

    def _apply_own(self, batch: _Batch, element: ElementSpec, frontier: _Frontier) -> _Frontier:
        """The element's own nodes (after its filter and its ``name`` node)."""
        if element.kind == "branch":
            parts = [self._apply_list(batch, branch, frontier) for branch in element.branches]
            return _concat(parts)
        if element.kind == "const":
            assert element.value is not None
            return self._visit(batch, element, frontier, element.value)
        values = batch.table.column(element.key or "").take(pa.array(frontier.rows))
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if pa.types.is_list(values.type):
            if element.value is not None:  # a null or empty list takes the default
                missing = pc.fill_null(pc.equal(pc.list_value_length(values), 0), True)
                values = pc.if_else(missing, pa.scalar([element.value], values.type), values)
            positions = pc.list_parent_indices(values).to_numpy()
            frontier = frontier.take(positions)
            values = pc.list_flatten(values)
        elif element.value is not None:
            values = pc.fill_null(values, element.value)
        return self._visit(batch, element, frontier, values)

    def _visit(
        self,
        batch: _Batch,
        element: ElementSpec,
        frontier: _Frontier,
        names: pa.Array | str,
        label: bool = False,
    ) -> _Frontier:
        """Visit each distinct (node, name) once, for all the paths that lead to it
        (``names``: each path's, or one for all)."""
        codes, words, frontier = _coded_names(names, frontier)
        if not len(frontier):
            return frontier
        groups, first, inverse = native.pair_groups(
            frontier.nodes, codes, len(frontier.handles), len(words)
        )
        once = element.once and not label
        parent_of, word_of = np.divmod(groups, len(words))
        group_names = words.take(word_of)
        weights = frontier.weights if element.count else np.zeros(len(frontier), np.int64)
        if element.create or once:
            totals = np.bincount(inverse, weights=weights, minlength=len(groups))
            ids = batch.tree.visit_many(
                frontier.handles, parent_of, group_names, element.create,
                totals.astype(np.int64), once, batch.created_before,
            )  # fmt: skip
            batch.born(ids, frontier.rows[first])  # ``first``: each group's earliest row
            seen = np.ones(len(frontier), dtype=bool)
        else:  # update-only: a row reaches only the nodes made before it
            ids, seen = self._visit_existing(
                batch, frontier, inverse, parent_of, group_names, weights
            )
        reached_groups = np.flatnonzero(ids >= 0)
        children = Handles(
            ids[reached_groups],
            frontier.handles.ids[parent_of[reached_groups]],
            group_names.take(reached_groups),
        )
        outcome = np.full(len(groups), -1, dtype=np.int64)
        outcome[reached_groups] = np.arange(len(children))
        reached = outcome[inverse]
        found = (reached >= 0) & seen
        if element.pending:
            lost = ~found
            self._keep_pending(batch, element, frontier.where(lost), words.take(codes[lost]), label)
        elif not once:
            batch.missed[frontier.rows[~found]] = True
        if once:  # of the paths to a created node, only the first goes on, with weight 1
            keep = np.sort(first[outcome >= 0])
            result = _Frontier(
                frontier.rows[keep], reached[keep], np.ones(len(keep), np.int64), children
            )
        else:
            result = _Frontier(
                frontier.rows[found], reached[found], frontier.weights[found], children
            )
        if element.data and not label:
            self._update_data(batch, element.data, result)
        return result

    @staticmethod
    def _visit_existing(
        batch: _Batch,
        frontier: _Frontier,
        inverse: np.ndarray,
        parent_of: np.ndarray,
        names: pa.Array,
        weights: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Update-only visits of the groups of paths (``inverse``: each path's group) to
        the children ``names[g]`` of ``frontier.handles[parent_of[g]]``: each path reaches
        its child only if the child existed when its record came (:meth:`_Batch.sees`).
        Returns each group's child id (-1: no path reached it) and which paths reached their
        child."""
        handles = frontier.handles
        known = batch.tree.find_many(handles, parent_of, names)
        seen = batch.sees(known[inverse], frontier.rows)
        totals = np.bincount(inverse[seen], weights=weights[seen], minlength=len(names))
        visited = np.bincount(inverse[seen], minlength=len(names)) > 0
        ids = np.full(len(names), -1, dtype=np.int64)
        picked = np.flatnonzero(visited)
        if len(picked):
            ids[picked] = batch.tree.visit_many(
                handles, parent_of[picked], names.take(picked), False,
                totals[picked].astype(np.int64), False, ANY_AGE, known[picked],
            )  # fmt: skip
        return ids, seen

    def _keep_pending(
        self,
        batch: _Batch,
        element: ElementSpec,
        missed: _Frontier,
        names: pa.Array,
        label: bool,
    ) -> None:
        """Keep the paths that found no node at a pending element (or at the node its
        ``name`` puts above them) for later loads (a retried record loses one of its loads;
        one with none left expires)."""
        if not len(missed):
            return
        assert batch.pending is not None, "records that wait need a PendingRecords to go to"
        retried = batch.retry is not None and batch.retry.place == element.place
        if retried:
            assert batch.retry is not None
            left = batch.table.column(LOADS_LEFT).to_numpy()[missed.rows]
            left = left - 1 if batch.retry.costs_load else left
        else:
            left = np.full(len(missed), element.pending_loads or _NO_LIMIT, dtype=np.int64)
        kept, expired = batch.pending.keep(
            batch.table.take(pa.array(missed.rows)),
            self.fields,
            element.place,
            label,
            missed.handles.take(missed.nodes),
            names,
            missed.weights,
            left,
        )
        batch.stats.pending_expired += expired
        if not retried:
            batch.stats.pending_buffered += kept

    def retry_pending(
        self,
        tree: ShardTree,
        table: pa.Table,
        fingerprint: str,
        stats: ApplyStats,
        costs_load: bool = True,
        created_before: int = ANY_AGE,
        *,
        pending: PendingRecords,
    ) -> None:
        """Retry the pending records of earlier loads (rows as :mod:`loaders.tree.pending` stores
        them, kept under the tree whose :attr:`fingerprint` is given) against ``tree``: those
        whose node exists now go on through the rest of the tree; the others wait for the
        next load (in ``pending``), or expire (into ``pending`` too). Call it after every
        source of the load, with ``created_before`` the tree's next node id then.
        ``costs_load`` false: records kept in this very load, retried at its end, keep their
        loads."""
        elements = table.column(ELEMENT)
        for where in pc.unique(elements).to_pylist():
            part = table.filter(pc.equal(elements, where))
            weights = part.column(WEIGHT).to_numpy()
            at_label = where.endswith(LABEL)
            resume = self._resume.get(where.removesuffix(LABEL) if at_label else where)
            if resume is None or fingerprint != self.fingerprint:
                why = "the job's tree changed"
                stats.pending_expired += pending.expire(part, self.fields, why, where)
                continue
            element, rest = resume
            retry = _Retry(element.place, costs_load)
            batch = _Batch(tree, part, stats, created_before, retry, pending)
            parents = part.column(PARENT).to_numpy()
            ids, first, nodes = native.first_inverse_groups(parents)
            handles = Handles(
                ids,
                part.column(PARENT_OF).to_numpy()[first],
                part.column(PARENT_NAME).take(pa.array(first)).combine_chunks(),
            )
            frontier = _Frontier(np.arange(part.num_rows), nodes, weights, handles)
            names = part.column(NAME).combine_chunks()
            frontier = self._visit(batch, element, frontier, names, label=at_label)
            if at_label:
                frontier = self._apply_own(batch, element, frontier)
            stats.pending_applied += int(frontier.weights.sum())
            for elements_after in rest:
                frontier = self._apply_list(batch, elements_after, frontier)
            stats.missed_updates += int(weights[batch.missed].sum())

    def _update_data(
        self, batch: _Batch, attachments: tuple[AttachmentSpec, ...], frontier: _Frontier
    ) -> None:
        """Update the attachments of every node of ``frontier`` with its paths' records."""
        members: dict[int, list[int]] = {}
        for position, node in enumerate(frontier.nodes.tolist()):
            members.setdefault(node, []).append(position)
        rows = pa.array(frontier.rows)
        values = {
            spec.key: batch.table.column(spec.key).take(rows).to_pylist()
            for spec in attachments
            if spec.key is not None
        }
        weights = frontier.weights.tolist()
        for node, positions in members.items():

            def update(data: dict[str, Any], positions: list[int] = positions) -> None:
                for spec in attachments:
                    column = values.get(spec.key) if spec.key is not None else None
                    settings, stored = spec.settings, data.get(spec.name)
                    state = stored[1] if stored is not None else None
                    for p in positions:
                        value = column[p] if column is not None else None
                        found = (
                            list(value)
                            if isinstance(value, list | tuple)
                            else ([] if value is None or value == "" else [value])
                        )
                        try:
                            state = update_attachment(spec.kind, state, found, weights[p], settings)
                        except NotANumber:
                            batch.stats.bad_values += weights[p]
                    data[spec.name] = [spec.kind, state]

            batch.tree.update_data(frontier.handles[node], update)


def _coded_names(
    names: pa.Array | str, frontier: _Frontier
) -> tuple[np.ndarray, pa.Array, _Frontier]:
    """Each path's name as a code into distinct words, and the paths that have a name (a
    null or empty name stops a path). One name for all paths is coded without hashing."""
    if isinstance(names, str):
        if not names:
            return (
                np.zeros(0, np.int64),
                pa.array([], pa.string()),
                frontier.take(np.zeros(0, np.int64)),
            )
        return np.zeros(len(frontier), np.int64), pa.array([names], pa.string()), frontier
    present = pc.fill_null(pc.not_equal(names, ""), False).to_numpy(zero_copy_only=False)
    if not present.all():
        frontier = frontier.where(present)
        names = names.filter(pa.array(present))
    if isinstance(names, pa.ChunkedArray):
        names = names.combine_chunks()
    encoded = pc.dictionary_encode(names)
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, encoded.dictionary, frontier


def _resume_points(
    elements: Sequence[ElementSpec], after: tuple[Sequence[ElementSpec], ...]
) -> dict[str, tuple[ElementSpec, tuple[Sequence[ElementSpec], ...]]]:
    """Each pending element (by place) with the element lists that follow it: the rest of
    its own list, then the rest of each enclosing list after its branch."""
    points = {}
    for i, element in enumerate(elements):
        rest = (elements[i + 1 :], *after)
        if element.pending:
            points[element.place] = (element, rest)
        for branch in element.branches:
            points.update(_resume_points(branch, rest))
    return points


def _canonical(value: Any) -> Any:
    """A job's tree settings as plain data: dataclass fields that differ from their defaults
    (so that a new, defaulted setting does not change old fingerprints), the element's
    file-specific ``where`` left out."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            spec.name: _canonical(getattr(value, spec.name))
            for spec in dataclasses.fields(value)
            if spec.name != "where"
            and (spec.default is dataclasses.MISSING or getattr(value, spec.name) != spec.default)
        }
    if isinstance(value, tuple | list):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    return value if isinstance(value, str | int | float | bool) or value is None else repr(value)
