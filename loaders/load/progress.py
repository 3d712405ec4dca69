"""Watching a load's Spark stages: progress events, for the caller to show.

A background thread polls Spark's status tracker a few times a second and emits a
:class:`~treestore.events.StageProgress` for each running stage and a
:class:`~treestore.events.StageFinished` when one ends (the shell draws bars in a
terminal, plain lines otherwise; see ``shell/progress_view.py``).

A Spark Connect session has no status tracker: its client calls a progress handler
(``spark.registerProgressHandler``) with the stages of the operation it runs each time
the server reports progress, and once when the operation ends; the same events come
from there. Its stages have no names (the events name them ``stage N``), and a stage
the server skipped (its shuffle output was already there) is reported running with no
task done and never ends: it gets no ``StageFinished``, as in a classic session.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from treestore.events import EventSink, Message, StageFinished, StageProgress
from treestore.spark import is_connect

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
        for stage in sorted(active - self.reported):
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
        finished.update(self._unseen(active, below=ended[-1]))
        for stage in sorted(finished):
            self.reported.add(stage)
            self.on_event(finished[stage])

    def _ended(self, stage: int) -> StageFinished:
        name, tasks, began = self.seen.pop(stage)
        return StageFinished(stage, name, tasks, time.monotonic() - began)

    def _unseen(self, active: set[int], below: int | None = None) -> dict[int, StageFinished]:
        """The group's finished stages no poll saw running (no time known), unreported; a
        stage still active (all its tasks done, not yet marked ended) waits for its end."""
        if self.group is None:
            return {}
        stages: set[int] = set()
        for job in self.tracker.getJobIdsForGroup(self.group):
            job_info = self.tracker.getJobInfo(job)
            if job_info is not None:
                stages.update(job_info.stageIds)
        found = {}
        for stage in sorted(stages - self.reported - set(self.seen) - active):
            if below is not None and stage > below:
                continue
            info = self.tracker.getStageInfo(stage)
            if info is not None and info.numCompletedTasks == info.numTasks:
                found[stage] = StageFinished(stage, info.name, info.numTasks, None)
        return found

    def finish_unseen(self) -> None:
        """Report the group's stages that ran wholly between two polls (no time known)."""
        active = set(self.tracker.getActiveStageIds())
        for stage, event in sorted(self._unseen(active).items()):
            self.reported.add(stage)
            self.on_event(event)

    def run(self) -> None:
        while not self.stop.wait(_POLL_SECONDS):
            self.poll()
        self.poll()
        self.finish_unseen()


class _ConnectStages:
    """A Spark Connect session's progress handler: emits stage progress events for the
    operations run by one thread (the load's; the client calls handlers in the thread
    that runs the operation). It never raises: an error in a handler fails the query."""

    def __init__(self, on_event: EventSink) -> None:
        self.on_event = on_event
        self.thread = threading.get_ident()
        self.began: dict[int, float] = {}
        self.reported: set[int] = set()

    def __call__(
        self, stages: Iterable[Any] | None, inflight_tasks: int, operation_id: Any, done: bool
    ) -> None:
        """What the client calls (keywords ``stages``, ``inflight_tasks``,
        ``operation_id``, ``done``)."""
        if threading.get_ident() != self.thread:
            return
        with contextlib.suppress(Exception):  # progress is only shown: the load goes on
            self._update(list(stages or ()))

    def _update(self, stages: list[Any]) -> None:
        now = time.monotonic()
        finished = []
        for stage in sorted(stages, key=lambda s: int(s.stage_id)):
            number = int(stage.stage_id)
            if number in self.reported:
                continue
            name = f"stage {number}"
            if stage.done:
                self.reported.add(number)
                began = self.began.pop(number, None)
                took = None if began is None else now - began
                finished.append(StageFinished(number, name, int(stage.num_tasks), took))
            else:
                self.began.setdefault(number, now)
                done, total = int(stage.num_completed_tasks), int(stage.num_tasks)
                self.on_event(StageProgress(number, name, done, total))
        for event in finished:
            self.on_event(event)


_NO_PROGRESS = "Spark Connect: this client reports no stage progress (no progress handlers)"


@contextmanager
def _connect_progress(spark: SparkSession, on_event: EventSink) -> Iterator[None]:
    """Emit progress events for the stages a Spark Connect session runs inside the block."""
    register = getattr(spark, "registerProgressHandler", None)
    if register is None:
        on_event(Message(_NO_PROGRESS))
        yield
        return
    handler = _ConnectStages(on_event)
    register(handler)
    try:
        yield
    finally:
        spark.removeProgressHandler(handler)  # type: ignore[arg-type]


@contextmanager
def spark_progress(
    spark: SparkSession, on_event: EventSink, what: str = "treestore load"
) -> Iterator[None]:
    """Emit progress events for the Spark stages that run inside the block (``what``: the
    job group's description). Inside another such block of the same thread (a sweep's
    load) it adds nothing: the outer block already reports every stage, once."""
    if getattr(_watching, "active", False):
        yield
        return
    _watching.active = True
    try:
        with _watched(spark, on_event, what):
            yield
    finally:
        _watching.active = False


_watching = threading.local()


@contextmanager
def _watched(spark: SparkSession, on_event: EventSink, what: str) -> Iterator[None]:
    if is_connect(spark):
        with _connect_progress(spark, on_event):
            yield
        return
    context = spark.sparkContext
    group = f"{what.replace(' ', '-')}-{uuid.uuid4().hex}"
    context.setJobGroup(group, what)
    watcher = _StageWatcher(spark, on_event, group)
    thread = threading.Thread(target=watcher.run, name="treestore-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        watcher.stop.set()
        thread.join()
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
