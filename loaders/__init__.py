"""Loading sources into a store: job files, map filters, sharding and tree building.

The facade of the loaders: ``load_job``, ``run_load`` (its options: ``LoadOptions``) and
``interval_sweep``. The rooms below it are ``job`` (the job file), ``filters`` (Hydra's
filters), ``listing`` (a job's input files: listing and identity), ``formats`` (reading
one input file), ``load`` (one incremental load), ``follow`` (continuous loads), ``tree``
(records applied to a shard's tree) and ``sweep``.

The facade loads its names on first use (PEP 562), so importing a light module of a
room (the command line reads ``loaders.load.options``, ``loaders.follow.options`` and
``loaders.sweep.options`` for its defaults) does not import Spark.

May import: ``loaders.job``, ``loaders.load``, ``loaders.sweep``, ``treestore``. Never
``shell``; see docs/architecture.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loaders.job.model import JobSpec, load_job
    from loaders.load.driver import LoadResult, run_load
    from loaders.load.options import LoadOptions
    from loaders.sweep.driver import SweepReport, interval_sweep

__all__ = [
    "JobSpec",
    "LoadOptions",
    "LoadResult",
    "SweepReport",
    "interval_sweep",
    "load_job",
    "run_load",
]
_LAZY = frozenset(__all__)


def __getattr__(name: str) -> Any:
    """The facade's names, imported when first asked for (after making sure ``query`` is
    treestore's own, not a user's ``query.py``: see :mod:`treestore.packages`)."""
    if name in _LAZY:
        from treestore.packages import require_own_packages

        require_own_packages("query")
    if name in ("JobSpec", "load_job"):
        from loaders.job import model

        return getattr(model, name)
    if name == "LoadOptions":
        from loaders.load import options

        return options.LoadOptions
    if name in ("LoadResult", "run_load"):
        from loaders.load import driver

        return getattr(driver, name)
    if name in ("SweepReport", "interval_sweep"):
        from loaders.sweep import driver as sweep_driver

        return getattr(sweep_driver, name)
    raise AttributeError(f"module 'loaders' has no attribute {name!r}")
