"""The interval sweep (a time-range join without a join): the plans, the per-partition
kernels, the cover index of the broadcast plan, the columns they share, and the
``treestore sweep`` command.

May import: ``loaders.job``, ``loaders.load``, ``treestore``.
"""

from loaders.sweep.interval_sweep import SweepReport, interval_sweep

__all__ = ["SweepReport", "interval_sweep"]
