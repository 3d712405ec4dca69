"""Every path form run over one small tree, against golden rows (tests/fixtures/path_rows.txt),
on both page stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from query import parse_path, run_path
from treestore.storage.pagestore import FilePageStore, MemoryPageStore
from treestore.storage.tree import ShardTree, build_tree

FIXTURES = Path(__file__).parent / "fixtures"
VISITS = [["a", "x"]] * 2 + [["a", "y"]] * 3 + [["b", "x"]] * 7 + [["c"]]


def _cases() -> list[tuple[str, list[list[object]]]]:
    lines = [
        line
        for line in (FIXTURES / "path_rows.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    return [(lines[i], json.loads(lines[i + 1])) for i in range(0, len(lines), 2)]


@pytest.fixture(scope="module", params=["memory", "disk"])
def tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ShardTree:
    """The example tree, on the in-memory and the on-disk page store."""
    store = (
        MemoryPageStore()
        if request.param == "memory"
        else FilePageStore(tmp_path_factory.mktemp("store"))
    )
    return build_tree(store, VISITS)


@pytest.mark.parametrize(("path", "rows"), _cases(), ids=[c[0] for c in _cases()])
def test_path_rows(tree: ShardTree, path: str, rows: list[list[object]]) -> None:
    assert [list(row) for row in run_path(tree, parse_path(path))] == rows


def test_column_labels() -> None:
    assert parse_path("+{uid}/*/+:+hits").labels() == ("uid", "name", "hits")
    assert parse_path("root/+/+:+{h}hits>1,+nodes").labels() == ("name", "name2", "h", "nodes")
    assert parse_path("root/+%top:+count").labels() == ("top", "hits")
    assert parse_path("root/+$+total=sum,avg$+seen").labels() == (
        "name",
        "total.sum",
        "total.avg",
        "seen",
    )


def test_a_property_label_prints_and_parses_back() -> None:
    path = parse_path('a/+:+{"my h"}count>2,nodes')
    assert str(path) == 'a/+:+{"my h"}hits>2,nodes'
    assert parse_path(str(path)) == path
    assert path.elements[1].properties[0].label == "my h"
