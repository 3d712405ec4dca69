"""The load report's lines for people: counts read right in the singular too."""

from __future__ import annotations

from loaders.load.report import format_load_report


def _shard(created: int) -> dict[str, int]:
    return {"nodes_created": created, "nodes_updated": 2, "bytes_written": 10}


def test_counts_of_one_are_singular_and_the_rest_plural() -> None:
    report = {
        "version": 3,
        "seconds": 0.5,
        "sources": {
            "a": {"files": 1, "read": 1, "rejected": 0, "duplicates_in_load": 0,
                  "duplicates_of_earlier_loads": 0, "dropped": 0, "applied": 1,
                  "missed_updates": 0},
            "b": {"files": 0},
        },
        "shards": {0: _shard(1), 1: _shard(0), 2: _shard(1_234)},
    }  # fmt: skip
    lines = format_load_report(report, "st", shard_lines=2)
    assert lines[0] == "published version 3 in 0.5 s"
    assert lines[1].startswith("  source a: 1 file, 1 read, 0 rejected,")
    assert lines[2] == "  source b: no new files"
    assert lines[3] == "  shard 0: 1 node created, 2 updated, 10 bytes written"
    assert lines[4] == "  shard 1: 0 nodes created, 2 updated, 10 bytes written"
    assert lines[5] == "  1 more shard: 1,234 nodes created, 2 updated"
