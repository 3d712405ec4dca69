"""Running a path over one tree: the rows it selects, in tree order.

Each element applies under every node the previous element produced. ``+``
and ``*`` take every child in UTF-8 byte order of names; a name list looks its
names up in the order given. A node is kept when every bound of every
property admits it; shown names and shown properties become the row's columns.
"""

from __future__ import annotations

from collections.abc import Iterator

from query.ast import Element, Path
from treestore.tree import Node

__all__ = ["Value", "run_path"]

Value = str | int | float | None


def _candidates(element: Element, node: Node) -> Iterator[tuple[str, Node]]:
    if element.kind == "all":
        yield from node.sorted_children()
        return
    for name in element.names:
        child = node.child(name)
        if child is not None:
            yield name, child


def _columns(element: Element, name: str, node: Node) -> tuple[Value, ...] | None:
    """The columns ``node`` adds to a row, or ``None`` when a bound rejects it."""
    shown: list[Value] = [name] if element.show else []
    for prop in element.properties:
        value = node.hits if prop.name == "hits" else node.node_count
        if not all(bound.admits(value) for bound in prop.bounds):
            return None
        if prop.show:
            shown.append(value)
    return tuple(shown)


def run_path(root: Node, path: Path) -> Iterator[tuple[Value, ...]]:
    """Yield one row per match of ``path`` under ``root`` (the tree's internal root)."""
    elements = path.elements
    last = len(elements) - 1

    def walk(node: Node, depth: int, row: tuple[Value, ...]) -> Iterator[tuple[Value, ...]]:
        element = elements[depth]
        for name, child in _candidates(element, node):
            added = _columns(element, name, child)
            if added is None:
                continue
            if depth == last:
                yield row + added
            else:
                yield from walk(child, depth + 1, row + added)

    yield from walk(root, 0, ())
