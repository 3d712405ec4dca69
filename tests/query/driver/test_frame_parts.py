"""The DataFrame source's parts that need no Spark: which filters the path takes, and a
shard's pieces as batches of the DataFrame's schema."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.datasource import EqualNullSafe, EqualTo, GreaterThan, In, IsNull

from query.driver.frame_filters import NOTHING, push_filters
from query.driver.frame_schema import batch_of
from query.syntax.path_parser import parse_path
from treestore.errors import OpError


def _pushed(path: str, *filters: object) -> tuple[str | None, list[object]]:
    narrowed, left = push_filters(parse_path(path), list(filters))  # type: ignore[arg-type]
    return (None if narrowed is NOTHING else str(narrowed)), left


def test_equalities_and_in_lists_on_name_columns_become_lookups() -> None:
    assert _pushed("root/+/+:+hits", EqualTo(("name2",), "M")) == ("root/+/+M:+hits", [])
    assert _pushed("root/+/+", In(("name",), ("b", "a", "b"))) == ("root/+b,a/+", [])
    assert _pushed("root/+{c}/+", EqualNullSafe(("c",), "x")) == ("root/+{c}x/+", [])
    both = _pushed("root/+/+", In(("name",), ("a", "b")), EqualTo(("name",), "b"))
    assert both == ("root/+b/+", [])
    assert _pushed("root/+a,b,c/+", In(("name",), ("c", "a", "z"))) == ("root/+a,c/+", [])


def test_filters_that_leave_no_row_give_nothing() -> None:
    assert _pushed("root/+/+", EqualTo(("name",), "a"), EqualTo(("name",), "b"))[0] is None
    assert _pushed("root/+a,b/+", EqualTo(("name",), "c"))[0] is None


@pytest.mark.parametrize(
    ("path", "item"),
    [
        ("root/+/+:+hits", EqualTo(("hits",), 1)),  # not a column of names
        ("root/+/+", GreaterThan(("name",), "a")),  # not an equality
        ("root/+/+", IsNull(("name",))),
        ("root/+/+", EqualTo(("name",), 5)),  # not text
        ("root/+/+", EqualTo(("nope",), "a")),
        ("root/+[x]/+", EqualTo(("name",), "a")),  # a default stands in: not exact
        ("root/(2)+/+", EqualTo(("name",), "a")),  # a limit counts children first
        ("root/+,-y/+", EqualTo(("name",), "a")),  # a trap looks at every child
        ("root/+/+;", EqualTo(("name2",), "a")),  # flat: one row per parent
        ("root/++a/+", EqualTo(("name",), "a")),  # prefixes
        ("root/+%top", EqualTo(("top",), "a")),  # an attachment's virtual nodes
    ],
)
def test_other_filters_stay_with_spark(path: str, item: object) -> None:
    assert _pushed(path, item) == (str(parse_path(path)), [item])


SCHEMA = pa.schema([("name", pa.string()), ("hits", pa.int64()), ("n", pa.float64())])


def test_rows_and_columns_become_batches_of_the_schema() -> None:
    rows = batch_of([("a", 1, 2), ("b", None, 2.5), (7,)], SCHEMA)
    assert rows.schema == SCHEMA
    assert rows.to_pylist() == [
        {"name": "a", "hits": 1, "n": 2.0},
        {"name": "b", "hits": None, "n": 2.5},
        {"name": "7", "hits": None, "n": None},
    ]
    coded = pa.array(["x", "y", "x"]).dictionary_encode()
    columns = batch_of((3, [coded, pa.array([1, 2, 3])]), SCHEMA)
    assert columns.schema == SCHEMA
    assert columns.column("name").to_pylist() == ["x", "y", "x"]
    assert columns.column("n").to_pylist() == [None, None, None]


def test_a_value_that_does_not_fit_names_its_column() -> None:
    with pytest.raises(OpError, match=r"column 'hits' is typed int64 .* holds 2\.5"):
        batch_of([("a", 2.5, 1)], SCHEMA)
    with pytest.raises(OpError, match=r"column 'n' is typed double .* holds 'x'"):
        batch_of([("a", 1, "x")], SCHEMA)
    with pytest.raises(OpError, match="the query's rows have 4 columns and the DataFrame's"):
        batch_of([("a", 1, 2, 3)], SCHEMA)
    assert batch_of([("a", 3.0, 1)], SCHEMA).column("hits").to_pylist() == [3]
