"""The op catalogue: every op class, registered by name (and alias) in :data:`REGISTRY`.

Lives here: one module per family of ops, ops over Arrow columns (``columns``), the
compiler of op strings into a pipeline (``compiler``) and the running of a chain of ops of
any length (``chain``). What every op is made of is the
room below, ``base``; the analysis ops are the ``analysis`` subpackage, registered here.

May import: ``query.ops.analysis``, ``query.ops.base``, ``query.syntax``, ``treestore``,
``treestore.native``.
"""

from __future__ import annotations

from query.ops.analysis import (
    ChangePointsOp,
    DateFormatOp,
    DiffOp,
    DisorderOp,
    DistributionOp,
    FrequencyTableOp,
    HistogramOp,
    HoltWintersOp,
    PowerHistogramOp,
)
from query.ops.base import Op, OpArgs, Row, Value
from query.ops.cross import CrossOp
from query.ops.gather import GatherOp
from query.ops.merge import MergeOp
from query.ops.num import NumOp
from query.ops.reshape_ops import DepivotOp, FoldOp, GroupByOp, PivotOp
from query.ops.roll import AvgOp, DeltaOp, MaxOp, MinOp, SumOp
from query.ops.row_ops import (
    CompareOp,
    ContainsOp,
    FillOp,
    LimitOp,
    MapOp,
    NoDupOp,
    OrderMapOp,
    OrderOp,
    PadOp,
    RegexMapOp,
    SkipOp,
    SleepOp,
    TitleOp,
)
from query.ops.string_ops import StrOp
from query.ops.table_ops import (
    MedianOp,
    PercentRankOp,
    RangeOp,
    ReverseOp,
    RmSingOp,
    SortOp,
    TransOp,
)

__all__ = [
    "ALL_OPS",
    "REGISTRY",
    "AvgOp",
    "ChangePointsOp",
    "CompareOp",
    "ContainsOp",
    "CrossOp",
    "DateFormatOp",
    "DeltaOp",
    "DepivotOp",
    "DiffOp",
    "DisorderOp",
    "DistributionOp",
    "FillOp",
    "FoldOp",
    "FrequencyTableOp",
    "GatherOp",
    "GroupByOp",
    "HistogramOp",
    "HoltWintersOp",
    "LimitOp",
    "MapOp",
    "MaxOp",
    "MedianOp",
    "MergeOp",
    "MinOp",
    "NoDupOp",
    "NumOp",
    "Op",
    "OpArgs",
    "OrderMapOp",
    "OrderOp",
    "PadOp",
    "PercentRankOp",
    "PivotOp",
    "PowerHistogramOp",
    "RangeOp",
    "RegexMapOp",
    "ReverseOp",
    "RmSingOp",
    "Row",
    "SkipOp",
    "SleepOp",
    "SortOp",
    "StrOp",
    "SumOp",
    "TitleOp",
    "TransOp",
    "Value",
]

ALL_OPS: tuple[type[Op], ...] = (
    StrOp,
    NumOp,
    MergeOp,
    GatherOp,
    CrossOp,
    SortOp,
    LimitOp,
    SkipOp,
    RangeOp,
    ReverseOp,
    MedianOp,
    OrderOp,
    OrderMapOp,
    FillOp,
    PadOp,
    TitleOp,
    TransOp,
    MapOp,
    RegexMapOp,
    ContainsOp,
    CompareOp,
    NoDupOp,
    RmSingOp,
    PercentRankOp,
    SumOp,
    MinOp,
    MaxOp,
    AvgOp,
    DeltaOp,
    PivotOp,
    DepivotOp,
    FoldOp,
    GroupByOp,
    DiffOp,
    DateFormatOp,
    FrequencyTableOp,
    HistogramOp,
    PowerHistogramOp,
    DistributionOp,
    DisorderOp,
    ChangePointsOp,
    HoltWintersOp,
    SleepOp,
)
"""Every op class, in the order ``\\ops`` lists them."""

REGISTRY: dict[str, type[Op]] = {name: op for op in ALL_OPS for name in (op.name, *op.aliases)}
"""Op name -> op class; an op's docstring is its help text."""
