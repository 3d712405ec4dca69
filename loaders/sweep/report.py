"""What a sweep did: its plan and why, counts of rows swept and skipped, partition balance."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["SweepReport"]

EventCounts = Callable[[], tuple[int, int]]


@dataclass
class SweepReport:
    """What a sweep did: rows swept and skipped, and how the partitions were balanced.

    The broadcast plan does not count the events to sweep them: it counts them (one
    light job) when ``events`` or ``skipped_events`` is first read.
    """

    intervals: int = 0
    skipped_intervals: int = 0
    partitions: int = 0
    max_partition_rows: int = 0
    median_partition_rows: float = 0.0
    packed_key: bool = False
    sampled_rows: int = 0  # when set, the balance is as a sample of this many rows foresaw it
    plan: str = "range"
    index_bytes: int = 0
    notes: list[str] = field(default_factory=list)
    _event_counts: tuple[int, int] | EventCounts = field(default=(0, 0), repr=False)

    def count_events_when_read(self, count: EventCounts) -> None:
        """Count the events (and those skipped) only when the report is read."""
        self._event_counts = count

    def _counted_events(self) -> tuple[int, int]:
        if callable(self._event_counts):
            self._event_counts = self._event_counts()
        return self._event_counts

    @property
    def events(self) -> int:
        """The event rows read (counted when first read after a broadcast sweep)."""
        return self._counted_events()[0]

    @events.setter
    def events(self, value: int) -> None:
        self._event_counts = (value, self._set_counts()[1])

    @property
    def skipped_events(self) -> int:
        """The event rows not swept: a null id or time."""
        return self._counted_events()[1]

    @skipped_events.setter
    def skipped_events(self, value: int) -> None:
        self._event_counts = (self._set_counts()[0], value)

    def _set_counts(self) -> tuple[int, int]:
        """The counts as set so far (a count not yet run is replaced, never run)."""
        return (0, 0) if callable(self._event_counts) else self._event_counts

    def lines(self) -> list[str]:
        """The report as printable lines."""
        if self.plan == "broadcast":
            how = (
                "plan broadcast: the intervals indexed on the driver "
                f"({self.index_bytes / 1e6:,.1f} MB), looked up where the events lie (no shuffle)"
            )
        else:
            foreseen = (
                f" (foreseen by a sample of {self.sampled_rows:,})" if self.sampled_rows else ""
            )
            how = (
                f"plan range: partitions {self.partitions}: max {self.max_partition_rows:,} rows, "
                f"median {self.median_partition_rows:,.0f} rows{foreseen}; "
                f"packed sort key: {self.packed_key}"
            )
        return [
            f"events {self.events:,} (skipped {self.skipped_events:,} with a null id or time)",
            f"intervals {self.intervals:,} (skipped {self.skipped_intervals:,}: null id or time, "
            "start after end, or empty)",
            how,
            *self.notes,
        ]
