"""Paths of any length walk (a path of thousands of elements once ended in a
RecursionError in both engines), and both engines give the same rows."""

from __future__ import annotations

import pytest

from query.syntax.path_parser import parse_path
from query.walk.column_engine import run_path_columns
from query.walk.row_walker import run_path
from treestore.storage.pagestore import MemoryPageStore
from treestore.storage.tree import ShardTree


def _tree(*paths: list[str]) -> ShardTree:
    store = MemoryPageStore()
    tree = ShardTree(store, page_bytes=128)
    for path in paths:
        handle = tree.root_handle
        for name in path:
            found = tree.visit(handle, name)
            assert found is not None
            handle = found
    return ShardTree(store, tree.commit(), page_bytes=128)


def _both(tree: ShardTree, text: str) -> list[tuple[object, ...]]:
    """The path's rows from the row walker, checked against the column engine's."""
    path = parse_path(text)
    rows = list(run_path(tree, path))
    columns: list[tuple[object, ...]] = []
    for count, chunk in run_path_columns(tree, path, chunk_rows=2, first_rows=1):
        columns.extend(zip(*(c.to_pylist() for c in chunk), strict=True) if chunk else [()] * count)
    assert columns == rows
    return rows


SMALL = (["a", "b"], ["a", "c"], ["d"])


def test_a_path_of_2000_elements_past_the_trees_depth_finds_nothing() -> None:
    assert _both(_tree(*SMALL), "/".join(["+"] * 2_000)) == []


def test_thousands_of_steps_down_and_up_again() -> None:
    rows = _both(_tree(*SMALL), "/".join(["(1)+/.."] * 1_000) + "/+")
    assert rows == [("a",) * 1_000 + ("a",), ("a",) * 1_000 + ("d",)]


def test_a_tree_thousands_of_levels_deep_is_walked_to_its_bottom() -> None:
    depth = 1_500
    tree = _tree(["n"] * depth, ["n"] * 10 + ["m"])
    assert _both(tree, "/".join(["*"] * (depth - 1) + ["+:+hits"])) == [("n", 1)]
    assert len(_both(tree, "/".join(["+"] * 11))) == 2


@pytest.mark.parametrize("flat", ["", ";"])
def test_a_path_naming_10000_children(flat: str) -> None:
    tree = _tree(*([name] for name in ("a", "n7", "n9999", "z")))
    names = ",".join(f"n{i}" for i in range(10_000))
    expected = [("n7,n9999",)] if flat else [("n7",), ("n9999",)]
    assert _both(tree, "+" + names + flat) == expected
