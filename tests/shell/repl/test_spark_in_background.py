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
        self.release.wait(10)
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


def test_the_spinner_says_a_query_waits_for_spark_then_stops_saying_it() -> None:
    ready = threading.Event()
    waiting = io.StringIO()
    with _spinning(waiting, time.perf_counter(), ready):
        time.sleep(0.35)
    assert "(waiting for Spark to start)" in waiting.getvalue()
    ready.set()
    running = io.StringIO()
    with _spinning(running, time.perf_counter(), ready):
        time.sleep(0.35)
    assert " s" in running.getvalue() and "waiting for Spark" not in running.getvalue()
