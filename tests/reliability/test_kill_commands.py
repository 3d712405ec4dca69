"""Randomized kill rounds of ``load --follow``, ``sweep`` and ``gc`` (see
:mod:`tests.support.reliability.kill_commands`): every trial leaves the store exact,
``check`` clean, and the next command exact. ``TREESTORE_KILL_FOLLOW_ROUNDS``,
``TREESTORE_KILL_SWEEP_ROUNDS`` and ``TREESTORE_KILL_GC_ROUNDS`` trials of each (default
1: each kind's first kill point, a failpoint; ``make reliability`` runs more);
``TREESTORE_KILL_SEED`` replays a run's random delays."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.reliability.command_scenario import CommandScenario, prepare_command_scenario
from tests.support.reliability.kill_commands import (
    KINDS,
    rounds_from_env,
    run_command_kill_rounds,
)
from tests.support.reliability.kills import seed_from_env

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def scenario(spark: object, tmp_path_factory: pytest.TempPathFactory) -> CommandScenario:
    """The demo at version 1 plus a second batch, and the three commands' stores."""
    return prepare_command_scenario(spark, tmp_path_factory.mktemp("kill-commands"))


@pytest.mark.parametrize("kind", KINDS)
def test_a_killed_command_leaves_the_store_exact_and_the_next_command_exact(
    spark: object, scenario: CommandScenario, tmp_path: Path, kind: str
) -> None:
    rounds, seed = rounds_from_env(kind), seed_from_env()
    if rounds == 0:
        pytest.skip(f"no {kind} kill trial asked for")
    outcomes = run_command_kill_rounds(spark, scenario, kind, tmp_path, rounds, seed)
    failed = [f"{o.point} ({o.phase}): {o.reason()}" for o in outcomes if not o.clean]
    assert failed == [], f"{len(failed)} of {len(outcomes)} {kind} kill trials failed (seed {seed})"
