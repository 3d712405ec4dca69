"""The op catalogue: every op class, registered by name (and alias) in :data:`REGISTRY`."""

from __future__ import annotations

from query.ops.base import Op, OpArgs, Row, Value
from query.ops.merge import MergeOp
from query.ops.string_ops import StrOp

__all__ = ["REGISTRY", "MergeOp", "Op", "OpArgs", "Row", "StrOp", "Value"]

REGISTRY: dict[str, type[Op]] = {
    name: op for op in (StrOp, MergeOp) for name in (op.name, *op.aliases)
}
"""Op name -> op class; an op's docstring is its help text."""
