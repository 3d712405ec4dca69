"""Starting Spark where people see it: a command that starts Spark says so at once and,
in a terminal, counts the seconds while it waits (``starting Spark… 12 s``); then one
line with how long it took. Plain lines when stderr is not a terminal. A session that
is already running is returned without a word."""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkStart", "started_spark"]


class SparkStart:
    """When the command began and how long its Spark took to start (0 if it did not)."""

    def __init__(self) -> None:
        self.began = time.perf_counter()
        self.seconds = 0.0

    def whole(self) -> float:
        """Seconds since the command began."""
        return time.perf_counter() - self.began


def _running() -> bool:
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is not None


def started_spark(
    master: str | None,
    err: TextIO | None = None,
    *,
    terminal: bool | None = None,
    start: SparkStart | None = None,
) -> SparkSession:
    """The process's Spark session (:func:`treestore.spark.get_session`), starting it with
    a live count of the seconds on ``err`` (default stderr) when ``terminal`` (default:
    ``err`` is a terminal), or a plain line before and after. ``start`` gets the seconds."""
    from treestore.spark import get_session

    if _running():
        return get_session(master)
    err = err if err is not None else sys.stderr
    terminal = err.isatty() if terminal is None else terminal
    began = time.perf_counter()
    done = threading.Event()
    if terminal:
        ticker = threading.Thread(target=_tick, args=(err, began, done), daemon=True)
        ticker.start()
    else:
        print("starting Spark…", file=err, flush=True)
    try:
        session = get_session(master)
    finally:
        done.set()
        if terminal:
            ticker.join()
            err.write("\r\033[K")
    seconds = time.perf_counter() - began
    if start is not None:
        start.seconds = seconds
    print(f"Spark started in {seconds:.1f} s", file=err, flush=True)
    return session


def _tick(err: TextIO, began: float, done: threading.Event) -> None:
    """Rewrite ``starting Spark… N s`` on one line every second until ``done``."""
    while True:
        err.write(f"\rstarting Spark… {time.perf_counter() - began:.0f} s")
        err.flush()
        if done.wait(1.0):
            return
