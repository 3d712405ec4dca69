"""The interval sweep (a time-range join without a join): the plans, the per-partition
kernels, the cover index of the broadcast plan, the columns they share, its options
(choices and defaults, in ``options``) and the ``treestore sweep`` command.

``interval_sweep`` and ``SweepReport`` load on first use (PEP 562), so reading
``loaders.sweep.options`` stays light.

May import: ``loaders.formats``, ``loaders.job``, ``loaders.load``, ``treestore``,
``treestore.storage``, ``treestore.store``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loaders.sweep.driver import SweepReport, interval_sweep

__all__ = ["SweepReport", "interval_sweep"]


def __getattr__(name: str) -> Any:
    """``interval_sweep`` and ``SweepReport``, imported when first asked for."""
    if name in __all__:
        from loaders.sweep import driver as module

        return getattr(module, name)
    raise AttributeError(f"module 'loaders.sweep' has no attribute {name!r}")
