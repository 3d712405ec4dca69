"""Texts that once escaped the parsers as Python exceptions: each is now refused with our own
positioned error, at the place lark names (lines end at "\\n" only, as lark counts them)."""

from __future__ import annotations

import pytest
from lark.exceptions import UnexpectedInput

from query import compile_ops, parse_path
from query.syntax.lark_support import line_column, line_text, parser
from query.syntax.path_parser import LARGEST_WHOLE
from treestore.errors import OpError, PositionedError, QuerySyntaxError

PATH = ("query.syntax", "path.lark", "path")
OPS = ("query.syntax", "ops.lark", "ops")

# Every character str.splitlines splits at, but lark does not.
OTHER_LINE_ENDS = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def _refusal(text: str) -> QuerySyntaxError:
    with pytest.raises(QuerySyntaxError) as caught:
        parse_path(text)
    return caught.value


def _lark_place(grammar: tuple[str, str, str], text: str) -> tuple[int, int]:
    with pytest.raises(UnexpectedInput) as caught:
        parser(*grammar).parse(text)
    return caught.value.line, caught.value.column


@pytest.mark.parametrize("end", OTHER_LINE_ENDS)
def test_a_path_with_another_line_end_is_refused_where_lark_says(end: str) -> None:
    text = f"a{end}b/+"  # was an IndexError in the error's wording
    error = _refusal(text)
    assert (error.line, error.column) == _lark_place(PATH, text) == (1, 2)
    assert repr(end) in error.reason


@pytest.mark.parametrize("end", OTHER_LINE_ENDS)
def test_op_strings_count_lines_as_lark_does(end: str) -> None:
    text = f"merge=k{end}k\n;;"
    with pytest.raises(OpError) as caught:
        compile_ops(text)
    assert (caught.value.line, caught.value.column) == _lark_place(OPS, text) == (2, 2)


def test_an_op_argument_after_a_line_end_is_placed_on_its_line() -> None:
    with pytest.raises(OpError) as caught:
        compile_ops("title=a\n;limit=x")  # the title's argument ends with a line end
    assert (caught.value.line, caught.value.column) == (2, 8)


def test_the_end_of_a_text_is_just_past_its_last_token() -> None:
    error = _refusal("root/")
    assert (error.line, error.column) == (1, 6) and "ends too early" in error.reason
    error = _refusal("root/(2)\x0c")
    assert (error.line, error.column) == (1, 9) and "'\\x0c'" in error.reason


def test_line_column_and_line_text_split_at_newlines_only() -> None:
    text = "a\rb\x0bc\nd\u2028e"
    assert line_column(text, text.index("d")) == (2, 1)
    assert line_column(text, text.index("e")) == (2, 3)
    assert line_text(text, 1) == "a\rb\x0bc"
    assert line_text(text, 3) == ""


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        ('root/"\\;"', 7, "invalid \\escape"),  # was a VisitError
        ('root/"a\tb"', 8, "invalid control character"),  # was a VisitError
        ('root/"ok","\\x"', 12, "invalid \\escape"),
    ],
)
def test_a_quoted_name_that_is_not_json_is_refused_at_the_bad_character(
    text: str, column: int, words: str
) -> None:
    error = _refusal(text)
    assert error.column == column and words in error.reason


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        ("root/+:hits>" + "9" * 5000, 13, "A bound is too large"),  # 4300-digit limit
        ("root/(" + "9" * 5000 + ")+", 7, "A limit is too large"),
        ("root/(1-" + "9" * 20 + ")+", 9, "A limit is too large"),
        ("root/+[d|" + "9" * 20 + "]", 10, "A default's hits is too large"),
    ],
)
def test_numbers_past_a_long_are_refused_at_the_number(text: str, column: int, words: str) -> None:
    error = _refusal(text)
    assert (error.line, error.column) == (1, column) and words in error.reason
    assert str(LARGEST_WHOLE) in (error.hint or "")


def test_the_largest_long_is_still_a_number() -> None:
    bound = parse_path(f"root/+:hits>{LARGEST_WHOLE}").elements[1].properties[0].bounds[0]
    assert bound.value == LARGEST_WHOLE


@pytest.mark.parametrize(
    ("text", "column"),
    [
        ('root/"\\ud800"', 6),  # parsed, then the query failed with UnicodeEncodeError
        ('root/"\\udfff\\ud800"', 6),
        ("root/\ud800", 6),  # a name from argv with an undecodable byte
        ("root/+a,\udc80", 9),
    ],
)
def test_a_lone_surrogate_is_refused_at_parse_time(text: str, column: int) -> None:
    error = _refusal(text)
    assert (error.line, error.column) == (1, column) and "surrogate" in error.reason


def test_a_surrogate_pair_is_one_character_and_parses() -> None:
    assert parse_path('root/"\\ud83d\\ude00"').elements[1].names == ("\U0001f600",)


@pytest.mark.parametrize("pattern", ["a{99999999999}", "(" * 1000 + ")" * 1000])
def test_a_regex_python_cannot_compile_is_a_syntax_error(pattern: str) -> None:
    error = _refusal(f'root/|"{pattern}"')
    assert error.column == 7 and "Not a regular expression" in error.reason


def test_every_refusal_is_our_positioned_error() -> None:
    for text in ["a\rb/+", 'root/"\\;"', "root/\ud800", "root/(" + "9" * 5000 + ")+"]:
        with pytest.raises(PositionedError):
            parse_path(text)
