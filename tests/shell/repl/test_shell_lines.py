"""The shell's lines without a store: continuation, words, help text, screen lines, the bar."""

from __future__ import annotations

import pytest

from query.ops.compiler import compile_ops
from query.syntax.path_parser import parse_path
from shell.cli import main
from shell.output.formats import FORMATS
from shell.repl.app import run_lines
from shell.repl.line import join_lines, needs_more
from shell.repl.meta import LINE_HELP, help_command, ops_command, render_doc
from shell.repl.session import WORDS, screen_lines
from shell.repl.toolbar import fit
from treestore.errors import OpError, QuerySyntaxError


class _Recorder:
    """What run_lines and the meta-commands need of a session, recording what they get."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []
        self.said: list[str] = []
        self.done = False
        self.line_number = 0

    def run_line(self, line: str) -> bool:
        self.lines.append((self.line_number, line))
        return "bad" not in line

    def say(self, text: str) -> None:
        self.said.append(text)

    def fail(self, text: str) -> None:
        self.said.append("FAIL " + text)


def test_a_trailing_backslash_or_an_open_quote_continues_the_line() -> None:
    assert needs_more("root/+ \\") and needs_more('root/"a b')
    assert not needs_more("\\q") and not needs_more('root/"a"') and not needs_more("root/+")
    assert join_lines("root/+ \\", "| ops merge=k") == "root/+ | ops merge=k"
    assert join_lines('root/"a', 'b"') == 'root/"a\nb"'
    session = _Recorder()
    lines = ["root/+ \\\n", "| ops merge=k\n", "root/bad\n", 'root/"x\n', 'y"/+\n']
    assert run_lines(session, lines) == 1  # type: ignore[arg-type]
    assert session.lines == [(1, "root/+ | ops merge=k"), (3, "root/bad"), (4, 'root/"x\ny"/+')]


def test_help_exit_and_quit_are_words() -> None:
    assert WORDS == {"help": "\\help", "exit": "\\q", "quit": "\\q"}


def test_help_lists_the_path_forms_and_rows_per_shard() -> None:
    session = _Recorder()
    help_command(session, "")  # type: ignore[arg-type]
    text = "\n".join(session.said)
    assert "++p" in text and ":+{h}hits" in text and "@from,to" in text
    assert "Rows come once per shard" in LINE_HELP and "gather=ks" in LINE_HELP


def test_ops_help_is_rendered_and_aliases_shown_with_their_op() -> None:
    session = _Recorder()
    ops_command(session, "merge")  # type: ignore[arg-type]
    assert "``" not in session.said[0] and "Example: merge=kij turns" in session.said[0]
    session = _Recorder()
    ops_command(session, "top")  # type: ignore[arg-type]
    assert session.said[0] == "(top: also gather)"
    session = _Recorder()
    ops_command(session, "")  # type: ignore[arg-type]
    gather = [line for line in session.said if line.strip().startswith("gather")]
    assert gather and gather[0].endswith("(also top)")
    assert not any(line.strip().startswith("top ") for line in session.said)
    assert render_doc("a ``b`` *c* :class:`D` 2*3") == "a b c D 2*3"


def test_wrapped_lines_count_on_the_screen() -> None:
    assert screen_lines("abc\n" + "x" * 170 + "\n\n", 80) == 1 + 3 + 1


def test_the_bottom_bar_fits_the_terminal() -> None:
    parts = [" store  version 1, 8 shards", "format table, limit 1,000", "Tab completes"]
    assert fit(parts, 200) == "  |  ".join(parts)
    assert fit(parts, 60) == " store  version 1, 8 shards  |  format table, limit 1,000"
    assert fit(parts, 12) == " store  ve…"  # one column spare: no wrap


def test_the_ops_command_prints_what_the_shells_ops_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("", "gather", "top"):
        session = _Recorder()
        ops_command(session, name)  # type: ignore[arg-type]
        assert main(["ops", name] if name else ["ops"]) == 0
        assert capsys.readouterr().out == "".join(f"{said}\n" for said in session.said)
    assert len(session.said) == 2 and session.said[0] == "(top: also gather)"


def test_an_unknown_op_names_the_closest_not_all_of_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    session = _Recorder()
    ops_command(session, "srot")  # type: ignore[arg-type]
    assert session.said == [
        "FAIL No op called 'srot'. Did you mean 'sort' or 'dsort'? "
        "\\ops (or treestore ops) lists them all."
    ]
    assert main(["ops", "gahter"]) == 2
    assert "Did you mean 'gather'?" in capsys.readouterr().err
    with pytest.raises(OpError) as caught:
        compile_ops("str=c0;gahter=ks")
    assert caught.value.hint == (
        "Did you mean 'gather'? `treestore ops` (or \\ops in the shell) lists them all."
    )
    assert "merge" not in str(caught.value)  # once every op's name, 47 of them


def test_a_misspelt_property_names_the_closest() -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        parse_path("root/+:+hitz")
    assert (
        caught.value.hint == "Did you mean 'hits'? Expected '{' or a property (hits, count, nodes)."
    )


def test_help_names_every_output_format() -> None:
    session = _Recorder()
    help_command(session, "")  # type: ignore[arg-type]
    (line,) = [said for said in session.said if said.strip().startswith("\\format")]
    assert all(name in line for name in FORMATS), line
