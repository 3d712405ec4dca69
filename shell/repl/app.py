"""``treestore shell DIR``: the interactive loop, and the same lines run without a terminal.

Interactive: the prompt shows at once while a SparkSession starts in the background
(with one tiny job, so the first query does not pay Spark's warm-up); queries walked
on the driver run meanwhile, and one that needs Spark waits for it, its spinner saying
so. One prompt_toolkit ``PromptSession`` reads lines with completion,
highlighting, a toolbar and a history kept in
``$XDG_CONFIG_HOME/treestore/history`` (in memory, with a warning, when that
cannot be written). Ctrl-C at the prompt clears the line; during a query it
cancels the query's Spark job (PySpark's SIGINT handler cancels the running
jobs) and returns to the prompt. Ctrl-D or ``\\q`` leaves.

Not interactive (``-e LINE``, or lines piped to stdin): each line runs in
order, rows print as tsv, and the exit status is 1 if any line failed.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from shell.repl.line import join_lines, needs_more
from shell.repl.pager import page
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
    """Run ``lines`` in order; the exit status: 1 if any line failed, else 0.

    A line ending in ``\\`` or leaving a quote open goes on on the next one; errors
    name the line (of the script, or the ``-e`` option) where its query started."""
    failed = False
    pending: str | None = None
    start = 0
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n")
        if pending is None:
            pending, start = line, number
        else:
            pending = join_lines(pending, line)
        if needs_more(pending):
            continue
        session.line_number = start
        if not session.run_line(pending):
            failed = True
        pending = None
        if session.done:
            break
    if pending is not None and not session.done:
        session.line_number = start
        failed = not session.run_line(pending) or failed
    return 1 if failed else 0


def start_spark_in_background(factory: Callable[[], SparkSession]) -> threading.Event:
    """Start Spark (and run one tiny job) in a daemon thread; the event is set once it is
    up, or once starting failed (the first query that needs Spark then says why)."""
    ready = threading.Event()

    def start() -> None:
        try:
            factory().range(1).count()  # the first job pays Spark's warm-up, not a query
        except Exception:  # the query that needs Spark reports it
            pass
        finally:
            ready.set()

    threading.Thread(target=start, daemon=True, name="treestore-spark-start").start()
    return ready


def run_shell(
    store_dir: str,
    factory: Callable[[], SparkSession],
    execute: list[str] | None = None,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    header: bool = True,
) -> int:
    """Run the shell on the store at ``store_dir``; returns the exit status. ``header``:
    whether rows print after a row of column names."""
    stdin = stdin if stdin is not None else sys.stdin
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    if execute or not stdin.isatty():
        session = ShellSession(store_dir, factory, out, err)
        session.header = header
        return run_lines(session, execute if execute else stdin)
    return _interactive(store_dir, factory, out, err, header)


def _interactive(
    store_dir: str, factory: Callable[[], SparkSession], out: TextIO, err: TextIO, header: bool
) -> int:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.auto_suggest import AutoSuggestFromHistory

    from shell.repl.completer import NodeNames, ShellCompleter
    from shell.repl.keys import key_bindings
    from shell.repl.lexer import ShellLexer
    from shell.repl.style import STYLE
    from shell.repl.toolbar import toolbar

    ready = start_spark_in_background(factory)

    def started_in_the_background() -> SparkSession:
        """The session the background start makes: a query never starts Spark in the main
        thread itself, where PySpark would take over Ctrl-C from the shell."""
        ready.wait()
        return factory()

    session = ShellSession(
        store_dir, started_in_the_background, out, err, terminal=True, pager=page
    )
    session.header = header
    session.spark_ready = ready
    names = NodeNames(lambda: session.store.store_version)
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
            while needs_more(line):  # a trailing \\ or an open quote: the line goes on
                more = prompt.prompt([("class:prompt", " " * len(label) + "… ")])
                line = join_lines(line, more)
        except KeyboardInterrupt:
            continue  # Ctrl-C at the prompt clears the line
        except EOFError:
            break
        session.run_line(line)
    return 0
