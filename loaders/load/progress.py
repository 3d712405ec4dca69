"""Showing a load's running Spark stages: a rich progress bar in a terminal, plain lines otherwise.

A background thread polls Spark's status tracker a few times a second. In a
terminal each running stage is a bar of its tasks (on stderr, removed when the
load ends); otherwise each finished stage is one plain line through ``log``.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["spark_progress"]

_POLL_SECONDS = 0.25


class _StageWatcher:
    """Polls the status tracker; reports stage progress to a display."""

    def __init__(self, spark: SparkSession, display: Any, group: str | None = None) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.display = display
        self.group = group
        self.stop = threading.Event()
        self.seen: dict[int, tuple[str, int, float]] = {}
        self.reported: set[int] = set()

    def poll(self) -> None:
        active = set(self.tracker.getActiveStageIds())
        for stage in sorted(active):
            info = self.tracker.getStageInfo(stage)
            if info is None:
                continue
            if stage not in self.seen:
                self.seen[stage] = (info.name, info.numTasks, time.monotonic())
            self.display.update(stage, info.name, info.numCompletedTasks, info.numTasks)
        for stage in [s for s in self.seen if s not in active]:
            name, tasks, began = self.seen.pop(stage)
            self.reported.add(stage)
            self.display.finish(stage, name, tasks, time.monotonic() - began)

    def finish_unseen(self) -> None:
        """Report the group's stages that ran wholly between two polls (no time known)."""
        if self.group is None:
            return
        stages: set[int] = set()
        for job in self.tracker.getJobIdsForGroup(self.group):
            job_info = self.tracker.getJobInfo(job)
            if job_info is not None:
                stages.update(job_info.stageIds)
        for stage in sorted(stages - self.reported - set(self.seen)):
            info = self.tracker.getStageInfo(stage)
            if info is not None and info.numCompletedTasks == info.numTasks:
                self.reported.add(stage)
                self.display.finish(stage, info.name, info.numTasks, None)

    def run(self) -> None:
        while not self.stop.wait(_POLL_SECONDS):
            self.poll()
        self.poll()
        self.finish_unseen()


class _Lines:
    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log

    def update(self, stage: int, name: str, done: int, total: int) -> None:
        pass

    def finish(self, stage: int, name: str, tasks: int, seconds: float | None) -> None:
        took = f" in {seconds:.1f} s" if seconds is not None else ""
        self.log(f"spark stage {stage} done: {tasks} task(s){took}")


class _Bars:
    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            "tasks",
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.bars: dict[int, Any] = {}

    def update(self, stage: int, name: str, done: int, total: int) -> None:
        bar = self.bars.get(stage)
        if bar is None:
            bar = self.bars[stage] = self.progress.add_task(f"stage {stage}", total=total)
        self.progress.update(bar, completed=done, total=total)

    def finish(self, stage: int, name: str, tasks: int, seconds: float | None) -> None:
        bar = self.bars.pop(stage, None)
        if bar is not None:
            self.progress.remove_task(bar)


@contextmanager
def spark_progress(
    spark: SparkSession, log: Callable[[str], None], enabled: bool | None = None
) -> Iterator[None]:
    """Show the Spark stages that run inside the block (``enabled`` None: stderr is a terminal)."""
    terminal = sys.stderr.isatty() if enabled is None else enabled
    display: Any = _Bars() if terminal else _Lines(log)
    context = spark.sparkContext
    group = f"treestore-load-{uuid.uuid4().hex}"
    context.setJobGroup(group, "treestore load")
    watcher = _StageWatcher(spark, display, group)
    thread = threading.Thread(target=watcher.run, name="treestore-progress", daemon=True)
    if terminal:
        display.progress.start()
    thread.start()
    try:
        yield
    finally:
        watcher.stop.set()
        thread.join()
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        if terminal:
            display.progress.stop()
