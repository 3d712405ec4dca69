"""The sweep's choices and defaults, in one place: the CLI's options read them from here.

Importing this module imports nothing else (the command line builds its parser from
it without starting Spark or loading numpy).
"""

from __future__ import annotations

__all__ = [
    "AGGREGATIONS",
    "BROADCAST_LIMIT",
    "CLOSED",
    "COLUMNS",
    "DEFAULT_AGG",
    "DEFAULT_CLOSED",
    "DEFAULT_PLAN",
    "DEFAULT_SHARDS",
    "INPUT_FORMATS",
    "PLANS",
]

AGGREGATIONS = ("sum", "count", "set", "list", "min", "max")
"""The named aggregations (besides a pair of functions)."""

CLOSED = ("both", "left", "right", "neither")
"""Which ends of ``[start, end]`` an interval includes: both, the left, the right, neither."""

PLANS = ("auto", "broadcast", "range")
"""The sweep's plans: ``auto`` picks ``broadcast`` for sum/count when it fits, else ``range``."""

DEFAULT_AGG, DEFAULT_CLOSED, DEFAULT_PLAN = "sum", "both", "auto"

BROADCAST_LIMIT = 4_000_000
"""``auto`` takes the broadcast plan for at most this many valid intervals."""

COLUMNS = {"id": "id", "time": "time", "start": "start", "end": "end", "value": "points"}
"""The default column names, by role."""

DEFAULT_SHARDS = 8
"""The shard count of a store the sweep command creates."""

INPUT_FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".json": "json",
    ".jsonl": "json",
    ".parquet": "parquet",
}
"""The file name suffixes the sweep's inputs may have, and the formats they name
(``--format`` takes one of the formats)."""
