"""The loaders' facade: its names are its rooms' own, loaded on first use, so importing a
light module of a room (the command line reads the options modules) loads no Spark."""

from __future__ import annotations

import subprocess
import sys

import pytest

import loaders
from loaders.job import model
from loaders.load import driver
from loaders.sweep import driver as sweep_driver

LIGHT_IMPORT = """
import sys
import loaders, loaders.load.options, loaders.sweep.options
heavy = ("pyspark", "loaders.load.driver", "loaders.sweep.driver", "loaders.job.model")
print([name for name in heavy if name in sys.modules])
loaders.load_job
print([name for name in heavy if name in sys.modules])
"""


def test_the_facade_names_are_the_rooms_own() -> None:
    assert loaders.load_job is model.load_job and loaders.JobSpec is model.JobSpec
    assert loaders.run_load is driver.run_load and loaders.LoadResult is driver.LoadResult
    assert loaders.interval_sweep is sweep_driver.interval_sweep
    assert loaders.SweepReport is sweep_driver.SweepReport
    with pytest.raises(AttributeError, match="module 'loaders' has no attribute 'nothing'"):
        loaders.nothing  # noqa: B018


def test_importing_the_facade_and_the_options_loads_no_spark() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LIGHT_IMPORT], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == ["[]", "['loaders.job.model']"]
