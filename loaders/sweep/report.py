"""What a sweep did: its plan and why, counts of rows swept and skipped, partition balance."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SweepReport"]


@dataclass
class SweepReport:
    """What a sweep did: rows swept and skipped, and how the partitions were balanced."""

    events: int = 0
    intervals: int = 0
    skipped_events: int = 0
    skipped_intervals: int = 0
    partitions: int = 0
    max_partition_rows: int = 0
    median_partition_rows: float = 0.0
    packed_key: bool = False
    plan: str = "range"
    index_bytes: int = 0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The report as printable lines."""
        if self.plan == "broadcast":
            how = (
                "plan broadcast: the intervals indexed on the driver "
                f"({self.index_bytes / 1e6:,.1f} MB), looked up where the events lie (no shuffle)"
            )
        else:
            how = (
                f"plan range: partitions {self.partitions}: max {self.max_partition_rows:,} rows, "
                f"median {self.median_partition_rows:,.0f} rows; packed sort key: {self.packed_key}"
            )
        return [
            f"events {self.events:,} (skipped {self.skipped_events:,} with a null id or time)",
            f"intervals {self.intervals:,} (skipped {self.skipped_intervals:,}: null id or time, "
            "start after end, or empty)",
            how,
            *self.notes,
        ]
