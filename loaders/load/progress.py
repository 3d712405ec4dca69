"""Watching a load's Spark stages: progress events, for the caller to show.

A background thread polls Spark's status tracker a few times a second and emits a
:class:`~treestore.events.StageProgress` for each running stage and a
:class:`~treestore.events.StageFinished` when one ends (the shell draws bars in a
terminal, plain lines otherwise; see ``shell/progress_view.py``).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from treestore.events import EventSink, StageFinished, StageProgress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["spark_progress"]

_POLL_SECONDS = 0.25


class _StageWatcher:
    """Polls the status tracker; emits stage progress events."""

    def __init__(self, spark: SparkSession, on_event: EventSink, group: str | None = None) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.on_event = on_event
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
            self.on_event(StageProgress(stage, info.name, info.numCompletedTasks, info.numTasks))
        ended = sorted(s for s in self.seen if s not in active)
        if not ended:
            return
        # stages that ran wholly between two polls, before the last one that ended here,
        # are reported with them, all in stage order
        finished = {stage: self._ended(stage) for stage in ended}
        finished.update(self._unseen(below=ended[-1]))
        for stage in sorted(finished):
            self.reported.add(stage)
            self.on_event(finished[stage])

    def _ended(self, stage: int) -> StageFinished:
        name, tasks, began = self.seen.pop(stage)
        return StageFinished(stage, name, tasks, time.monotonic() - began)

    def _unseen(self, below: int | None = None) -> dict[int, StageFinished]:
        """The group's finished stages no poll saw running (no time known), unreported."""
        if self.group is None:
            return {}
        stages: set[int] = set()
        for job in self.tracker.getJobIdsForGroup(self.group):
            job_info = self.tracker.getJobInfo(job)
            if job_info is not None:
                stages.update(job_info.stageIds)
        found = {}
        for stage in sorted(stages - self.reported - set(self.seen)):
            if below is not None and stage > below:
                continue
            info = self.tracker.getStageInfo(stage)
            if info is not None and info.numCompletedTasks == info.numTasks:
                found[stage] = StageFinished(stage, info.name, info.numTasks, None)
        return found

    def finish_unseen(self) -> None:
        """Report the group's stages that ran wholly between two polls (no time known)."""
        for stage, event in sorted(self._unseen().items()):
            self.reported.add(stage)
            self.on_event(event)

    def run(self) -> None:
        while not self.stop.wait(_POLL_SECONDS):
            self.poll()
        self.poll()
        self.finish_unseen()


@contextmanager
def spark_progress(spark: SparkSession, on_event: EventSink) -> Iterator[None]:
    """Emit progress events for the Spark stages that run inside the block."""
    context = spark.sparkContext
    group = f"treestore-load-{uuid.uuid4().hex}"
    context.setJobGroup(group, "treestore load")
    watcher = _StageWatcher(spark, on_event, group)
    thread = threading.Thread(target=watcher.run, name="treestore-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        watcher.stop.set()
        thread.join()
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
