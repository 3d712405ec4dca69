"""What loads and sweeps tell the user as they run: events, shown by whoever called them.

The library never prints. A load emits :class:`Message` lines (files found, a lock
taken over, a rebuilt index), and :class:`StageProgress` / :class:`StageFinished`
as its Spark stages run; the command line and the shell decide how to show them
(rich progress bars in a terminal, plain lines otherwise). Each event can say
itself as one line of text (:meth:`text`), or ``None`` when it is only progress.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "Event",
    "EventSink",
    "Message",
    "StageFinished",
    "StageProgress",
    "as_lines",
    "ignore_events",
]


@dataclass(frozen=True)
class Message:
    """A line for the user: what a load found or did."""

    line: str

    def text(self) -> str:
        """The line itself."""
        return self.line


@dataclass(frozen=True)
class StageProgress:
    """A running Spark stage: ``done`` of its ``total`` tasks have finished."""

    stage: int
    name: str
    done: int
    total: int

    def text(self) -> None:
        """Progress has no line of its own (a progress bar shows it)."""
        return None


@dataclass(frozen=True)
class StageFinished:
    """A Spark stage finished with ``tasks`` tasks, in ``seconds`` (None: too quick to time)."""

    stage: int
    name: str
    tasks: int
    seconds: float | None

    def text(self) -> str:
        """``spark stage 3 done: 8 task(s) in 1.8 s``."""
        took = f" in {self.seconds:.1f} s" if self.seconds is not None else ""
        return f"spark stage {self.stage} done: {self.tasks} task(s){took}"


Event = Message | StageProgress | StageFinished
EventSink = Callable[[Event], None]


def ignore_events(event: Event) -> None:
    """The sink that shows nothing."""


def as_lines(write: Callable[[str], None]) -> EventSink:
    """A sink that passes each event's line (if it has one) to ``write``.

    >>> lines = []
    >>> sink = as_lines(lines.append)
    >>> sink(Message("source a: 1 new file(s)")); sink(StageProgress(0, "x", 1, 2))
    >>> sink(StageFinished(0, "x", 2, None))
    >>> lines
    ['source a: 1 new file(s)', 'spark stage 0 done: 2 task(s)']
    """

    def sink(event: Event) -> None:
        line = event.text()
        if line is not None:
            write(line)

    return sink
