"""The load's task protocol: typed payloads encoded once and decoded back as themselves."""

from __future__ import annotations

from loaders.load.protocol import (
    TASK_SCHEMA,
    PendingCounts,
    ShardResult,
    SourceCounts,
    TaskTotals,
    decode_results,
    encode_results,
)


def _result(shard: int) -> ShardResult:
    return ShardResult(
        shard=shard,
        state={"runs": ["r1"], "next_id": 9, "nodes": 8, "bytes": 100},
        records=5,
        missed_updates=1,
        bad_values=0,
        nodes_created=8,
        nodes_updated=0,
        bytes_written=100,
        compacted=False,
        pending=PendingCounts(buffered=2, waiting=2),
        task_seconds={"input": 0.5, "records": 0.25},
    )


def test_results_and_totals_round_trip_through_a_task_batch() -> None:
    totals = TaskTotals(
        files={"a.tsv": 5},
        sources={"attributes": SourceCounts(read=5, applied=4)},
        dedup={3: {"attributes": ["run-1"]}},  # shard numbers stay whole numbers
        rejected_count=1,
        rejected_file="rejected/x/part-1.jsonl",
    )
    batch = encode_results([_result(3), _result(5)], totals)
    assert [f.name for f in batch.schema] == [c.split()[0] for c in TASK_SCHEMA.split(", ")]
    shards, all_totals = decode_results(batch.to_pylist())
    assert shards == [_result(3), _result(5)] and all_totals == [totals]


def test_a_shard_report_keeps_the_published_fields_in_their_order() -> None:
    assert list(_result(3).report()) == [
        "records",
        "missed_updates",
        "bad_values",
        "nodes_created",
        "nodes_updated",
        "bytes_written",
        "compacted",
        "pending",
        "task_seconds",
        "task_cpu_seconds",
        "parts",
        "nodes",
        "bytes",
    ]
    assert _result(3).report()["pending"] == {
        "buffered": 2,
        "applied": 0,
        "expired": 0,
        "waiting": 2,
    }
