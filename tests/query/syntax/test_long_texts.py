"""Paths and op strings of any length parse, in time linear in their length, and a mistake
at their far end is placed there (the grammars' lists are read without recursion)."""

from __future__ import annotations

import pytest

from query import compile_ops, parse_path
from treestore.errors import OpError, QuerySyntaxError


def test_a_path_of_5000_elements_parses_and_reads_back() -> None:
    text = "/".join(["+"] * 5_000)
    path = parse_path(text)
    assert len(path.elements) == 5_000
    assert str(path) == text


def test_an_element_naming_20000_children_parses_and_reads_back() -> None:
    text = "root/+" + ",".join(f"n{i}" for i in range(20_000))
    path = parse_path(text)
    assert len(path.elements[1].names) == 20_000
    assert str(path) == text


def test_a_mistake_after_5000_elements_is_placed_there() -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        parse_path("+/" * 5_000 + "+:bad")
    assert (caught.value.line, caught.value.column) == (1, 10_000 + 3)


def test_10000_ops_compile_and_a_mistake_after_them_is_placed_there() -> None:
    assert len(compile_ops(";".join(["sort"] * 10_000)).ops) == 10_000
    with pytest.raises(OpError) as caught:
        compile_ops("sort;" * 10_000 + "nosuchop")
    assert (caught.value.line, caught.value.column) == (1, 50_000 + 1)
