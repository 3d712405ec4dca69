"""The shell shows its prompt at once: Spark starts in the background, and a query that
needs it waits with a spinner saying so."""

from __future__ import annotations

import io
import threading
import time
from typing import Any

from shell.repl.app import start_spark_in_background
from shell.repl.session import _spinning


class _SlowSpark:
    """A session factory that blocks until released (as Spark's start does)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.jobs = 0

    def __call__(self) -> Any:
        self.release.wait(120)  # a guard against a hang: the test releases it
        return self

    def range(self, n: int) -> Any:
        return self

    def count(self) -> int:
        self.jobs += 1
        return 1


def test_starting_spark_does_not_wait_for_it() -> None:
    spark = _SlowSpark()
    ready = start_spark_in_background(spark)  # returns while the factory still blocks
    assert not ready.is_set() and spark.jobs == 0
    spark.release.set()
    assert ready.wait(10) and spark.jobs == 1  # the warm-up job ran once


def test_a_failed_start_still_lets_the_shell_go_on() -> None:
    def broken() -> Any:
        raise RuntimeError("no Java")

    assert start_spark_in_background(broken).wait(10)


def _shows(out: io.StringIO, text: str) -> bool:
    """Whether the spinner writes ``text`` to ``out`` (waited for, however long the machine
    takes to run its thread: the minute is a guard against a hang, not a measure)."""
    deadline = time.monotonic() + 60
    while text not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    return text in out.getvalue()


def test_the_spinner_says_a_query_waits_for_spark_then_stops_saying_it() -> None:
    ready = threading.Event()
    waiting = io.StringIO()
    with _spinning(waiting, time.perf_counter(), ready):
        assert _shows(waiting, " s (waiting for Spark to start)")
    ready.set()
    running = io.StringIO()
    with _spinning(running, time.perf_counter(), ready):
        assert _shows(running, " s" + " " * 28)  # a frame with its seconds, the note blanked
    assert "waiting for Spark" not in running.getvalue()
    assert running.getvalue().endswith("\r" + " " * 48 + "\r")  # the line wiped at the end
