"""The path grammar: canonical round trips, the AST, and positioned syntax errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from query import Bound, Element, Property, parse_path
from treestore.errors import QuerySyntaxError

FIXTURES = Path(__file__).parent / "fixtures"


def _cases(name: str) -> list[str]:
    lines = (FIXTURES / name).read_text().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize("text", _cases("path_identity.txt"))
def test_canonical_text_round_trips(text: str) -> None:
    parsed = parse_path(text)
    assert str(parsed) == text
    assert parse_path(str(parsed)) == parsed


def test_seed_path_ast() -> None:
    path = parse_path("root/+:nodes>1/+/+")
    assert path.elements[0] == Element("names", ("root",))
    assert path.elements[1] == Element(
        "all", show=True, properties=(Property("nodes", bounds=(Bound(">", 1),)),)
    )
    assert path.elements[1].column == 6
    assert path.elements[2] == path.elements[3] == Element("all", show=True)


def test_several_bounds_are_kept_in_order() -> None:
    prop = parse_path("+:+hits>1<10").elements[0].properties[0]
    assert prop.show and prop.bounds == (Bound(">", 1), Bound("<", 10))
    assert [prop.bounds[0].admits(n) and prop.bounds[1].admits(n) for n in (1, 2, 9, 10)] == [
        False,
        True,
        True,
        False,
    ]


def test_quoted_names_decode_escapes() -> None:
    assert parse_path('"a\\"b"/"x y"').elements[0].names == ('a"b',)


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [tuple(line.split("\t")) for line in _cases("path_errors.txt")],
)
def test_syntax_errors_name_the_column(text: str, column: str, words: str) -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        parse_path(text)
    error = caught.value
    assert error.column == int(column)
    assert words in str(error)
    caret_line = str(error).splitlines()[2]
    assert caret_line.index("^") == 2 + error.column - 1


def test_empty_path_is_an_error() -> None:
    with pytest.raises(QuerySyntaxError, match="empty"):
        parse_path("  ")
