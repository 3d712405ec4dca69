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
from treestore.tree import Handle, ShardTree

__all__ = ["ApplyStats", "TreeBuilder"]


@dataclass
class ApplyStats:
    """What applying records to one tree did (nodes created are counted by the tree)."""

    records: int = 0
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

    def apply(self, tree: ShardTree, record: Mapping[str, object], stats: ApplyStats) -> None:
        """Apply one record to ``tree``, starting under its internal root."""
        missed = [False]
        self._apply_list(tree, self.elements, [tree.root_handle], record, missed)
        stats.records += 1
        if missed[0]:
            stats.missed_updates += 1

    def _apply_list(
        self,
        tree: ShardTree,
        elements: Sequence[ElementSpec],
        parents: list[Handle],
        record: Mapping[str, object],
        missed: list[bool],
    ) -> list[Handle]:
        current = parents
        for element in elements:
            produced: list[Handle] = []
            for parent in current:
                produced.extend(self._apply_one(tree, element, parent, record, missed))
            current = produced
            if not current:
                break
        return current

    def _apply_one(
        self,
        tree: ShardTree,
        element: ElementSpec,
        parent: Handle,
        record: Mapping[str, object],
        missed: list[bool],
    ) -> list[Handle]:
        filter_column = self.filter_columns.get(element.where)
        if filter_column is not None and not record.get(filter_column):
            return []
        if element.kind == "branch":
            ends: list[Handle] = []
            for branch in element.branches:
                ends.extend(self._apply_list(tree, branch, [parent], record, missed))
            return ends
        if element.kind == "const":
            names: Sequence[object] = [element.value]
        else:
            value = record.get(element.key or "")
            names = value if isinstance(value, list | tuple) else [value]
        visited: list[Handle] = []
        for raw in names:
            if raw is None or raw == "":
                continue
            child = tree.visit(parent, str(raw), element.create)
            if child is None:
                missed[0] = True
                continue
            visited.append(child)
        return visited
