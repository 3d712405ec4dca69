"""The query language: paths over trees, ops over rows, and their execution.

``apply_ops`` runs an op string over plain Python rows, without Spark. The rooms:
``syntax`` (grammars, AST, parsers), ``ops`` (the op catalogue and compiler),
``walk`` (a path over one tree), ``driver`` (a query over a store).

May import: ``query.syntax``, ``query.ops``, ``query.walk``. Never ``loaders`` or ``shell``.
"""

from __future__ import annotations

from collections.abc import Iterable

from query.ops.compiler import OpsPipeline, compile_ops
from query.syntax.ast import Bound, Element, Path, Property
from query.syntax.path_parser import parse_path
from query.walk.row_walker import run_path

__all__ = [
    "Bound",
    "Element",
    "OpsPipeline",
    "Path",
    "Property",
    "apply_ops",
    "compile_ops",
    "parse_path",
    "run_path",
]


def apply_ops(rows: Iterable[Iterable[object]], ops: str) -> list[tuple[object, ...]]:
    """Run the op string ``ops`` over ``rows`` and return the resulting rows as tuples.

    >>> apply_ops([["1", "A", "A=1"], ["1", "A", "A=3"], ["2", "M", "M=x"]], "merge=kij")
    [('1', 'A=1,A=3'), ('2', 'M=x')]
    """
    return list(compile_ops(ops).run(rows))  # type: ignore[arg-type]
