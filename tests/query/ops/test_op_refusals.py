"""Op strings and rows that once escaped as Python exceptions (a 4300-digit number, a size
no memory holds, a lone surrogate, a NaN where a whole number goes): each is now refused
with an OpError at its argument, or read as Hydra reads it."""

from __future__ import annotations

import pytest

from query import apply_ops, compile_ops
from query.ops.base import LARGEST_WHOLE, MOST_COLUMNS, MOST_WARNINGS
from query.ops.row_ops import LONGEST_SLEEP
from treestore.errors import OpError

ROWS = [["a", 1, "x"], ["b", 2, "y"]]


def _refusal(ops: str) -> OpError:
    with pytest.raises(OpError) as caught:
        apply_ops(ROWS, ops)
    return caught.value


@pytest.mark.parametrize(
    ("ops", "column", "words"),
    [
        ("limit=" + "9" * 5000, 7, "a row count must lie between 0 and"),  # was a ValueError
        ("limit=1:" + "9" * 5000, 9, "a row count must lie between 0 and"),
        ("sort=" + "9" * 5000, 6, "a column number must lie between 0 and 999999"),
        ("skip=" + "9" * 30, 6, "a row count"),
        ("range=-" + "9" * 5000, 7, "a row number"),
        ("merge=k" + "9" * 5000, 8, "the row count"),
        ("num=c" + "9" * 5000 + ",out", 6, "a column number"),
        ("str=c" + "9" * 5000 + ",v1,set", 6, "a column number"),
        ("holtwinters=0:" + "9" * 5000, 15, "a setting"),
    ],
)
def test_numbers_past_their_range_are_refused_at_the_number(
    ops: str, column: int, words: str
) -> None:
    error = _refusal(ops)
    assert (error.line, error.column) == (1, column) and words in error.reason


@pytest.mark.parametrize(
    ("ops", "column"),
    [
        ("pad=s:999999999999999999999999999999", 7),  # was an OverflowError
        ("pad=s:99999999999", 7),  # was a MemoryError
        (f"pad=0:{MOST_COLUMNS + 1}", 7),
        (f"sum=s{MOST_COLUMNS}", 6),  # a running sum written past a million columns
        (f"sum=S{MOST_COLUMNS}", 6),
        (f"sleep={LONGEST_SLEEP + 1}", 7),
        (f"sleep=1,{LONGEST_SLEEP + 1}", 9),
    ],
)
def test_sizes_are_bounded(ops: str, column: int) -> None:
    error = _refusal(ops)
    assert (error.line, error.column) == (1, column) and "must lie between" in error.reason


def test_the_bounds_themselves_are_accepted() -> None:
    assert apply_ops([["a"]], "pad=0:3") == [("a", 0, 0)]
    assert compile_ops(f"pad=0:{MOST_COLUMNS};limit={LARGEST_WHOLE};sleep={LONGEST_SLEEP}")


@pytest.mark.parametrize(
    "ops",
    [
        "sort=\u00b2",  # a digit to str.isdigit, not to int(): was a ValueError
        "limit=\u00b2",
        "merge=k\u00b2",
        "num=c\u00b2,out",
        "str=c\u00b2,v1,set",
        "range=--5",
    ],
)
def test_only_ascii_digits_are_numbers(ops: str) -> None:
    _refusal(ops)


@pytest.mark.parametrize(
    ("ops", "words"),
    [
        ("title=\ud800", "lone surrogate"),
        ('map=0::{"a":"\\\\ud800"}', "lone surrogate"),  # "\\" is a backslash in ops
        ('map=0::{"a":[1]}', "must be a text or a number"),
        ("map=0::" + "[" * 2000, "nested too deeply"),
        ('rmap=0::{"a{99999999999}":"b"}', "repetition number is too large"),
        ('rmap=0::{"' + "(" * 1000 + ")" * 1000 + '":"b"}', "nested too deeply"),
        ("ftable=0:1,2:" + "9" * 400, "neither a fraction"),  # was a NaN made whole
        ("histo2=0,1e400,2", "not a finite number"),
        ("fill=i" + "9" * 30, "cannot read the fill value"),  # a cell past a long
    ],
)
def test_arguments_that_broke_an_op_are_refused(ops: str, words: str) -> None:
    assert words in _refusal(ops).reason


def test_a_date_pattern_may_repeat_a_letter() -> None:
    # was re.error: redefinition of group name
    assert apply_ops([["140108"]], "datef=0:yyMMdd:yy-yy") == [("14-14",)]
    assert apply_ops([["14-14"]], "datef=0:yy-yy:yyyy") == [("2014",)]


def test_a_date_past_year_9999_is_a_clear_error() -> None:
    with pytest.raises(OpError, match="cannot read the date"):  # was an OverflowError
        apply_ops([["9" * 18]], "datef=0:unixmillis:yyyy")


@pytest.mark.parametrize(
    ("ops", "rows", "expected"),
    [
        # Java's long arithmetic, as Hydra's num: sums and products wrap at 64 bits ...
        (f"num=n{LARGEST_WHOLE},n1,add,out", [["a"]], [("a", -LARGEST_WHOLE - 1)]),
        ("num=n4294967296,dup,mult,out", [["a"]], [("a", 0)]),
        # ... and a real cast to a long: NaN is 0, infinities the ends of the range
        (
            "num=c0,toi,out",
            [["nan"], ["inf"], ["-1e400"]],
            [("nan", 0), ("inf", LARGEST_WHOLE), ("-1e400", -LARGEST_WHOLE - 1)],
        ),
        ("num=c0,n1,gt", [["nan"], ["inf"], ["2"]], [("inf",), ("2",)]),
        ("sum=0", [["nan"], ["1e400"]], None),
        ("histo=0", [["1e400"], ["nan"], ["5"]], None),
        ("changepoints=0:0", [["1e400"]] * 3 + [["nan"]] * 3, None),
    ],
)
def test_non_finite_and_huge_values_are_read_as_java_longs(
    ops: str, rows: list[list[object]], expected: list[tuple[object, ...]] | None
) -> None:
    got = apply_ops(rows, ops)  # was an OverflowError or a ValueError
    if expected is not None:
        assert got == expected


def test_squaring_stays_a_long() -> None:
    ops = "num=n3" + ",dup,mult" * 64 + ",out"  # was a number of 2**64 digits: no memory holds it
    ((_, value),) = apply_ops([["a"]], ops)
    assert isinstance(value, int) and -(2**63) <= value < 2**63


@pytest.mark.parametrize(
    ("ops", "place"),
    [
        ("groupby=k:limit=x", (1, 17)),  # was column 7: the place in "limit=x" alone
        ("groupby=k\r\n:limit=\r\nx", (2, 8)),  # lines end at "\n": the "\r" is at 2, 8
        ("groupby=k:str=c0,v1,range,v0,set", (1, 21)),
    ],
)
def test_an_error_inside_groupby_points_into_the_whole_op_string(
    ops: str, place: tuple[int, int]
) -> None:
    error = _refusal(ops)
    assert (error.line, error.column) == place and error.text == ops


def test_a_row_refused_inside_groupby_points_into_the_whole_op_string() -> None:
    with pytest.raises(OpError) as caught:
        apply_ops([["a", "b"]], "groupby=k:str=c0,c1,c1,range,v0,set")
    assert (caught.value.line, caught.value.column) == (1, 24)


def test_an_argument_of_thousands_of_unknown_letters_gives_a_few_warnings() -> None:
    """The fuzz found ``sort=2:n999...`` (4,000 unknown directions) taking seconds: one
    warning per letter, each quoting the whole op string. Ten warnings say enough."""
    pipeline = compile_ops("groupby=k:sort=2:n" + "9" * 4000)
    assert list(pipeline.run([("a", "1")])) == [("a", "1")]
    plain = compile_ops("sort=0:n" + "9" * 4000)
    assert len(plain.warnings()) == MOST_WARNINGS
