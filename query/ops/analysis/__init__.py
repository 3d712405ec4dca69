"""Ops that analyse a table rather than reshape it, after Hydra's: ``diff``, ``datef``,
``ftable``, ``histo``, ``histo2``, ``distribution``, ``disorder``, ``changepoints`` and
``holtwinters``.

May import: ``query.ops.base``. The catalogue (``query.ops``) registers these ops, so
nothing here imports it back.
"""

from __future__ import annotations

from query.ops.analysis.buckets import DisorderOp, PowerHistogramOp
from query.ops.analysis.changepoints import ChangePointsOp
from query.ops.analysis.dates import DateFormatOp
from query.ops.analysis.diff import DiffOp
from query.ops.analysis.distributions import DistributionOp, FrequencyTableOp, HistogramOp
from query.ops.analysis.forecast import HoltWintersOp

__all__ = [
    "ChangePointsOp",
    "DateFormatOp",
    "DiffOp",
    "DisorderOp",
    "DistributionOp",
    "FrequencyTableOp",
    "HistogramOp",
    "HoltWintersOp",
    "PowerHistogramOp",
]
