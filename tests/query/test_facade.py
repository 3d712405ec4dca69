"""The query facade: ``apply_ops`` runs an op string over plain rows without Spark, as
the compiled pipeline does, and the facade's names are its rooms' own."""

from __future__ import annotations

import query
from query import apply_ops, compile_ops
from query.ops import compiler
from query.syntax import path_parser
from query.walk import row_walker


def test_apply_ops_takes_any_rows_and_gives_tuples() -> None:
    rows = (iter(row) for row in [["b", "2"], ["a", "1"], ["b", "3"]])
    assert apply_ops(rows, "sort") == [("a", "1"), ("b", "2"), ("b", "3")]
    assert apply_ops([], "sort") == []


def test_apply_ops_gives_what_the_compiled_pipeline_gives() -> None:
    rows = [["1", "A", "A=1"], ["1", "A", "A=3"], ["2", "M", "M=x"]]
    ops = "merge=kij;sort=1:s:d"
    assert apply_ops(rows, ops) == [tuple(row) for row in compile_ops(ops).run(rows)]


def test_the_facade_names_are_the_rooms_own() -> None:
    assert query.compile_ops is compiler.compile_ops
    assert query.parse_path is path_parser.parse_path
    assert query.run_path is row_walker.run_path
