"""Jobs and inputs that test modules of more than one room load.

The clicks job (one source whose records carry dedup keys) with its two batches, a
writer of its input files and its load; and the pending job (attributes create UID
nodes, mapping rows only update them, their records waiting up to two loads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loaders import load_job, run_load
from treestore.events import as_lines, ignore_events

__all__ = [
    "CLICKS_FIRST",
    "CLICKS_JOB",
    "CLICKS_SECOND",
    "PENDING_JOB",
    "load_clicks",
    "write_clicks",
]

CLICKS_JOB = {
    "shards": 4,
    "source": [
        {
            "name": "clicks",
            "path": "clicks/",
            "format": "tsv",
            "header": True,
            "shard_by": "UID",
            "dedup": {"keys": ["TIME", "UID"]},
        }
    ],
    "tree": {
        "root": [
            {"type": "const", "value": "root"},
            {"type": "value", "key": "UID"},
            {"type": "value", "key": "URL"},
        ]
    },
}

CLICKS_FIRST = [(1, "u1", "a"), (2, "u1", "b"), (1, "u2", "a"), (1, "u1", "a"), (3, "u3", "c")]
"""The first batch of clicks: (time, UID, URL); a row repeats within it."""
CLICKS_SECOND = [(2, "u1", "b"), (3, "u3", "c"), (4, "u1", "d"), (4, "u1", "d")]
"""The second batch: two rows of the first, and a row repeated within it."""


def write_clicks(folder: Path, name: str, rows: list[tuple[int, str, str]]) -> None:
    """Write ``rows`` as the clicks file ``name`` (tsv with a header) under ``folder``."""
    lines = ["TIME\tUID\tURL", *(f"{t}\t{u}\t{url}" for t, u, url in rows)]
    (folder / "clicks" / name).write_text("\n".join(lines) + "\n")


def load_clicks(spark: Any, folder: Path, lines: list[str] | None = None) -> dict[str, Any]:
    """Load ``folder``'s clicks job into ``folder/store``; its report. ``lines``, when
    given, gets the load's events as lines."""
    on_event = as_lines(lines.append) if lines is not None else ignore_events
    result = run_load(spark, load_job(folder / "job.json"), folder / "store", on_event=on_event)
    return result.report


PENDING_JOB = {
    "shards": 2,
    "source": [
        {
            "name": "attributes",
            "path": "a/",
            "format": "csv",
            "shard_by": "U",
            "inject_source_name": "ATTR",
        },
        {
            "name": "mapping",
            "path": "m/",
            "format": "csv",
            "shard_by": "U",
            "inject_source_name": "MAPPING",
        },
    ],
    "tree": {
        "root": [
            {"type": "const", "value": "root"},
            {
                "type": "branch",
                "list": [
                    [
                        {
                            "type": "value",
                            "key": "U",
                            "filter": {
                                "op": "field",
                                "from": "ATTR",
                                "filter": {"op": "empty", "not": True},
                            },
                        }
                    ],
                    [
                        {
                            "type": "value",
                            "key": "U",
                            "create": False,
                            "pending": {"loads": 2},
                            "filter": {
                                "op": "field",
                                "from": "MAPPING",
                                "filter": {"op": "empty", "not": True},
                            },
                        },
                        {"type": "const", "value": "M"},
                        {"type": "value", "key": "P"},
                    ],
                ],
            },
            {"type": "const", "value": "seen"},
        ]
    },
}
