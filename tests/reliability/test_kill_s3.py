"""Randomized kill rounds of a load into a store on the S3 test server (see
:mod:`tests.support.reliability.kill_s3`): every trial leaves the store exact, ``check``
clean, and the next load (it takes the dead load's lock over on S3) exact, the lock free.
``TREESTORE_S3_KILL_ROUNDS`` trials (default 1, at the first kill point: a CLI load with
its own JVM); ``TREESTORE_KILL_SEED`` replays a run's random delays."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.reliability.kill_s3 import (
    SECOND_BATCH_ROWS,
    rounds_from_env,
    run_s3_kill_rounds,
)
from tests.support.reliability.kills import seed_from_env
from tests.support.reliability.scenario import Scenario, prepare_scenario
from tests.support.s3_server import S3Server

pytestmark = [pytest.mark.spark, pytest.mark.s3]


@pytest.fixture(scope="module")
def scenario(spark: object, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    """The demo at version 1 (a local store, copied to S3 by each trial) plus a seeded
    second batch, and the answers expected."""
    return prepare_scenario(spark, tmp_path_factory.mktemp("kills-s3"), SECOND_BATCH_ROWS, seed=1)


def test_loads_killed_into_a_store_on_s3_leave_it_exact(
    spark: object, s3_server: S3Server, scenario: Scenario, tmp_path: Path
) -> None:
    rounds, seed = rounds_from_env(), seed_from_env()
    if rounds == 0:
        pytest.skip("TREESTORE_S3_KILL_ROUNDS=0: nothing to run")
    outcomes = run_s3_kill_rounds(spark, scenario, s3_server, tmp_path, rounds, seed)
    failed = [o for o in outcomes if not o.clean]
    said = "\n".join(map(repr, failed))
    assert failed == [], f"{len(failed)} of {rounds} trials on S3 failed (seed {seed}):\n{said}"
