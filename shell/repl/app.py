"""``treestore shell DIR``: the interactive loop, and the same lines run without a terminal.

Interactive: a warm SparkSession is started once (a spinner turns meanwhile),
then one prompt_toolkit ``PromptSession`` reads lines with completion,
highlighting, a toolbar and a history kept in
``$XDG_CONFIG_HOME/treestore/history`` (in memory, with a warning, when that
cannot be written). Ctrl-C at the prompt clears the line; during a query it
cancels the query's Spark job (PySpark's SIGINT handler cancels the running
jobs) and returns to the prompt. Ctrl-D or ``\\q`` leaves.

Not interactive (``-e LINE``, or lines piped to stdin): each line runs in
order, rows print as tsv, and the exit status is 1 if any line failed.
"""

from __future__ import annotations

import itertools
import os
import pydoc
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from shell.repl.session import NEWEST_CHECK_SECONDS, ShellSession

if TYPE_CHECKING:
    from prompt_toolkit.history import History
    from pyspark.sql import SparkSession

__all__ = ["history_file", "run_lines", "run_shell"]


def history_file() -> Path:
    """Where the shell keeps its history: ``$XDG_CONFIG_HOME/treestore/history``."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "treestore" / "history"


def _history(err: TextIO) -> History:
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    path = history_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        print(f"warning: history kept in memory only ({path}: {exc.strerror})", file=err)
        return InMemoryHistory()
    return FileHistory(str(path))


def run_lines(session: ShellSession, lines: Iterable[str]) -> int:
    """Run ``lines`` in order; the exit status: 1 if any line failed, else 0."""
    failed = False
    for line in lines:
        if not session.run_line(line.rstrip("\n")):
            failed = True
        if session.done:
            break
    return 1 if failed else 0


def _warm_start(factory: Callable[[], SparkSession], out: TextIO) -> None:
    """Start Spark (and run one tiny job) while a spinner turns."""
    done = threading.Event()

    def spin() -> None:
        for frame in itertools.cycle("|/-\\"):
            if done.wait(0.1):
                break
            out.write(f"\r{frame} starting Spark ...")
            out.flush()
        out.write("\r" + " " * 24 + "\r")
        out.flush()

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        spark = factory()
        spark.range(1).count()  # the first job pays Spark's warm-up, not the first query
    finally:
        done.set()
        spinner.join()


def run_shell(
    store_dir: str,
    factory: Callable[[], SparkSession],
    execute: list[str] | None = None,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run the shell on the store at ``store_dir``; returns the exit status."""
    stdin = stdin if stdin is not None else sys.stdin
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    if execute or not stdin.isatty():
        session = ShellSession(store_dir, factory, out, err)
        return run_lines(session, execute if execute else stdin)
    return _interactive(store_dir, factory, out, err)


def _interactive(
    store_dir: str, factory: Callable[[], SparkSession], out: TextIO, err: TextIO
) -> int:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.auto_suggest import AutoSuggestFromHistory

    from shell.repl.completer import NodeNames, ShellCompleter
    from shell.repl.keys import key_bindings
    from shell.repl.lexer import ShellLexer
    from shell.repl.style import STYLE
    from shell.repl.toolbar import toolbar

    session = ShellSession(store_dir, factory, out, err, terminal=True, pager=pydoc.pager)
    _warm_start(factory, out)  # the factory hands queries this same, now warm, session
    names = NodeNames(lambda: session.store.store)
    prompt = PromptSession[str](
        history=_history(err),
        completer=ShellCompleter(names),
        complete_while_typing=True,
        auto_suggest=AutoSuggestFromHistory(),
        lexer=ShellLexer(),
        style=STYLE,
        bottom_toolbar=toolbar(session),
        refresh_interval=NEWEST_CHECK_SECONDS,  # redraw the toolbar: a newer version shows
        key_bindings=key_bindings(),
    )
    print(
        f"treestore shell on {store_dir} (version {session.store.version}). "
        "\\help for help, Ctrl-D to leave.",
        file=out,
    )
    label = Path(store_dir).name or store_dir
    while not session.done:
        try:
            line = prompt.prompt([("class:prompt", f"{label}> ")])
        except KeyboardInterrupt:
            continue  # Ctrl-C at the prompt clears the line
        except EOFError:
            break
        session.run_line(line)
    return 0
