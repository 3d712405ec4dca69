"""Shared fixtures: one local SparkSession for the whole run, and demo inputs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The one local SparkSession of the test run (2 cores, small settings, UTC)."""
    from treestore.spark import get_session

    session = get_session("local[2]", app_name="treestore-tests")
    yield session
    session.stop()


@pytest.fixture
def demo_dir(tmp_path: Path) -> Path:
    """A folder holding the seed-004 inputs and job file."""
    from shell.demo import write_demo_inputs

    write_demo_inputs(tmp_path)
    return tmp_path
