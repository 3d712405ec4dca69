"""The str and merge ops, the op-string parser, and their positioned errors."""

from __future__ import annotations

import pytest

from query import apply_ops, compile_ops
from treestore.errors import OpError

SEED_ROWS = [
    ["12345", "A", "1"],
    ["12345", "A", "3"],
    ["12345", "A", "4"],
    ["12345", "A", "5"],
    ["12345", "M", "abc"],
    ["67890", "A", "1"],
    ["67890", "A", "2"],
    ["67890", "M", "xyz"],
    ["67890", "M", "zzz"],
]


def test_seed_rops_give_the_seed_rows() -> None:
    rows = apply_ops(SEED_ROWS, "str=c1,v=,cat,c2,cat,v2,set;merge=kij")
    assert rows == [("12345", "A=1,A=3,A=4,A=5,M=abc"), ("67890", "A=1,A=2,M=xyz,M=zzz")]


def test_str_examples_from_hydra() -> None:
    rows = [["A", 1, "art"], ["B", 2, "bot"]]
    assert apply_ops(rows, "str=c0,c1,cat,v2,set") == [("A", 1, "A1"), ("B", 2, "B2")]
    rows2 = [["A", "1|||a", "art"]]
    assert apply_ops(rows2, r"str=c1,v|||,v0,split,v2,set") == [("A", "1|||a", "1")]


def test_str_range_set_past_end_and_nulls() -> None:
    assert apply_ops([["hello"]], "str=c0,v1,v-1,range,v5,set") == [("hello", "ell")]
    assert apply_ops([["a", None]], "str=c1,c0,cat,c7,cat,v0,set") == [("a", None)]


def test_str_eq_and_neq_drop_rows() -> None:
    rows = [["a", "x"], ["b", "y"], ["c", "x"]]
    assert apply_ops(rows, "str=c1,vx,eq") == [("a", "x"), ("c", "x")]
    assert apply_ops(rows, "str=c1,vx,neq") == [("b", "y")]


def test_merge_letters() -> None:
    rows = [["k", 1, 5, "a", 2], ["k", 3, 2, "b", None], ["z", 4, 1, "c", 7]]
    assert apply_ops(rows, "merge=ksmjsu") == [("k", 4, 2, "a,b", 2, 2), ("z", 4, 1, "c", 7, 1)]
    assert apply_ops(rows, "merge=kaMl") == [("k", 2.0, 5, "b"), ("z", 4.0, 1, "c")]
    assert apply_ops([["k", "2"], ["k", "3"]], "merge=kp") == [("k", 6)]
    assert apply_ops([["k", 10], ["k", 3]], "merge=kd") == [("k", 7)]
    assert apply_ops([["k", "x"], ["k", "x"], ["k", "y"]], "merge=kc") == [("k", 2)]


def test_merge_only_merges_adjacent_rows_and_keys_are_tuples() -> None:
    rows = [["a", "b", 1], ["a", "b", 2], ["ab", "", 4], ["a", "b", 8]]
    assert apply_ops(rows, "merge=kks") == [("a", "b", 3), ("ab", "", 4), ("a", "b", 8)]


def test_merge_emits_every_n_rows() -> None:
    rows = [["k", 1]] * 5
    assert apply_ops(rows, "merge=ks2") == [("k", 2), ("k", 2), ("k", 1)]


def test_plan_is_reusable() -> None:
    pipeline = compile_ops("merge=ks")
    assert (
        list(pipeline.run([["a", 1], ["a", 1]]))
        == list(pipeline.run([["a", 1], ["a", 1]]))
        == [("a", 2)]
    )


def test_escaped_semicolon_in_arguments() -> None:
    assert apply_ops([["x"]], r"str=v\;,v1,set") == [("x", ";")]


@pytest.mark.parametrize(
    ("ops", "column", "words"),
    [
        ("str=c1,cat", 8, "needs 2 values"),
        ("foo=1", 1, "Unknown op 'foo'"),
        ("str=c0;bar", 8, "Unknown op 'bar'"),
        ("merge=kzj", 8, "unknown column letter 'z'"),
        ("merge", 6, "needs one letter per column"),
        ("str=c1,bogus", 8, "unknown word 'bogus'"),
        ("str=c0;;", 8, "Unexpected"),
        ("=x", 1, "Unexpected"),
    ],
)
def test_op_errors_name_the_column(ops: str, column: int, words: str) -> None:
    with pytest.raises(OpError) as caught:
        compile_ops(ops)
    assert caught.value.column == column
    assert words in str(caught.value)


def test_runtime_error_points_at_the_letter() -> None:
    with pytest.raises(OpError) as caught:
        apply_ops([["k", "x"], ["k", "y"]], "merge=ks")
    assert caught.value.column == 8
    assert "not a number" in str(caught.value)


def test_no_ops_is_identity() -> None:
    assert apply_ops([["a", 1]], "") == [("a", 1)]
