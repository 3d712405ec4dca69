"""Loading sources into a store: job files, map filters, sharding and tree building.

The facade of the loaders: ``load_job``, ``run_load`` and ``interval_sweep``. The rooms
below it are ``job`` (the job file), ``filters`` (Hydra's filters), ``load`` (one
incremental load), ``tree`` (records applied to a shard's tree) and ``sweep``.

May import: ``treestore`` and ``query`` (never ``shell``); see docs/architecture.md.
"""

from loaders.job.model import JobSpec, load_job
from loaders.load.driver import LoadResult, run_load
from loaders.sweep.interval_sweep import SweepReport, interval_sweep

__all__ = ["JobSpec", "LoadResult", "SweepReport", "interval_sweep", "load_job", "run_load"]
