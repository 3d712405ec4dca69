"""Path forms that read data attachments: ``%name`` virtual nodes and ``$name`` values."""

from __future__ import annotations

from typing import Any

import pytest

from query import parse_path, run_path
from treestore.attachments import update_attachment
from treestore.storage.pagestore import MemoryPageStore
from treestore.storage.tree import ShardTree


def _tree() -> ShardTree:
    tree = ShardTree(MemoryPageStore())
    updates: dict[str, list[tuple[str, str, list[Any], int, dict[str, Any]]]] = {
        "a": [
            ("top", "key.top", ["x", "y", "x", "z", "x", "y"], 1, {"size": 5}),
            ("total", "sum", ["2", "5"], 1, {}),
            ("seen", "time", ["300", "100"], 1, {}),
            ("users", "count", ["u1", "u2", "u1"], 1, {}),
        ],
        "b": [("total", "sum", ["1.5"], 2, {})],
        "c": [],
    }
    for name, changes in updates.items():
        handle = tree.visit(tree.root_handle, name)
        assert handle is not None

        def update(data: dict[str, Any], changes: Any = changes) -> None:
            for attachment, kind, values, weight, options in changes:
                state = data.get(attachment, [kind, None])[1]
                for value in values:
                    state = update_attachment(kind, state, [value], weight, options)
                data[attachment] = [kind, state]

        tree.update_data(handle, update)
    return ShardTree(tree.pages, tree.commit())


@pytest.mark.parametrize(
    ("path", "rows"),
    [
        ("a/+%top", [("x",), ("y",), ("z",)]),  # largest count first
        ("a/+%top:+hits", [("x", 3), ("y", 2), ("z", 1)]),
        ("a/+%top:hits>1", [("x",), ("y",)]),
        ("a/+%top=z,q,x:+hits", [("z", 1), ("x", 3)]),  # the keys asked for, when present
        ("+/+%?", [("a", "seen"), ("a", "top"), ("a", "total"), ("a", "users"), ("b", "total")]),
        ("+/%top", [("a",), ("a",), ("a",)]),  # hidden: a row per virtual node, no column
        ("+$+total", [("a", 7), ("b", 3.0), ("c", None)]),
        ("+$+total=num,avg", [("a", 2, 3.5), ("b", 2, 1.5), ("c", None, None)]),
        ("+$total", [("a",), ("b",)]),  # hidden: a node without the value is dropped
        ("~+$total", [("a",), ("b",), ("c",)]),
        ("a$+seen=first,last,life", [(100, 300, 200)]),
        ("a$+users", [(2,)]),
        ("a$+top=k1,v1,gy,size,k9", [("x", 3, 2, 3, None)]),
        ("+:+hits$+total", [("a", 1, 7), ("b", 1, 3.0), ("c", 1, None)]),
        ("a/%top/+", []),  # virtual nodes have no children
        ("a/+%top;:+hits", [("x,y,z", "3,2,1")]),  # flat: one row per parent
        ("+;$+total", [("a,b,c", "7,3.0")]),  # nulls left out of the joined values
        ("+/+%top;", [("a", "x,y,z")]),  # no row for parents without matches
        ("a;b;zz:+hits", [("1,1",)]),  # flat names: the ones present
    ],
)
def test_attachment_forms_give_their_rows(path: str, rows: list[tuple[Any, ...]]) -> None:
    assert list(run_path(_tree(), parse_path(path))) == rows
