"""Loading sources into a store: job files, map filters, sharding and tree building."""

from loaders.job import JobSpec, load_job
from loaders.load import LoadResult, run_load

__all__ = ["JobSpec", "LoadResult", "load_job", "run_load"]
