"""Running a path over one tree: the rows it selects, in tree order.

Each element applies under every node the previous element produced. ``+``
and ``*`` take every child in UTF-8 byte order of names; a name list looks its
names up in the order given. A node is kept when every bound of every
property admits it; shown names and shown properties become the row's columns.
"""

from __future__ import annotations

from collections.abc import Iterator

from query.ast import Element, Path
from treestore.tree import Node, ShardTree

__all__ = ["Value", "matching_nodes", "run_path"]

Value = str | int | float | None


def _candidates(tree: ShardTree, element: Element, node: Node) -> Iterator[Node]:
    if element.kind == "all":
        yield from tree.children(node)
        return
    for name in element.names:
        child = tree.child(node, name)
        if child is not None:
            yield child


def _columns(element: Element, node: Node) -> tuple[Value, ...] | None:
    """The columns ``node`` adds to a row, or ``None`` when a bound rejects it."""
    shown: list[Value] = [node.name] if element.show else []
    for prop in element.properties:
        value = node.hits if prop.name == "hits" else node.node_count
        if not all(bound.admits(value) for bound in prop.bounds):
            return None
        if prop.show:
            shown.append(value)
    return tuple(shown)


def run_path(tree: ShardTree, path: Path) -> Iterator[tuple[Value, ...]]:
    """Yield one row per match of ``path`` in ``tree``, starting under its internal root."""
    elements = path.elements
    last = len(elements) - 1

    def walk(node: Node, depth: int, row: tuple[Value, ...]) -> Iterator[tuple[Value, ...]]:
        element = elements[depth]
        for child in _candidates(tree, element, node):
            added = _columns(element, child)
            if added is None:
                continue
            if depth == last:
                yield row + added
            else:
                yield from walk(child, depth + 1, row + added)

    yield from walk(tree.root, 0, ())


def matching_nodes(tree: ShardTree, path: Path) -> Iterator[Node]:
    """The nodes the last element of ``path`` reaches (bounds applied), in tree order."""
    elements = path.elements
    last = len(elements) - 1

    def walk(node: Node, depth: int) -> Iterator[Node]:
        element = elements[depth]
        for child in _candidates(tree, element, node):
            if _columns(element, child) is None:
                continue
            if depth == last:
                yield child
            else:
                yield from walk(child, depth + 1)

    if elements:
        yield from walk(tree.root, 0)
