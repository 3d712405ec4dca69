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
