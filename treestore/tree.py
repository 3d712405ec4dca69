"""One shard's tree: nodes with hits and named children.

A node's children are kept by name; whenever they are listed or written they come
in the order of their names' UTF-8 bytes. Python compares ``str`` by code point,
and UTF-8 preserves code-point order, so ``sorted(names)`` is that order (UTF-16
order, as in Java, differs for characters beyond U+FFFF).

A tree is written as one msgpack document::

    {"format": "treestore-tree", "version": 1, "root": NODE}
    NODE = [hits, [name0, NODE0, name1, NODE1, ...]]   # names in byte order
"""

from __future__ import annotations

from collections.abc import Iterator

import msgpack

from treestore.errors import CorruptPageError

__all__ = ["Node", "Tree"]

_FORMAT = "treestore-tree"
_VERSION = 1


class Node:
    """A tree node: its hit count and its children by name."""

    __slots__ = ("children", "hits")

    def __init__(self, hits: int = 0) -> None:
        self.hits = hits
        self.children: dict[str, Node] = {}

    @property
    def node_count(self) -> int:
        """The number of direct children (Hydra's ``nodes`` property)."""
        return len(self.children)

    def child(self, name: str) -> Node | None:
        """Return the child called ``name``, or ``None``."""
        return self.children.get(name)

    def get_or_create(self, name: str) -> Node:
        """Return the child called ``name``, creating it (with 0 hits) if missing."""
        found = self.children.get(name)
        if found is None:
            found = self.children[name] = Node()
        return found

    def sorted_children(self) -> list[tuple[str, Node]]:
        """The children as ``(name, node)`` pairs in UTF-8 byte order of the names."""
        return sorted(self.children.items())

    def __repr__(self) -> str:
        return f"Node(hits={self.hits}, children={len(self.children)})"


class Tree:
    """A shard's tree, held in memory, with its internal root."""

    def __init__(self, root: Node | None = None) -> None:
        self.root = root if root is not None else Node()

    def walk(self) -> Iterator[tuple[tuple[str, ...], Node]]:
        """Every node but the internal root, depth first in child order, with its path."""
        stack: list[tuple[tuple[str, ...], Node]] = [((), self.root)]
        while stack:
            path, node = stack.pop()
            if path:
                yield path, node
            for name, child in reversed(node.sorted_children()):
                stack.append(((*path, name), child))

    def count_nodes(self) -> int:
        """The number of nodes, the internal root excluded."""
        total, stack = 0, [self.root]
        while stack:
            node = stack.pop()
            total += len(node.children)
            stack.extend(node.children.values())
        return total

    def to_bytes(self) -> bytes:
        """Encode the tree as one msgpack document (children in byte order)."""

        def encode(node: Node) -> list[object]:
            flat: list[object] = []
            for name, child in node.sorted_children():
                flat.append(name)
                flat.append(encode(child))
            return [node.hits, flat]

        return msgpack.packb({"format": _FORMAT, "version": _VERSION, "root": encode(self.root)})

    @classmethod
    def from_bytes(cls, data: bytes, *, where: str = "tree") -> Tree:
        """Decode a tree written by :meth:`to_bytes`; ``where`` names it in errors."""
        try:
            doc = msgpack.unpackb(data, raw=False, strict_map_key=True)
            if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
                raise ValueError("not a treestore tree")
            if doc.get("version") != _VERSION:
                raise ValueError(f"unknown tree version {doc.get('version')!r}")
            return cls(_decode(doc["root"]))
        except (ValueError, KeyError, TypeError, msgpack.UnpackException) as exc:
            raise CorruptPageError(f"{where} cannot be read: {exc}") from exc


def _decode(encoded: object) -> Node:
    if not (isinstance(encoded, list) and len(encoded) == 2):
        raise ValueError("malformed node")
    hits, flat = encoded
    if not isinstance(hits, int) or not isinstance(flat, list) or len(flat) % 2:
        raise ValueError("malformed node")
    node = Node(hits)
    for i in range(0, len(flat), 2):
        node.children[str(flat[i])] = _decode(flat[i + 1])
    return node
