"""The sweep's choices and defaults, in one place: the CLI's options read them from here,
and the ``treestore sweep`` command's options are one value (:class:`SweepOptions`),
built once by the command line or the Python call and passed down.

Importing this module imports nothing else (the command line builds its parser from
it without starting Spark or loading numpy).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

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
    "SweepOptions",
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

COLUMNS: Mapping[str, str] = MappingProxyType(
    {"id": "id", "time": "time", "start": "start", "end": "end", "value": "points"}
)
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


@dataclass(frozen=True)
class SweepOptions:
    """How a ``treestore sweep`` runs (:func:`~loaders.sweep.command.run_sweep`): the
    sweep's own choices (:func:`~loaders.sweep.driver.interval_sweep` takes them) and
    the command's (how the inputs read, where the results also go, a new store's shards).
    """

    agg: str = DEFAULT_AGG
    """How the covering intervals' points are aggregated: one of :data:`AGGREGATIONS`."""

    closed: str = DEFAULT_CLOSED
    """Which ends of ``[start, end]`` an interval includes: one of :data:`CLOSED`."""

    plan: str = DEFAULT_PLAN
    """The sweep's plan: one of :data:`PLANS`."""

    columns: Mapping[str, str] = field(default_factory=lambda: COLUMNS)
    """The inputs' column names by role (id, time, start, end, value); a role not given
    keeps its name of :data:`COLUMNS`."""

    time_format: str | None = None
    """How string times read (a Spark datetime pattern, ``HH:mm``); None: as Spark casts
    them, or as times of day when every value reads as one."""

    input_format: str | None = None
    """The format of both inputs (a value of :data:`INPUT_FORMATS`); None: told by their
    names."""

    out: str | None = None
    """Also write the results as Parquet here: a ``.parquet`` file, else a folder of
    part files."""

    replace: bool = False
    """Replace the results already at ``out`` (otherwise they are refused)."""

    shards: int = DEFAULT_SHARDS
    """The shard count of the store, when the sweep creates it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", MappingProxyType({**COLUMNS, **self.columns}))

    def updated(self, **given: object) -> SweepOptions:
        """These options with the fields ``given`` as other than None replaced: how a
        call's keyword arguments become one options value."""
        changed = {name: value for name, value in given.items() if value is not None}
        return dataclasses.replace(self, **changed)  # type: ignore[arg-type]
