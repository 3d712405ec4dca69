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

A batch of records (identical ones already merged, with a weight) is applied
element by element: all records' visits of one element are grouped by
(parent, name), so each node is visited once per batch with the summed weight.

An update-only element (``create: false``) sees the nodes of earlier sources
and earlier loads, not nodes created by the source being applied: records of
one source reach a shard in no fixed order, and this keeps the result
independent of it. (:meth:`TreeBuilder.start_source` marks where a source begins.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loaders.job import AttachmentSpec, ElementSpec
from treestore.attachments import NotANumber, update_attachment
from treestore.tree import Handle, ShardTree

__all__ = ["ApplyStats", "TreeBuilder"]

Frontier = list[tuple[int, Handle, int]]
"""(record index, node the record is at, weight) for every live path of a batch."""


@dataclass
class ApplyStats:
    """What applying records to one tree did (nodes created are counted by the tree)."""

    records: int = 0
    missed_updates: int = 0
    bad_values: int = 0


class _Batch:
    """One batch being applied: its records, weights, and which of them missed a node."""

    __slots__ = ("missed", "records", "stats", "tree", "weights")

    def __init__(
        self,
        tree: ShardTree,
        records: Sequence[Sequence[Any]],
        weights: Sequence[int],
        stats: ApplyStats,
    ) -> None:
        self.tree, self.records, self.weights, self.stats = tree, records, weights, stats
        self.missed = [False] * len(records)


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
        self.key_fields = sorted(keys)
        self.fields = [*self.key_fields, *self.filter_columns.values()]
        """The record layout :meth:`apply_batch` takes: key fields, then filter columns."""
        self._index = {name: i for i, name in enumerate(self.fields)}
        self.attachments = [a for found in walked for a in found.data]

    def record(self, values: dict[str, Any]) -> tuple[Any, ...]:
        """A record tuple from field values (missing ones are null); for tests and tools."""
        return tuple(values.get(name) for name in self.fields)

    def start_source(self, tree: ShardTree) -> None:
        """Mark the start of a new source: update-only elements skip nodes made after this."""
        tree.update_floor = tree.next_id

    def apply_batch(
        self,
        tree: ShardTree,
        records: Sequence[Sequence[Any]],
        weights: Sequence[int],
        stats: ApplyStats,
    ) -> None:
        """Apply ``records`` (each standing for ``weights[i]`` identical ones) to ``tree``."""
        batch = _Batch(tree, records, weights, stats)
        root = tree.root_handle
        self._apply_list(batch, self.elements, [(i, root, w) for i, w in enumerate(weights)])
        stats.records += sum(weights)
        stats.missed_updates += sum(w for w, m in zip(weights, batch.missed, strict=True) if m)

    def _apply_list(
        self, batch: _Batch, elements: Sequence[ElementSpec], frontier: Frontier
    ) -> Frontier:
        for element in elements:
            if not frontier:
                break
            frontier = self._apply_one(batch, element, frontier)
        return frontier

    def _visit_groups(
        self,
        batch: _Batch,
        element: ElementSpec,
        groups: dict[tuple[Handle, str], list[tuple[int, int]]],
        label: bool = False,
    ) -> Frontier:
        """Visit each (parent, name) once for all its (record, weight) members."""
        tree = batch.tree
        once = element.once and not label
        produced: Frontier = []
        for (parent, name), members in groups.items():
            hits = sum(w for _, w in members) if element.count else 0
            child = tree.visit(parent, name, element.create, hits, once)
            if child is None:
                if not once:
                    for i, _ in members:
                        batch.missed[i] = True
                continue
            if once:  # only the first record created it; it goes on with weight 1
                members = members[:1]
                members[0] = (members[0][0], 1)
            if element.data and not label:
                self._update_data(batch, child, element.data, members)
            produced.extend((i, child, w) for i, w in members)
        return produced

    def _apply_one(self, batch: _Batch, element: ElementSpec, frontier: Frontier) -> Frontier:
        records = batch.records
        filter_column = self.filter_columns.get(element.where)
        if filter_column is not None:
            at = self._index[filter_column]
            frontier = [entry for entry in frontier if records[entry[0]][at]]
        if element.label is not None:
            labels: dict[tuple[Handle, str], list[tuple[int, int]]] = {}
            for i, parent, w in frontier:
                labels.setdefault((parent, element.label), []).append((i, w))
            frontier = self._visit_groups(batch, element, labels, label=True)
        if element.kind == "branch":
            ends: Frontier = []
            for branch in element.branches:
                ends.extend(self._apply_list(batch, branch, frontier))
            return ends
        groups: dict[tuple[Handle, str], list[tuple[int, int]]] = {}
        if element.kind == "const":
            assert element.value is not None
            for i, parent, w in frontier:
                groups.setdefault((parent, element.value), []).append((i, w))
        else:
            at = self._index[element.key or ""]
            default = element.value
            for i, parent, w in frontier:
                value = records[i][at]
                if value is None:
                    value = default
                if isinstance(value, tuple | list):
                    for name in value:
                        if name is not None and name != "":
                            groups.setdefault((parent, str(name)), []).append((i, w))
                elif value is not None and value != "":
                    groups.setdefault((parent, str(value)), []).append((i, w))
        return self._visit_groups(batch, element, groups)

    def _update_data(
        self,
        batch: _Batch,
        handle: Handle,
        attachments: tuple[AttachmentSpec, ...],
        members: list[tuple[int, int]],
    ) -> None:
        def update(data: dict[str, Any]) -> None:
            for spec in attachments:
                at = self._index[spec.key] if spec.key is not None else None
                settings = spec.settings
                state = data.get(spec.name)
                for i, weight in members:
                    value = batch.records[i][at] if at is not None else None
                    values = (
                        list(value)
                        if isinstance(value, list | tuple)
                        else ([] if value is None or value == "" else [value])
                    )
                    try:
                        state = update_attachment(spec.kind, state, values, weight, settings)
                    except NotANumber:
                        batch.stats.bad_values += weight
                data[spec.name] = state

        batch.tree.update_data(handle, update)
