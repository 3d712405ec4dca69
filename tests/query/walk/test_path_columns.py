"""The column engine gives exactly the row walker's rows, in the same order."""

from __future__ import annotations

from unittest import mock

import pyarrow as pa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from query.syntax.ast import Bound, Element, Path, Property
from query.syntax.path_parser import parse_path
from query.walk import column_engine
from query.walk.column_engine import run_path_columns, supports
from query.walk.row_walker import run_path
from treestore.storage.pagestore import MemoryPageStore
from treestore.storage.tree import ShardTree

_NAMES = ["a", "b", "ab", "b\u00e9", "c", "\U0001f600", ""]
_NAME = st.sampled_from(_NAMES)


def _tree(batches: list[list[list[str]]]) -> ShardTree:
    """A tree made by one commit per batch (so later batches are delta runs)."""
    store = MemoryPageStore()
    tree = ShardTree(store, page_bytes=128)
    for batch in batches:
        for path in batch:
            handle = tree.root_handle
            for name in path:
                found = tree.visit(handle, name)
                assert found is not None
                handle = found
        tree = ShardTree(store, tree.commit(), page_bytes=128)
    return tree


def _rows(tree: ShardTree, path: Path, chunk_rows: int = 3, first_rows: int = 2) -> list[tuple]:  # type: ignore[type-arg]
    """The rows, the same whether the engine codes the upper levels' text or not (coded,
    each distinct value once in a chunk's dictionary)."""
    found = []
    for coded in (False, True):
        rows: list[tuple] = []  # type: ignore[type-arg]
        for count, columns in run_path_columns(tree, path, chunk_rows, first_rows, coded):
            for column in columns:
                if isinstance(column, pa.DictionaryArray):
                    assert coded
                    words = column.dictionary.to_pylist()
                    assert len(set(words)) == len(words)
            chunk = list(zip(*(c.to_pylist() for c in columns), strict=True))
            rows.extend(chunk if columns else [()] * count)
        found.append(rows)
    assert found[0] == found[1]
    return found[0]


_BOUND = st.builds(Bound, st.sampled_from([">", "<", "="]), st.integers(0, 3))
_PROPERTY = st.builds(
    Property,
    st.sampled_from(["hits", "nodes"]),
    st.booleans(),
    st.lists(_BOUND, max_size=2).map(tuple),
)


@st.composite
def _element(draw, last: bool) -> Element:  # type: ignore[no-untyped-def]
    kind = draw(st.sampled_from(["all", "names", "prefix", "range", "regex", "up"]))
    names: tuple[str, ...] = ()
    if kind in ("names", "prefix"):
        names = tuple(draw(st.lists(_NAME, min_size=1, max_size=3)))
    elif kind == "range":
        names = tuple(draw(st.lists(_NAME, min_size=1, max_size=2)))
    elif kind == "regex":
        names = tuple(draw(st.lists(st.sampled_from(["a.*", "b", ".", "[ac]b?"]), min_size=1)))
    default = draw(st.none() | _NAME) if kind != "up" else None
    return Element(
        kind=kind,
        names=names,
        show=draw(st.booleans()),
        properties=tuple(draw(st.lists(_PROPERTY, max_size=2))) if kind != "up" else (),
        negate=kind == "regex" and draw(st.booleans()),
        default=default,
        default_hits=draw(st.none() | st.integers(0, 3)) if default is not None else None,
        skip=draw(st.integers(0, 2)) if kind != "up" else 0,
        limit=draw(st.integers(0, 2)) if kind != "up" else 0,
        null_ok=draw(st.booleans()),
        flat=last and kind != "up" and draw(st.booleans()),
    )


@st.composite
def _path(draw) -> Path:  # type: ignore[no-untyped-def]
    size = draw(st.integers(1, 4))
    return Path(tuple(draw(_element(i == size - 1)) for i in range(size)))


_TREE_PATHS = st.lists(
    st.lists(st.lists(_NAME, min_size=1, max_size=4), max_size=25), min_size=1, max_size=3
)


def _hidden(names: tuple[str, ...], default: str | None = None) -> Element:
    return Element(kind="names", names=names, show=False, default=default, line=1, column=1)


# A stand-in node (``b`` missing, its default ``a`` taken) has no children, even one
# named '' (the internal root is stored under the stand-ins' id with that name).
_STAND_IN_THEN_EMPTY_NAME = Path((_hidden(("b",), default="a"), _hidden(("",))))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(_TREE_PATHS, _path(), st.integers(1, 5), st.integers(1, 5), st.booleans())
@example([[["a"]]], _STAND_IN_THEN_EMPTY_NAME, 1, 1, False)
def test_columns_give_the_walkers_rows(batches, path, chunk_rows, first_rows, whole) -> None:  # type: ignore[no-untyped-def]
    """By pages, and (where a frontier is big enough) from the whole tree read at once;
    slices of ``chunk_rows``, the first ones on the way to the first rows ``first_rows``."""
    tree = _tree(batches)
    with mock.patch.object(
        column_engine, "whole_tree_budget", return_value=1 << 30 if whole else -1
    ):
        assert _rows(tree, path, chunk_rows, first_rows) == list(run_path(tree, path))


def test_a_scan_of_a_bigger_tree_in_slices() -> None:
    paths = [
        ["root", f"u{i}", kind, f"{i % 7}-{j}"]
        for i in range(400)
        for kind in "AM"
        for j in range(i % 3)
    ]
    tree = _tree([paths[::2], paths[1::2]])
    for text in ["root/+/+/+", "root/+:nodes>1/+/+:+hits", "root/++u1/A,M/(1-1)+", "root/+/M;"]:
        path = parse_path(text)
        assert supports(path)
        expected = list(run_path(tree, path))
        assert expected, text
        assert _rows(tree, path, 50) == expected
        with mock.patch.object(column_engine, "whole_tree_budget", return_value=-1):
            assert _rows(tree, path, 50) == expected


def test_paths_reading_attachments_are_not_run_on_columns() -> None:
    assert not supports(parse_path("root/+/%top"))
    assert not supports(parse_path("root/+$count"))


def test_coded_upper_levels_come_as_codes_and_the_last_as_text() -> None:
    tree = _tree([[["u1", "A", "1"], ["u1", "M", "p"], ["u2", "A", "1"], ["u2", "M", "p"]]])
    path = parse_path("+/+/+")
    (count, columns), *_ = list(run_path_columns(tree, path, coded=True))
    assert count == 4
    assert [type(c) for c in columns] == [pa.DictionaryArray, pa.DictionaryArray, pa.StringArray]
    assert columns[0].dictionary.to_pylist() == ["u1", "u2"]  # each value once
    assert columns[1].dictionary.to_pylist() == ["A", "M"]
    assert [c.to_pylist() for c in columns] == [
        ["u1", "u1", "u2", "u2"],
        ["A", "M", "A", "M"],
        ["1", "p", "1", "p"],
    ]


def test_a_level_read_selectively_below_stays_text() -> None:
    """Under ``+/M/+`` most UIDs are not read again: coding all of them would cost more
    than taking the few that are, and their dictionary would hold every UID."""
    tree = _tree([[["u1", "A", "1"], ["u1", "M", "p"], ["u2", "A", "2"]]])
    (count, columns), *_ = list(run_path_columns(tree, parse_path("+/M/+"), coded=True))
    assert count == 1
    assert not any(isinstance(c, pa.DictionaryArray) for c in columns)
    assert [c.to_pylist() for c in columns] == [["u1"], ["p"]]  # a name is not shown
