"""A follower's options (:class:`FollowOptions`), one value built once by the command
line (``treestore load --follow``) or the Python call and passed down; each default is
defined here once, and the command line shows it. Also how a ``--trigger`` reads
(:func:`parse_trigger`).

Importing this module imports only :mod:`loaders.load.options` (a micro-batch's load
takes its options from here), never Spark.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from loaders.load.options import DEFAULT_MAX_REJECTED, LoadOptions
from treestore.errors import LoadError

__all__ = ["DEFAULT_TRIGGER", "FollowOptions", "parse_trigger"]

_DEFAULT_TRIGGER_SECONDS = 10.0
DEFAULT_TRIGGER = f"{_DEFAULT_TRIGGER_SECONDS:g}s"
"""How often a follower looks for new files, as ``--trigger`` reads it."""


def parse_trigger(text: str) -> float:
    """A trigger interval (``10s``, ``500ms``, ``2m``, ``1.5``: seconds) in seconds."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    cleaned = text.strip().lower()
    for unit in ("ms", "s", "m", "h"):
        if cleaned.endswith(unit):
            number, scale = cleaned[: -len(unit)], units[unit]
            break
    else:
        number, scale = cleaned, 1.0
    try:
        seconds = float(number) * scale
    except ValueError:
        raise LoadError(
            f"--trigger {text!r} is not a duration: give seconds (10, 10s), 500ms or 2m."
        ) from None
    if not 0 < seconds <= 86400:
        raise LoadError(f"--trigger {text!r} must be more than 0 and at most a day.")
    return seconds


@dataclass(frozen=True)
class FollowOptions:
    """How a follower runs (``treestore load --follow``,
    :func:`~loaders.follow.stream.follow_job`)."""

    trigger_seconds: float = _DEFAULT_TRIGGER_SECONDS
    """How often to look for new files (``--trigger``)."""

    available_now: bool = False
    """Load every file there now, in micro-batches, then stop (``--available-now``)."""

    max_files: int | None = None
    """At most this many new files of each source per micro-batch (``--max-files-per-trigger``;
    None: no limit)."""

    max_rejected: int = DEFAULT_MAX_REJECTED
    """A micro-batch with more rejected records than this fails: nothing of it is
    published (``--max-rejected``, as a load's)."""

    keep_versions: int = 2
    """Versions kept after each micro-batch's (older ones are collected). Fewer than a
    load keeps on purpose: a follower publishes a version per micro-batch, every few
    seconds, so older versions pile up fast and would keep their runs on disk."""

    poll_seconds: float = 0.2
    """How often the driver looks whether it was asked to stop."""

    def updated(self, **given: object) -> FollowOptions:
        """These options with the fields ``given`` as other than None replaced: how a
        call's keyword arguments become one options value."""
        changed = {name: value for name, value in given.items() if value is not None}
        return dataclasses.replace(self, **changed)  # type: ignore[arg-type]

    def load_options(self) -> LoadOptions:
        """The options of each micro-batch's load."""
        return LoadOptions(max_rejected=self.max_rejected, keep_versions=self.keep_versions)
