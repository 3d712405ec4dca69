"""Loading sources into a store: job files, map filters, sharding and tree building."""

from loaders.job.model import JobSpec, load_job
from loaders.load.driver import LoadResult, run_load
from loaders.sweep.interval_sweep import SweepReport, interval_sweep

__all__ = ["JobSpec", "LoadResult", "SweepReport", "interval_sweep", "load_job", "run_load"]
