"""What the shell does with one line, terminal or not: run a query or a meta-command.

A :class:`ShellSession` holds the open store, the display settings
(``\\format``, ``\\limit``, ``\\timing``) and where output goes. A failing line
prints one message (a caret under the column of the line typed, for syntax
errors) and the session goes on; :meth:`ShellSession.run_line` says whether the
line succeeded, so ``-e`` and piped input can exit non-zero.
"""

from __future__ import annotations

import io
import itertools
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from query.driver.runner import QueryStore, open_store
from query.ops import Value
from shell.output.formats import write_rows
from shell.output.info import write_info
from shell.repl.hints import missing_name, repeated_keys
from shell.repl.line import QueryLine, split_line
from shell.repl.meta import run_meta
from treestore.errors import PositionedError, QuerySyntaxError, TreestoreError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["CANCELLED", "WORDS", "ShellSession", "screen_lines"]

CANCELLED = "cancelled: the query's Spark jobs were stopped"


WORDS = {"help": "\\help", "exit": "\\q", "quit": "\\q"}
"""Words a line may be alone, run as the meta-command (never as a path query)."""

NEWEST_CHECK_SECONDS = 2.0
"""How often the toolbar looks for a newer version of the store."""


class ShellSession:
    """The state of one shell: the store, the display settings, the output streams."""

    def __init__(
        self,
        store_dir: str,
        session_factory: Callable[[], SparkSession],
        out: TextIO | None = None,
        err: TextIO | None = None,
        terminal: bool = False,
        pager: Callable[[str], None] | None = None,
    ) -> None:
        self.store_dir = store_dir
        self.session_factory = session_factory
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.terminal = terminal
        self.pager = pager
        self.format = "table" if terminal else "tsv"
        self.limit = 1000 if terminal else 0
        self.timing = terminal
        self.done = False
        self.failed = False
        self.interrupted = False
        self.line_number = 0
        self._paged_seconds = 0.0
        self.header = True
        """Whether rows print after a row of column names (``shell --no-header``: not)."""
        self.spark_ready: threading.Event | None = None
        """Set once Spark, started in the background, is up (``None``: not started so)."""
        self.store: QueryStore = open_store(store_dir, session_factory=session_factory)
        self._newest, self._newest_checked = self.store.version, -NEWEST_CHECK_SECONDS

    # -- output --------------------------------------------------------------

    def say(self, text: str) -> None:
        """Print a line of output."""
        print(text, file=self.out)

    def warn(self, text: str) -> None:
        """Print a warning (to the error stream); the line still succeeds."""
        self.out.flush()
        where = f"line {self.line_number}: " if self.line_number and not self.terminal else ""
        print(f"{where}warning: {text}", file=self.err)

    def note(self, text: str) -> None:
        """Print a message about the session (``format is json``): to the output in a
        terminal, to the error stream in a script, so its output stays clean data."""
        if self.terminal:
            self.say(text)
        else:
            self.out.flush()
            print(text, file=self.err)

    def fail(self, text: str) -> None:
        """Print an error (in a script, naming the script's line); the line counts as failed."""
        self.out.flush()
        where = f"line {self.line_number}: " if self.line_number and not self.terminal else ""
        print(where + text, file=self.err)
        self.failed = True

    # -- commands ------------------------------------------------------------

    def reload(self) -> None:
        """Open the newest published version of the store."""
        self.store = open_store(self.store_dir, session_factory=self.session_factory)

    def newest_version(self) -> int:
        """The newest version published in the store, read at most every 2 seconds (the
        toolbar asks at every redraw); the session's own version if it cannot be read."""
        now = time.monotonic()
        if now - self._newest_checked >= NEWEST_CHECK_SECONDS:
            self._newest_checked = now
            try:
                self._newest = self.store.newest_version()
            except TreestoreError:
                self._newest = self.store.version
        return max(self._newest, self.store.version)

    def info(self) -> None:
        """Print the store's summary (as ``treestore info``)."""
        write_info(self.store_dir, self.out)

    def explain(self, line: str) -> None:
        """Print the plan of the query ``line`` (nothing runs; no Spark starts)."""
        parts = split_line(line)
        try:
            plan = self.store.plan(parts.path, parts.rops, parts.ops)
        except PositionedError as exc:
            self.fail(_at_line(exc, line))
            return
        self.say(str(plan))

    def run_line(self, line: str) -> bool:
        """Run one line (a query or a meta-command); return whether it succeeded."""
        self.failed = False
        text = line.strip()
        if not text or text.startswith("#"):
            return True
        self.interrupted = False
        text = WORDS.get(text.lower(), text)
        try:
            if text.startswith("\\"):
                run_meta(self, text)
            else:
                with self._cancellable():
                    self._query(text)
        except PositionedError as exc:
            self.fail(_at_line(exc, text))
        except KeyboardInterrupt:  # Ctrl-C, whichever handler took it
            self.fail(CANCELLED)
        except TreestoreError as exc:
            # a Ctrl-C inside a Spark call surfaces as that call's failure
            self.fail(CANCELLED if self.interrupted else str(exc))
        except Exception as exc:  # a bug must not end the session: one line, then the prompt
            self.fail(CANCELLED if self.interrupted else f"{type(exc).__name__}: {exc}")
        return not self.failed

    @contextmanager
    def _cancellable(self) -> Iterator[None]:
        """While a query runs, Ctrl-C cancels its Spark jobs and interrupts it."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def interrupt(signum: int, frame: object) -> None:
            self.interrupted = True
            from pyspark import SparkContext

            context = SparkContext._active_spark_context
            if context is not None:
                context.cancelAllJobs()
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGINT, interrupt)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _query(self, text: str) -> None:
        parts = split_line(text)
        started = time.perf_counter()
        result = self.store.query(parts.path, parts.rops, parts.ops)
        rows: Iterable[Sequence[Value]] = result
        capped = False
        if self.limit:
            with _spinning(self.out if self.terminal else None, started, self.spark_ready):
                head = list(itertools.islice(rows, self.limit + 1))
            capped = len(head) > self.limit
            rows = head[: self.limit]
        self._paged_seconds = 0.0
        count = self._show(rows, result.column_names())
        seconds = time.perf_counter() - started - self._paged_seconds  # not the pager's time
        hint = repeated_keys(rows) if self.terminal and isinstance(rows, list) else None
        if hint is not None:
            self.say(hint)
        if capped:
            self.note(f"(showing the first {self.limit:,} rows; \\limit N shows more)")
        if self.timing:
            self.note(f"{count:,} row{'s' if count != 1 else ''} in {seconds:.2f} s")
        for warning in result.warnings():
            self.warn(_at_line(warning, text))
        if count == 0:
            missing = missing_name(self.store.store_version, parts.path)
            if missing is not None:
                self.warn(_at_line(missing, text))

    def _show(self, rows: Iterable[Sequence[Value]], columns: Sequence[str]) -> int:
        if not self.terminal:
            count = write_rows(rows, self.out, self.format, header=self.header, columns=columns)
            self.out.flush()
            return count
        buffer = io.StringIO()
        count = write_rows(rows, buffer, self.format, header=self.header, columns=columns)
        text = buffer.getvalue()
        size = shutil.get_terminal_size((80, 24))
        if self.pager is not None and screen_lines(text, size.columns) > size.lines - 2:
            paging = time.perf_counter()
            self.pager(text)
            self._paged_seconds = time.perf_counter() - paging
        else:
            self.out.write(text)
        return count


def screen_lines(text: str, columns: int) -> int:
    """How many lines ``text`` takes on a screen ``columns`` wide (long lines wrap)."""
    width = max(columns, 1)
    return sum(max(1, -(-len(line) // width)) for line in text.splitlines())


@contextmanager
def _spinning(
    out: TextIO | None, started: float, spark_ready: threading.Event | None = None
) -> Iterator[None]:
    """While the body runs, a spinner and the time since ``started`` turn on ``out`` (a
    terminal; ``None``: nothing shows), saying so while Spark is still starting
    (``spark_ready`` not set); the line is wiped when the body ends."""
    if out is None:
        yield
        return
    done = threading.Event()

    def spin() -> None:
        for frame in itertools.cycle("|/-\\"):
            if done.wait(0.1):
                break
            waiting = spark_ready is not None and not spark_ready.is_set()
            note = " (waiting for Spark to start)" if waiting else " " * 28
            out.write(f"\r{frame} {time.perf_counter() - started:.1f} s{note}")
            out.flush()
        out.write("\r" + " " * 48 + "\r")
        out.flush()

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        yield
    finally:
        done.set()
        spinner.join()


def _at_line(exc: PositionedError, line: str) -> str:
    """The error, with its caret under the column of the whole line typed."""
    parts = split_line(line)
    offset = _offset(exc, parts)
    if offset is None:
        return str(exc)
    column = offset + exc.column
    message = f"{exc.reason}. Line 1, column {column}.\n  {line}\n  {' ' * (column - 1)}^"
    if isinstance(exc, QuerySyntaxError) and exc.expected and not exc.hint:
        message += "\nExpected " + ", ".join(exc.expected) + "."
    if exc.hint:
        message += f"\n{exc.hint}"
    return message


def _offset(exc: PositionedError, parts: QueryLine) -> int | None:
    if isinstance(exc, QuerySyntaxError) and exc.text == parts.path:
        return parts.offsets["path"]
    for kind in ("rops", "ops"):
        if getattr(parts, kind) == exc.text and kind in parts.offsets:
            return parts.offsets[kind]
    return None
