"""Showing a load's events: rich progress bars for running Spark stages in a terminal,
plain lines otherwise (what the library emits is in :mod:`treestore.events`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from treestore.events import Event, EventSink, StageFinished, StageProgress, as_lines

__all__ = ["showing_events"]


class _Bars:
    """A bar per running Spark stage, on stderr, removed when the stage ends."""

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

    def show(self, event: StageProgress | StageFinished) -> None:
        if isinstance(event, StageFinished):
            bar = self.bars.pop(event.stage, None)
            if bar is not None:
                self.progress.remove_task(bar)
            return
        bar = self.bars.get(event.stage)
        if bar is None:
            bar = self.bars[event.stage] = self.progress.add_task(
                f"stage {event.stage}", total=event.total
            )
        self.progress.update(bar, completed=event.done, total=event.total)


@contextmanager
def showing_events(out: TextIO, terminal: bool | None = None) -> Iterator[EventSink]:
    """A sink that shows events while the block runs: messages as lines on ``out``; Spark
    stages as bars when ``terminal`` (default: stderr is a terminal), else one line each."""
    write_line = as_lines(lambda line: print(line, file=out))
    if not (sys.stderr.isatty() if terminal is None else terminal):
        yield write_line
        return
    bars = _Bars()

    def show(event: Event) -> None:
        if isinstance(event, StageProgress | StageFinished):
            bars.show(event)
        else:
            write_line(event)

    bars.progress.start()
    try:
        yield show
    finally:
        bars.progress.stop()
