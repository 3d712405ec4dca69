"""Op strings of any length run (2,000 chained ops once ended in a RecursionError), on rows
and on columns, exactly as a short chain runs; ops in ops are refused past their depth
with the place of the first op too deep."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest

from query import apply_ops, compile_ops
from query.ops.chain import SEGMENT_STAGES, chain
from query.ops.columns import plain, run_on_columns
from query.ops.compiler import MOST_NESTED
from treestore.errors import OpError

ROWS = [["b", 2], ["c", 3], ["a", 1]]


def _segment_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "treestore-ops-segment"]


@pytest.mark.parametrize("count", [2_000, 10_000])
def test_thousands_of_chained_ops_run(count: int) -> None:
    assert apply_ops(ROWS, ";".join(["sort"] * count)) == [("a", 1), ("b", 2), ("c", 3)]
    assert not _segment_threads()


def test_a_long_chain_of_streaming_ops_gives_what_each_op_gives() -> None:
    ops = ";".join(["num=c1,n1,add,v1,set"] * 3_000)
    assert apply_ops(ROWS, ops) == [("b", 3_002), ("c", 3_003), ("a", 3_001)]


def test_a_compiled_long_chain_survives_pickling() -> None:
    """rops travel to Spark's tasks pickled; the chain is flat, and runs on the far side."""
    pipeline = pickle.loads(pickle.dumps(compile_ops(";".join(["sort=1:n:d"] * 2_000))))
    assert list(pipeline.run(ROWS)) == [("c", 3), ("b", 2), ("a", 1)]


def test_thousands_of_ops_run_on_columns() -> None:
    ops = compile_ops(";".join(["sort"] * 2_000)).ops
    chunks = iter(
        [(2, [pa.array(["b", "a"]), pa.array([2, 1])]), (1, [pa.array(["c"]), pa.array([3])])]
    )
    out = list(run_on_columns(ops, chunks))
    assert [[plain(c).to_pylist() for c in columns] for _, columns in out] == [
        [["a", "b", "c"], [1, 2, 3]]
    ]


def test_an_error_deep_in_a_long_chain_comes_out_at_its_place() -> None:
    ops = ";".join(["sort"] * 1_500 + ["datef=0:unixmillis:yyyy"] + ["sort"] * 1_500)
    with pytest.raises(OpError, match="cannot read the date") as caught:
        apply_ops([["9" * 18]], ops)
    assert (caught.value.line, caught.value.column) == (1, 1_500 * 5 + 7)
    assert not _segment_threads()


def test_a_long_chain_stopped_early_closes_every_op_and_leaves_no_thread() -> None:
    rows = iter([["x", i] for i in range(10_000)])
    out = compile_ops(";".join(["limit=5000"] * 2_000 + ["limit=3"])).run(rows)
    assert [row[1] for row in out] == [0, 1, 2]
    assert next(rows) == ["x", 3]  # read no further than the ops asked
    assert not _segment_threads()


def _logged(log: list[str], name: str) -> Callable[[Iterator[int]], Iterator[int]]:
    def stage(items: Iterator[int]) -> Iterator[int]:
        log.append(f"{name} starts")
        try:
            for item in items:
                log.append(f"{name} got {item}")
                yield item
                yield -item
        finally:
            log.append(f"{name} closed")

    return stage


@pytest.mark.parametrize("count", [3, SEGMENT_STAGES + 1, 3 * SEGMENT_STAGES + 5])
def test_a_chain_in_segments_runs_each_stage_as_one_stack_would(count: int) -> None:
    """Each stage sees its items exactly when it would in one thread (groupby's order
    depends on how far its ops have read), and a chain closed early closes every stage."""
    expected: list[str] = []
    stream: Iterator[int] = iter([1, 2, 3])
    for n in range(count):
        stream = _logged(expected, f"s{n}")(stream)
    expected_items = [next(stream) for _ in range(5)]
    stream.close()  # type: ignore[attr-defined]

    log: list[str] = []
    chained = chain([_logged(log, f"s{n}") for n in range(count)], [1, 2, 3])
    assert [next(chained) for _ in range(5)] == expected_items
    chained.close()  # type: ignore[attr-defined]
    assert log == expected
    assert not _segment_threads()


def test_groupby_with_ops_past_a_segment_keeps_hydras_order() -> None:
    rows = [["cat", "a"], ["dog", "a"], ["dog", "b"], ["cat", "b"], ["dog", "c"]]
    short = "groupby=k:limit=2"
    long = short + "\\;limit=9" * (2 * SEGMENT_STAGES)
    assert apply_ops(rows, long) == apply_ops(rows, short)


def test_ops_in_ops_run_up_to_their_depth() -> None:
    assert apply_ops(ROWS, "groupby=k:" * MOST_NESTED + "sort") == [("b", 2), ("c", 3), ("a", 1)]


@pytest.mark.parametrize("depth", [MOST_NESTED + 1, 1_000, 5_000])
def test_ops_in_ops_past_their_depth_are_refused_at_the_first_op_too_deep(depth: int) -> None:
    with pytest.raises(OpError) as caught:
        compile_ops("groupby=k:" * depth + "sort")  # was a RecursionError from 1,000
    error = caught.value
    assert (error.line, error.column) == (1, len("groupby=k:") * (MOST_NESTED + 1) + 1)
    assert (
        error.reason
        == f"groupby: the ops are nested too deeply (ops in ops more than {MOST_NESTED} deep)"
    )
    assert error.hint == f"Nest at most {MOST_NESTED} groupby ops inside each other."
