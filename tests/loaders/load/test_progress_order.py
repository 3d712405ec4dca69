"""Stage lines come in stage order, also for stages that ran wholly between two polls."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from loaders.load.progress import _StageWatcher
from treestore.events import Event, StageFinished


@dataclass
class _Stage:
    name: str
    numTasks: int
    numCompletedTasks: int


@dataclass
class _Job:
    stageIds: list[int]


@dataclass
class _Tracker:
    """Spark's status tracker as the watcher sees it: stages 6 and 7 ran and ended between
    two polls, stage 9 was seen running, then ended."""

    active: list[int] = field(default_factory=lambda: [9])
    stages: dict[int, _Stage] = field(
        default_factory=lambda: {s: _Stage(f"stage {s}", 2, 2) for s in (6, 7, 9)}
    )

    def getActiveStageIds(self) -> list[int]:
        return self.active

    def getStageInfo(self, stage: int) -> _Stage:
        return self.stages[stage]

    def getJobIdsForGroup(self, group: str) -> list[int]:
        return [0]

    def getJobInfo(self, job: int) -> _Job:
        return _Job([6, 7, 9])


def test_stages_finish_in_stage_order() -> None:
    events: list[Event] = []
    tracker = _Tracker()
    spark: Any = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=lambda: tracker))
    watcher = _StageWatcher(spark, events.append, "g")
    watcher.poll()  # stage 9 running
    tracker.active = []
    watcher.poll()  # stage 9 ended; 6 and 7 ended unseen before it
    watcher.finish_unseen()
    finished = [e.stage for e in events if isinstance(e, StageFinished)]
    assert finished == [6, 7, 9]


def test_a_stage_is_reported_once() -> None:
    """Stage 8 reads as finished (every task done) when stage 9 ends, then shows up active
    (Spark reports a stage's end after its tasks'): it is reported once, not again when it
    ends; and a stage active with its tasks done is left for its end."""
    events: list[Event] = []
    tracker = _Tracker(active=[9])
    tracker.stages[8] = _Stage("stage 8", 1, 1)
    tracker.stages[10] = _Stage("stage 10", 1, 1)
    tracker.getJobInfo = lambda job: _Job([8, 9, 10])  # type: ignore[method-assign]
    spark: Any = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=lambda: tracker))
    watcher = _StageWatcher(spark, events.append, "g")
    watcher.poll()  # stage 9 running
    tracker.active = []
    watcher.poll()  # 9 ended; 8 reads as done, unseen
    tracker.active = [8, 10]
    watcher.poll()
    tracker.active = [10]
    watcher.finish_unseen()  # 10 is active with its task done: not yet
    tracker.active = []
    watcher.poll()
    watcher.finish_unseen()
    finished = [e.stage for e in events if isinstance(e, StageFinished)]
    assert finished == [8, 9, 10]
