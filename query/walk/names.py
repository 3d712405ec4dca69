"""Node names below a path, read on the driver: what the shell completes as you type.

It runs the path over each shard's tree in this process (no Spark job: a
keystroke cannot wait for one), stops after ``parent_limit`` matching parent
nodes per shard, and lists the children whose names start with the prefix,
reading only the pages of that name range.
"""

from __future__ import annotations

from collections.abc import Iterator

from query.syntax.ast import Path
from query.walk.row_walker import matching_nodes, prefix_range
from treestore.storage.tree import Node, ShardTree
from treestore.store.versions import StoreVersion

__all__ = ["child_names"]


def _parents(tree: ShardTree, parent: Path | None, limit: int) -> Iterator[Node]:
    if parent is None or not parent.elements:
        yield tree.root
        return
    for count, node in enumerate(matching_nodes(tree, parent)):
        if count >= limit:
            return
        yield node


def child_names(
    version: StoreVersion,
    parent: Path | None,
    prefix: str = "",
    limit: int = 50,
    parent_limit: int = 200,
) -> list[str]:
    """Distinct names of the children of the nodes ``parent`` matches, starting with ``prefix``.

    Sorted, at most ``limit`` of them; ``parent=None`` lists the top nodes.
    """
    start, stop = prefix_range(prefix)
    found: set[str] = set()
    for shard in sorted(version.manifest.trees):
        tree = version.tree(shard)
        for node in _parents(tree, parent, parent_limit):
            for child in tree.children(node, start, stop):
                found.add(child.name)
                if len(found) >= 4 * limit:
                    break
    return sorted(found)[:limit]
