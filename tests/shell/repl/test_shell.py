"""The shell without a terminal: the completion engine (Document in, completions out),
the lexer, meta-commands, -e and piped input, history fallback."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from shell.cli import main
from shell.repl.app import _history, history_file, run_lines
from shell.repl.completer import NodeNames, ShellCompleter
from shell.repl.lexer import tokens
from shell.repl.line import split_line

TREE = {
    None: ["root"],
    "root": ["11111", "12345", "67890", "a b"],
    "root/+": ["A", "M"],
}


def _names(parent: str | None, prefix: str) -> list[str]:
    key = parent if parent in TREE else ("root/+" if parent and parent.count("/") == 1 else None)
    return [n for n in TREE.get(key, []) if n.startswith(prefix)]


def _completions(text: str, cursor: int | None = None) -> list[tuple[str, int, str]]:
    document = Document(text, len(text) if cursor is None else cursor)
    found = ShellCompleter(_names).get_completions(document, CompleteEvent())  # type: ignore[arg-type]
    return [(c.text, c.start_position, c.display_meta_text) for c in found]


def test_node_names_at_the_cursor() -> None:
    assert [c[0] for c in _completions("ro")] == ["root"]
    assert _completions("root/+1") == [("11111", -1, "node"), ("12345", -1, "node")]
    assert [c[0] for c in _completions("root/12")] == ["12345"]
    assert [c[0] for c in _completions("root/+12345/")] == ["A", "M", "+", "*"]
    assert [c[0] for c in _completions("root/a")] == ['"a b"']  # quoted as a path writes it
    assert [c[0] for c in _completions("root/11111,6")] == ["67890"]
    # after the element syntax: limits, ~, regex marks, defaults, labels, prefix and range
    for text in ("root/(2)+1", "root/~+1", "root/++1", "root/+@1", "root/+[none]{u}1", "root/|1"):
        assert [c[0] for c in _completions(text)] == ["11111", "12345"], text
    # the cursor in the middle of the line completes what is before it
    assert [c[0] for c in _completions("root/1 | rops merge=kj", cursor=6)] == ["11111", "12345"]


def test_properties_keywords_ops_and_letters() -> None:
    assert [c[0] for c in _completions("root/+:")] == ["hits", "nodes"]
    assert [c[0] for c in _completions("root/+:+h")] == ["+hits"]
    assert [c[0] for c in _completions("root/+:hits>1,n")] == ["nodes"]
    assert [c[0] for c in _completions("root/+ |")] == ["rops", "ops"]
    assert [c[0] for c in _completions("root/+ | r")] == ["rops"]
    names = [c[0] for c in _completions("root/+ | rops ")]
    assert {"merge=", "str=", "gather=", "sort=", "limit=", "num="} <= set(names)
    assert names == sorted(names)
    assert [c[0] for c in _completions("root/+ | rops str=c1;mer")] == ["merge="]
    letters = _completions("root/+ | ops merge=k")
    assert ("j", 0, "join") in letters and ("s", 0, "sum") in letters
    assert [c[0] for c in _completions("root/+ | rops str=c1,ca")] == ["cat"]
    meta = dict((c[0], c[2]) for c in _completions("root/+ | rops m"))
    assert meta["merge="].startswith("merge=LETTERS")


def test_meta_command_completion() -> None:
    assert [c[0] for c in _completions("\\fo")] == ["\\format"]
    assert [c[0] for c in _completions("\\format j")] == ["json", "jsonl"]
    assert [c[0] for c in _completions("\\ops mer")] == ["merge"]
    assert {c[0] for c in _completions("\\")} >= {"\\help", "\\ops", "\\q", "\\reload"}


def test_lexer_styles_every_part() -> None:
    styled = tokens('root/+:nodes>1/"a b" | rops str=c1,v=,cat | ops merge=kj')
    assert (
        "".join(text for _, text in styled)
        == 'root/+:nodes>1/"a b" | rops str=c1,v=,cat | ops merge=kj'
    )
    kinds = {(style, text) for style, text in styled}
    assert ("class:wild", "+") in kinds and ("class:bound", ">1") in kinds
    assert ("class:string", '"a b"') in kinds and ("class:op", "merge") in kinds
    assert ("class:arg", "c1,v=,cat") in kinds and ("class:keyword", " | ops ") in kinds
    assert tokens("\\ops merge")[0] == ("class:meta", "\\ops")


def test_line_parts_and_offsets() -> None:
    assert split_line("root/|ops/+ | ops merge=kj").path == "root/|ops/+"
    line = split_line("  root/|x|/+ | rops merge=kj |ops str=c0")
    assert (line.path, line.rops, line.ops) == ("root/|x|/+", "merge=kj", "str=c0")
    assert line.offsets == {"path": 2, "rops": 20, "ops": 34}


def test_history_file_and_its_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert history_file() == tmp_path / "config" / "treestore" / "history"
    err = io.StringIO()
    assert type(_history(err)).__name__ == "FileHistory" and not err.getvalue()
    (tmp_path / "blocked").write_text("a file where a folder should be")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "blocked"))
    assert type(_history(err)).__name__ == "InMemoryHistory"
    assert "history kept in memory only" in err.getvalue()


@pytest.mark.spark
def test_node_names_come_from_the_store(spark: Any, demo_store: Path) -> None:
    from treestore.store.versions import open_version

    store = demo_store
    names = NodeNames(lambda: open_version(store))
    assert names(None, "") == ["root"]
    assert names("root", "1") == ["11111", "12345"]
    assert names("root/+:nodes>1", "") == ["A", "M"]
    assert names("root/+:nodes>1/A", "") == ["1", "2", "3", "4", "5"]
    assert names("root/+:nodez", "") == []  # a path that does not parse completes nothing
    assert ("root", "1") in {(p, x) for _, p, x in names.cache}


@pytest.mark.spark
def test_meta_commands_and_errors(spark: Any, demo_store: Path) -> None:
    from shell.repl.session import ShellSession

    store = demo_store
    out, err = io.StringIO(), io.StringIO()
    session = ShellSession(str(store), lambda: spark, out, err)
    lines = [
        "\\help",
        "\\ops",
        "\\ops merge",
        "\\format table",
        "\\limit 2",
        "\\timing on",
        "root/+:+hits",
        "\\info",
        "\\reload",
        "\\format xml",
        "\\limit many",
        "\\nope",
        "root/+ | ops merge=kq",
        "\\q",
        "root/+",
    ]
    assert run_lines(session, lines) == 1
    printed, errors = out.getvalue(), err.getvalue()
    assert "PATH [| rops OPS] [| ops OPS]" in printed and "\\reload" in printed
    assert "merge=LETTERS[N]" in printed and "Example: merge=kij turns" in printed
    # not a terminal: the session's messages go to stderr, stdout keeps the data
    assert "format is table" in errors and "limit is 2" in errors
    assert "format is table" not in printed and "2 rows in" not in printed
    assert "name   hits\n22222     1\n11111     1\n" in printed  # a header, capped at 2 rows
    assert "(showing the first 2 rows; \\limit N shows more)" in errors
    assert "2 rows in " in errors and "version 1 (kept: 1), 8 shards" in printed
    assert "store version 1" in errors
    assert "line 13: merge: unknown column letter 'q'" in errors  # the script's line
    assert "Unknown format 'xml'" in errors and "\\limit takes a whole number" in errors
    assert "Unknown command \\nope" in errors
    assert (
        "merge: unknown column letter 'q'. Line 1, column 21.\n  root/+ | ops merge=kq\n" in errors
    )
    assert errors.count("\n  " + " " * 20 + "^") == 1
    assert session.done and printed.count("22222") == 1  # nothing ran after \q


@pytest.mark.spark
def test_words_warnings_hints_and_continued_lines(spark: Any, demo_store: Path) -> None:
    from shell.repl.session import ShellSession

    out, err = io.StringIO(), io.StringIO()
    session = ShellSession(str(demo_store), lambda: spark, out, err)
    lines = [
        "help",
        "root/12354/+",
        "root/+:+hits | ops sort=0:x",
        "root/+:+hits \\",
        "| ops gather=is",
        "quit",
        "root/+",
    ]
    assert run_lines(session, lines) == 0
    printed, errors = out.getvalue(), err.getvalue()
    assert "Path elements" in printed  # help ran as \help, not as a path
    assert (
        "line 2: warning: no node under root is named '12354' in any shard. Line 1, column 6.\n"
        "  root/12354/+\n       ^\nClosest: 12345." in errors
    )
    assert "line 3: warning: sort: unknown sort type 'x': the column sorts as text" in errors
    assert errors.count("warning") == 2
    assert printed.endswith("hits\n8\n")  # the continued line: one row, summed
    assert session.done  # quit left: the last line did not run (the rows end with gather's)


@pytest.mark.spark
def test_execute_option_and_piped_input(spark: Any, demo_store: Path, capsys: Any) -> None:
    store = demo_store
    query = "root/+:nodes>1/+/+ | rops str=c1,v=,cat,c2,cat,v2,set;merge=kij"
    assert main(["shell", str(store), "-e", query]) == 0
    assert capsys.readouterr().out == (
        "name\tname3\n12345\tA=1,A=3,A=4,A=5,M=abc\n67890\tA=1,A=2,M=xyz,M=zzz\n"
    )
    assert main(["shell", str(store), "--no-header", "-e", query]) == 0
    assert capsys.readouterr().out == "12345\tA=1,A=3,A=4,A=5,M=abc\n67890\tA=1,A=2,M=xyz,M=zzz\n"
    assert main(["shell", str(store), "-e", "root/+:nodez>1", "-e", "root/+:+nodes"]) == 1
    captured = capsys.readouterr()
    assert "Line 1, column 8.\n  root/+:nodez>1\n         ^" in captured.err
    assert "12345\t2" in captured.out  # the line after the failing one still ran
    piped = subprocess.run(
        [sys.executable, "-m", "treestore", "shell", str(store), "--master", "local[1]"],
        input="\\format json\nroot/+:+hits | ops merge=is\n",
        capture_output=True,
        text=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        timeout=300,
        check=False,
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == '[\n{"hits": 8}\n]\n'  # "format is json" went to stderr
    assert "format is json" in piped.stderr
    failing = subprocess.run(
        [sys.executable, "-m", "treestore", "shell", str(store), "--master", "local[1]"],
        input="root/+\nroot/)\n",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert failing.returncode == 1 and "column 6" in failing.stderr
    assert "Traceback" not in failing.stderr
