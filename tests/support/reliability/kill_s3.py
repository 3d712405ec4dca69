"""Randomized kill rounds of a load into a store on S3 (the S3 test server, moto's).

The rounds of :mod:`tests.support.reliability.kills`, with the store at an ``s3://`` URI:
each trial copies the scenario's version-1 store into a bucket of its own (its files
uploaded as they are: the inputs stay in the scenario's local folder, as the manifest
names them), starts ``treestore load`` of the second batch as a user does (a subprocess
in its own process group, the server's AWS settings in its environment) and sends
SIGKILL to the whole group at one of :data:`S3_KILL_POINTS`, taken in turn. The timed
point that waits for a new run watches the bucket's listing (an object is listed once
its upload is complete). Then, as for a local store (:func:`~tests.support.reliability.
kills.kill_trial`): the store reads exactly as version 1 or as version 2 (the answer of an
uninterrupted load), ``check`` is clean, and the next load, run in this process, takes the
dead load's lock over (its lease on S3 names a process of this host that is gone), ends
exactly at version 2, lets the lock go, and leaves ``check`` clean.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from tests.support.reliability.kills import KILL_POINTS, KillOutcome, KillPoint, kill_trial
from tests.support.reliability.scenario import Scenario
from tests.support.s3_server import S3Server

ROUNDS_VARIABLE = "TREESTORE_S3_KILL_ROUNDS"
DEFAULT_ROUNDS = 1
"""Trials in a test run (``make test``); ``make reliability`` sets the variable (20)."""
SECOND_BATCH_ROWS = 5_000
"""Records of the killed load: a quarter of the local rounds' (each page a request to the
server, so its tasks still upload runs for a few seconds, and the reads, checks and
re-loads of a trial stay short)."""

S3_KILL_POINTS: tuple[KillPoint, ...] = tuple(
    replace(p, name=p.name.replace("run file", "run object")) if p.anchor == "run file" else p
    for p in KILL_POINTS
)
"""The local rounds' kill points; a new run is an object in the bucket's listing."""


def rounds_from_env(default: int = DEFAULT_ROUNDS) -> int:
    """How many trials to run: ``TREESTORE_S3_KILL_ROUNDS``, else ``default``."""
    return int(os.environ.get(ROUNDS_VARIABLE, default))


@contextlib.contextmanager
def aws_settings(server: S3Server) -> Iterator[None]:
    """The server's AWS settings in this process's environment (for the reads, the checks
    and the re-loads of the trials), the previous values back afterwards."""
    saved = {name: os.environ.get(name) for name in server.env}
    os.environ.update(server.env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def copy_store(local: Path, uri: str) -> None:
    """Upload every file of the store folder ``local`` to ``uri`` (an empty prefix), as is.

    Needs the server's settings in the environment (:func:`aws_settings`)."""
    from pyarrow import fs as pafs

    from treestore.filesystems import open_location

    filesystem, path = open_location(uri)
    pafs.copy_files(
        str(local),
        path,
        source_filesystem=pafs.LocalFileSystem(),
        destination_filesystem=filesystem,
    )


def run_s3_kill_rounds(
    spark: object,
    scenario: Scenario,
    server: S3Server,
    folder: Path,
    rounds: int,
    seed: int,
    on_trial: Callable[[int, KillOutcome], None] | None = None,
) -> list[KillOutcome]:
    """Run ``rounds`` kill trials, each on a copy of the scenario's version-1 store in a new
    bucket of ``server`` (trial ``i`` kills at point ``i`` modulo their number); ``folder``
    keeps each trial's local files (a failpoint's marker). ``on_trial`` hears of each trial
    as it ends."""
    rng = random.Random(seed)
    outcomes = []
    with aws_settings(server):
        for i in range(rounds):
            point = S3_KILL_POINTS[i % len(S3_KILL_POINTS)]
            where = folder / f"trial-{i:03d}"
            where.mkdir(parents=True)
            store = f"s3://{server.new_bucket()}/store"
            copy_store(scenario.first_store, store)
            outcome = kill_trial(spark, scenario, where, point, rng, store, server.env)
            if on_trial is not None:
                on_trial(i, outcome)
            outcomes.append(outcome)
    return outcomes
