"""Randomized kill rounds (see :mod:`tests.support.reliability.kills`): every trial leaves the store
exact, ``check`` clean, and a re-load exact. ``TREESTORE_KILL_ROUNDS`` trials (default 1,
each a CLI load with its own JVM); ``TREESTORE_RACE_ROUNDS`` race trials (default 0: two
JVMs at once; ``make reliability`` runs them). ``TREESTORE_KILL_SEED`` replays a run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.reliability.kills import (
    SECOND_BATCH_ROWS,
    race_trial,
    rounds_from_env,
    run_kill_rounds,
    seed_from_env,
)
from tests.support.reliability.scenario import Scenario, prepare_scenario

pytestmark = pytest.mark.spark

RACE_ROUNDS = int(os.environ.get("TREESTORE_RACE_ROUNDS", "0"))


@pytest.fixture(scope="module")
def scenario(spark: object, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    """The demo at version 1 plus a seeded second batch, and the answers expected."""
    return prepare_scenario(spark, tmp_path_factory.mktemp("kills"), SECOND_BATCH_ROWS, seed=1)


def test_killed_and_racing_loads_leave_the_store_exact(
    spark: object, scenario: Scenario, tmp_path: Path
) -> None:
    rounds, seed = rounds_from_env(), seed_from_env()
    if rounds == 0 and RACE_ROUNDS == 0:
        pytest.skip("TREESTORE_KILL_ROUNDS=0 and no TREESTORE_RACE_ROUNDS: nothing to run")
    outcomes = run_kill_rounds(spark, scenario, tmp_path, rounds, seed)
    failed = [o for o in outcomes if not o.clean]
    assert failed == [], f"{len(failed)} of {len(outcomes)} kill trials failed (seed {seed})"
    races = [race_trial(scenario, tmp_path / f"race-{i}") for i in range(RACE_ROUNDS)]
    assert [r for r in races if not r.clean] == []
