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
from shell.formats import write_rows
from shell.info import write_info
from shell.repl.line import QueryLine, split_line
from shell.repl.meta import run_meta
from treestore.errors import PositionedError, QuerySyntaxError, TreestoreError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["CANCELLED", "ShellSession"]

CANCELLED = "cancelled: the query's Spark jobs were stopped"


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
        self.store: QueryStore = open_store(store_dir, session_factory=session_factory)
        self._newest, self._newest_checked = self.store.version, -NEWEST_CHECK_SECONDS

    # -- output --------------------------------------------------------------

    def say(self, text: str) -> None:
        """Print a line of output."""
        print(text, file=self.out)

    def fail(self, text: str) -> None:
        """Print an error; the current line counts as failed."""
        self.out.flush()
        print(text, file=self.err)
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

    def run_line(self, line: str) -> bool:
        """Run one line (a query or a meta-command); return whether it succeeded."""
        self.failed = False
        text = line.strip()
        if not text or text.startswith("#"):
            return True
        self.interrupted = False
        try:
            if text.startswith("\\"):
                run_meta(self, text)
            else:
                with self._cancellable():
                    self._query(text)
        except PositionedError as exc:
            self.fail(_at_line(exc, text))
        except (TreestoreError, KeyboardInterrupt) as exc:
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
        rows: Iterable[Sequence[Value]] = self.store.query(parts.path, parts.rops, parts.ops)
        capped = False
        if self.limit:
            head = list(itertools.islice(rows, self.limit + 1))
            capped = len(head) > self.limit
            rows = head[: self.limit]
        count = self._show(rows)
        seconds = time.perf_counter() - started
        if capped:
            self.say(f"(showing the first {self.limit:,} rows; \\limit N shows more)")
        if self.timing:
            self.say(f"{count:,} row{'s' if count != 1 else ''} in {seconds:.2f} s")

    def _show(self, rows: Iterable[Sequence[Value]]) -> int:
        if not self.terminal:
            count = write_rows(rows, self.out, self.format)
            self.out.flush()
            return count
        buffer = io.StringIO()
        count = write_rows(rows, buffer, self.format)
        text = buffer.getvalue()
        height = shutil.get_terminal_size((80, 24)).lines
        if self.pager is not None and text.count("\n") > height - 2:
            self.pager(text)
        else:
            self.out.write(text)
        return count


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
