"""Applying records to a shard's tree, with Hydra's path-element semantics.

Each element applies under every node the previous element produced; each
node a record visits gets hits += 1; an array value fans out into one child per
element; a null or empty value, or a failing element filter, stops that path;
``create: false`` only visits children that exist (the path stops otherwise,
and the record is counted as an update that found no node).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loaders.job import ElementSpec
from treestore.tree import Node

__all__ = ["ApplyStats", "TreeBuilder"]


@dataclass
class ApplyStats:
    """What applying records to one tree did."""

    records: int = 0
    nodes_created: int = 0
    missed_updates: int = 0


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
        self.key_fields = sorted(
            {found.key for e in self.elements for found in e.walk() if found.key is not None}
        )

    def apply(self, root: Node, record: Mapping[str, object], stats: ApplyStats) -> None:
        """Apply one record under ``root``."""
        missed = [False]
        self._apply_list(self.elements, [root], record, stats, missed)
        stats.records += 1
        if missed[0]:
            stats.missed_updates += 1

    def _apply_list(
        self,
        elements: Sequence[ElementSpec],
        parents: list[Node],
        record: Mapping[str, object],
        stats: ApplyStats,
        missed: list[bool],
    ) -> list[Node]:
        current = parents
        for element in elements:
            produced: list[Node] = []
            for parent in current:
                produced.extend(self._apply_one(element, parent, record, stats, missed))
            current = produced
            if not current:
                break
        return current

    def _apply_one(
        self,
        element: ElementSpec,
        parent: Node,
        record: Mapping[str, object],
        stats: ApplyStats,
        missed: list[bool],
    ) -> list[Node]:
        filter_column = self.filter_columns.get(element.where)
        if filter_column is not None and not record.get(filter_column):
            return []
        if element.kind == "branch":
            ends: list[Node] = []
            for branch in element.branches:
                ends.extend(self._apply_list(branch, [parent], record, stats, missed))
            return ends
        if element.kind == "const":
            names: Sequence[object] = [element.value]
        else:
            value = record.get(element.key or "")
            names = value if isinstance(value, list | tuple) else [value]
        visited: list[Node] = []
        for raw in names:
            if raw is None or raw == "":
                continue
            name = str(raw)
            child = parent.child(name)
            if child is None:
                if not element.create:
                    missed[0] = True
                    continue
                child = parent.get_or_create(name)
                stats.nodes_created += 1
            child.hits += 1
            visited.append(child)
        return visited
