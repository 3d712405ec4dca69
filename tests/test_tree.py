"""The in-memory tree, its msgpack form, and damaged tree files."""

from __future__ import annotations

import pytest

from treestore.errors import CorruptPageError
from treestore.tree import Node, Tree


def _tree() -> Tree:
    tree = Tree()
    root = tree.root.get_or_create("root")
    for name in ["b", "a", "\uff61", "\U0001f600", "B", "é"]:
        root.get_or_create(name).hits += 1
    root.hits = 6
    return tree


def test_children_come_in_utf8_byte_order() -> None:
    names = [name for name, _ in _tree().root.child("root").sorted_children()]  # type: ignore[union-attr]
    assert names == sorted(names, key=lambda n: n.encode("utf-8"))
    # U+FF61 sorts before U+1F600 in UTF-8 (and code points), after it in UTF-16.
    assert names.index("\uff61") < names.index("\U0001f600")


def test_round_trip_keeps_hits_children_and_order() -> None:
    tree = _tree()
    again = Tree.from_bytes(tree.to_bytes())
    assert [(p, n.hits) for p, n in again.walk()] == [(p, n.hits) for p, n in tree.walk()]
    assert again.count_nodes() == tree.count_nodes() == 7


def test_node_count_and_lookup() -> None:
    node = Node()
    assert node.child("x") is None
    child = node.get_or_create("x")
    assert node.get_or_create("x") is child and node.node_count == 1


@pytest.mark.parametrize("damage", [b"", b"\x00garbage", b"\x81\xa6format\xa4nope"])
def test_damaged_bytes_raise_corrupt_page_error(damage: bytes) -> None:
    with pytest.raises(CorruptPageError, match="shard 3"):
        Tree.from_bytes(damage, where="shard 3")


def test_truncated_tree_is_detected() -> None:
    data = _tree().to_bytes()
    with pytest.raises(CorruptPageError):
        Tree.from_bytes(data[: len(data) // 2])
