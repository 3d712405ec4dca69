"""What every op is made of, without an op: arguments that know where each character
stood, whole numbers and column numbers read as Hydra reads them, and cells as the ops
see them."""

from __future__ import annotations

import math

import pytest

from query.ops.base import (
    LARGEST_WHOLE,
    MOST_COLUMNS,
    OpArgs,
    as_number,
    as_text,
    cell,
    column_number,
    set_cell,
    to_long,
    whole_argument,
    with_table_width,
)
from treestore.errors import OpError

SOURCE = "sort;num=1,x"
ARGS = OpArgs("num", "1,x", (9, 10, 11, 12), SOURCE)  # "1,x" stands at offsets 9 to 11


def test_arguments_split_and_point_into_the_op_string() -> None:
    assert ARGS.split() == [("1", 0), ("x", 2)]
    assert ARGS.position(2) == (1, 12) and ARGS.position(99) == (1, 13)  # past the end
    error = ARGS.error(2, "x is not a number", hint="Give a number.")
    assert (error.line, error.column, error.reason) == (1, 12, "num: x is not a number")
    assert error.hint == "Give a number."


@pytest.mark.parametrize(
    ("text", "smallest", "number"), [("12", 0, 12), (" 7 ", 0, 7), ("-3", -5, -3), ("0", 0, 0)]
)
def test_whole_arguments_read_ascii_digits(text: str, smallest: int, number: int) -> None:
    assert whole_argument(ARGS, text, 0, "a count", smallest=smallest) == number


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("-3", "expected a count (a whole number), not '-3'"),
        ("1.5", "expected a count (a whole number), not '1.5'"),
        ("\u0661\u0662", "expected a count (a whole number)"),  # Arabic-Indic digits
        ("9" * 30, f"a count must lie between 0 and {LARGEST_WHOLE}"),
    ],
)
def test_anything_else_is_refused_at_its_place(text: str, said: str) -> None:
    with pytest.raises(OpError, match=said.replace("(", r"\(").replace(")", r"\)")) as caught:
        whole_argument(ARGS, text, 2, "a count")
    assert (caught.value.line, caught.value.column) == (1, 12)


def test_column_numbers_stay_below_the_widest_row() -> None:
    assert column_number(ARGS, str(MOST_COLUMNS - 1), 0) == MOST_COLUMNS - 1
    with pytest.raises(OpError, match="a column number must lie between"):
        column_number(ARGS, str(MOST_COLUMNS), 0)


def test_numbers_become_longs_as_java_casts_them() -> None:
    assert [to_long(2.9), to_long(-2.9), to_long(math.nan)] == [2, -2, 0]
    assert to_long(math.inf) == to_long(2**70) == LARGEST_WHOLE
    assert to_long(-math.inf) == -LARGEST_WHOLE - 1


def test_cells_read_as_text_and_numbers() -> None:
    assert [as_text(None), as_text(3), as_text("a")] == ["", "3", "a"]
    assert [as_number(" 12 "), as_number("1.5"), as_number("x"), as_number(None)] == [
        12,
        1.5,
        None,
        None,
    ]
    assert as_number("9" * 30) == pytest.approx(1e30)  # past a long: a real
    assert cell(["a"], 0) == "a" and cell(["a"], 3) is None and cell(["a"], -1) is None
    assert set_cell(["a", "b"], 1, "c") == ["a", "c"]
    assert set_cell(["a"], 5, "b") == ["a", "b"]  # past the end: appended, as Hydra does
    assert with_table_width(iter([["a"], ["b", "c", "d"], []])) == ([["a"], ["b", "c", "d"], []], 3)
