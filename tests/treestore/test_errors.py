"""The caret snippet of a positioned error: lines as the parsers count them, printable."""

from __future__ import annotations

from treestore.errors import PositionedError


def test_the_snippet_counts_lines_at_newlines_and_hides_control_characters() -> None:
    error = PositionedError("bad", "a\rb\u2028c\nd\ud800e", 2, 3)
    assert error.snippet == "  d?e\n    ^"
    str(error).encode("utf-8")  # printable anywhere: no lone surrogate, no raw \r


def test_a_long_line_is_cut_around_the_caret() -> None:
    error = PositionedError("bad", "9" * 5000 + "x", 1, 5001)
    shown, caret = error.snippet.splitlines()
    assert len(shown) < 200
    assert caret.index("^") == shown.index("x")


def test_a_tab_keeps_the_caret_under_its_column() -> None:
    error = PositionedError("bad", "a\tb", 1, 3)
    shown, caret = error.snippet.splitlines()
    assert caret.index("^") == shown.index("b")


def test_a_reason_ending_in_a_question_gets_no_extra_full_stop() -> None:
    asked = PositionedError("field 'X' is in no source; did you mean 'Y'?", "x", 1, 1)
    told = PositionedError("bad value", "x", 1, 1)
    assert str(asked).startswith("field 'X' is in no source; did you mean 'Y'? Line 1, column 1.")
    assert str(told).startswith("bad value. Line 1, column 1.")
