"""Applying records to a shard's tree, with Hydra's path-element semantics.

Each element applies under every node the previous element produced; each
node a record visits gets hits += 1 (``count: false``: no hit); an array value
fans out into one child per element; a null or empty value, or a failing
element filter, stops that path; a value element whose field is missing uses
its ``value`` as default; ``name`` puts a const node of that name above the
element's nodes; ``create: false`` only visits children that exist (the path
stops otherwise, and the record is counted as an update that found no node);
``once`` visits a node only when this record creates it; ``data`` attachments
are updated on every node the element visits (see :mod:`treestore.attachments`).

Records arrive aggregated: identical records are applied once with a
``weight`` (how many they are), which adds ``weight`` hits at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loaders.job import AttachmentSpec, ElementSpec
from treestore.attachments import NotANumber, update_attachment
from treestore.tree import Handle, ShardTree

__all__ = ["ApplyStats", "TreeBuilder"]


@dataclass
class ApplyStats:
    """What applying records to one tree did (nodes created are counted by the tree)."""

    records: int = 0
    missed_updates: int = 0
    bad_values: int = 0


class _Visit:
    """One record's application: the record, its weight and whether an update missed."""

    __slots__ = ("missed", "record", "stats", "tree", "weight")

    def __init__(
        self, tree: ShardTree, record: Mapping[str, Any], weight: int, stats: ApplyStats
    ) -> None:
        self.tree, self.record, self.weight, self.stats = tree, record, weight, stats
        self.missed = False


class TreeBuilder:
    """Applies records (mappings of field name -> value) to a tree's root."""

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
        self.attachments = [a for found in walked for a in found.data]

    def apply(
        self, tree: ShardTree, record: Mapping[str, Any], stats: ApplyStats, weight: int = 1
    ) -> None:
        """Apply ``weight`` identical records to ``tree``, starting under its internal root."""
        visit = _Visit(tree, record, weight, stats)
        self._apply_list(visit, self.elements, [tree.root_handle], weight)
        stats.records += weight
        if visit.missed:
            stats.missed_updates += weight

    def _apply_list(
        self, visit: _Visit, elements: Sequence[ElementSpec], parents: list[Handle], weight: int
    ) -> list[Handle]:
        current = parents
        for element in elements:
            produced: list[Handle] = []
            for parent in current:
                produced.extend(self._apply_one(visit, element, parent, weight))
            if element.once:
                weight = 1  # of identical records, only the one that created the node goes on
            current = produced
            if not current:
                break
        return current

    def _apply_one(
        self, visit: _Visit, element: ElementSpec, parent: Handle, weight: int
    ) -> list[Handle]:
        filter_column = self.filter_columns.get(element.where)
        record = visit.record
        if filter_column is not None and not record.get(filter_column):
            return []
        hits = weight if element.count else 0
        if element.label is not None:
            labelled = visit.tree.visit(parent, element.label, element.create, hits)
            if labelled is None:
                visit.missed = True
                return []
            parent = labelled
        if element.kind == "branch":
            ends: list[Handle] = []
            for branch in element.branches:
                ends.extend(self._apply_list(visit, branch, [parent], weight))
            return ends
        if element.kind == "const":
            names: Sequence[Any] = (element.value,)
        else:
            value = record.get(element.key or "")
            if value is None and element.value is not None:
                value = element.value
            names = value if isinstance(value, list | tuple) else (value,)
        visited: list[Handle] = []
        for raw in names:
            if raw is None or raw == "":
                continue
            child = visit.tree.visit(parent, str(raw), element.create, hits, element.once)
            if child is None:
                if not element.once:
                    visit.missed = True
                continue
            if element.data:
                self._update_data(visit, child, element.data, 1 if element.once else weight)
            visited.append(child)
        return visited

    def _update_data(
        self, visit: _Visit, handle: Handle, attachments: tuple[AttachmentSpec, ...], weight: int
    ) -> None:
        def update(data: dict[str, Any]) -> None:
            for spec in attachments:
                value = visit.record.get(spec.key) if spec.key is not None else None
                values = (
                    list(value)
                    if isinstance(value, list | tuple)
                    else ([] if value is None or value == "" else [value])
                )
                try:
                    data[spec.name] = update_attachment(
                        spec.kind, data.get(spec.name), values, weight, spec.settings
                    )
                except NotANumber:
                    visit.stats.bad_values += weight

        visit.tree.update_data(handle, update)
