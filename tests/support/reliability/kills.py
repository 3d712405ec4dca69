"""Randomized kill rounds: ``treestore load`` killed with SIGKILL, then the store checked.

Each trial copies the scenario's version-1 store, starts a CLI load of the second batch
and kills its whole process group (driver, JVM, Python workers) at one of
:data:`KILL_POINTS` (trial ``i`` takes point ``i`` modulo their number, so a few trials
cover the points in turn; the delays are random). Then it records:

- the phase the load was in, read from the store and the load's output after the kill;
- whether the store is exact: still version 1 with the answer of before, or version 2
  with the answer of an uninterrupted load (never anything in between);
- whether ``treestore check`` finds the store sound right after the kill;
- whether a re-load (it takes the dead load's lock over) gives exactly the answer of an
  uninterrupted load, and ``check`` is clean after it.

A race trial starts two CLI loads at once: one publishes, the other refuses in one line
(the lock is taken) or, starting late, finds nothing new; the store ends exact.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loaders import load_job, run_load
from tests.support.reliability.scenario import (
    CliLoad,
    Location,
    Scenario,
    check_problems,
    failpoint_env,
    marker_written,
    start_cli_load,
    store_files,
    store_version,
    tree_dump,
    wait_then_delay,
)
from treestore.storage.pagestore import page_store_for
from treestore.store.layout import CURRENT, TREES, manifest_name
from treestore.store.lock import lock_holder

ROUNDS_VARIABLE = "TREESTORE_KILL_ROUNDS"
SEED_VARIABLE = "TREESTORE_KILL_SEED"
DEFAULT_ROUNDS = 1
SECOND_BATCH_ROWS = 20_000
"""Records of the killed load: enough that its Spark tasks write runs for a few seconds."""
WAIT_SECONDS = 300.0
"""The longest a trial waits for a load to reach its kill point (a hang guard)."""

PHASES = (
    "start-up: JVM, lock, listing",
    "Spark job, before any run file",
    "tasks writing run files",
    "in a task, its runs written",
    "tasks done, before the manifest",
    "manifest written, CURRENT not",
    "CURRENT written, dedup index not",
    "load finished before the kill",
)
"""Where a load can be when it is killed, in the order a load passes them."""


@dataclass(frozen=True)
class KillPoint:
    """Where a trial kills: ``anchor`` (what it waits for), then a random wait of up to
    ``max_delay`` seconds."""

    name: str
    anchor: str
    """``failpoint`` (the load stops there), ``run file`` (a new file under trees/ appears),
    ``found`` (the load printed what it found: JVM up, lock held), ``start`` (at once)."""
    max_delay: float = 0.0
    failpoint: str | None = None
    phase: str | None = None
    """The phase a failpoint stops in (timed kills read theirs from the store)."""


def _at(failpoint: str, phase: str) -> KillPoint:
    return KillPoint(f"failpoint {failpoint}", "failpoint", 0.0, failpoint, phase)


KILL_POINTS = (
    KillPoint("first new run file + 0-0.3 s", "run file", 0.3),
    KillPoint("listing printed + 0-8 s", "found", 8.0),
    _at("after-manifest", PHASES[5]),
    _at("in-task", PHASES[3]),
    KillPoint("start + 0-10 s", "start", 10.0),
    _at("after-tasks", PHASES[4]),
    _at("between-data-and-index", PHASES[6]),
)
"""The kill points trial ``i`` takes in turn (``i`` modulo their number)."""


@dataclass(frozen=True)
class KillOutcome:
    """One kill trial's findings (of a load, or of another command: ``kind``)."""

    point: str
    phase: str
    exact_after_kill: bool
    check_after_kill: list[str]
    next_exact: bool
    """Whether the next command (a re-load, a restarted follower, the sweep or gc again)
    ended exact."""
    check_after_next: list[str]
    detail: str = ""
    ended_badly: str = ""
    """What the command said if it ended on its own with an error before the kill."""
    kind: str = "load"

    @property
    def clean(self) -> bool:
        """Whether every check of the trial held."""
        return (
            not self.ended_badly
            and self.exact_after_kill
            and not self.check_after_kill
            and self.next_exact
            and not self.check_after_next
        )

    def reason(self) -> str:
        """What did not hold, in one line ('' when the trial is clean)."""
        parts = [self.ended_badly, self.detail]
        if self.check_after_kill:
            parts.append(f"check after the kill: {self.check_after_kill[0]}")
        if self.check_after_next:
            parts.append(f"check after the next command: {self.check_after_next[0]}")
        if self.clean:
            return ""
        lines = (" ".join(p.split()) for p in parts if p)  # an error over lines, in one
        return "; ".join(line if len(line) <= 400 else f"{line[:400]}..." for line in lines)


def rounds_from_env(default: int = DEFAULT_ROUNDS) -> int:
    """How many kill trials to run: ``TREESTORE_KILL_ROUNDS``, else ``default``."""
    return int(os.environ.get(ROUNDS_VARIABLE, default))


def seed_from_env() -> int:
    """The rounds' seed: ``TREESTORE_KILL_SEED`` (to replay a run), else a new one."""
    return int(os.environ.get(SEED_VARIABLE) or random.SystemRandom().randrange(10**6))


def run_kill_rounds(
    spark: object,
    scenario: Scenario,
    folder: Path,
    rounds: int,
    seed: int,
    on_trial: Callable[[int, KillOutcome], None] | None = None,
) -> list[KillOutcome]:
    """Run ``rounds`` kill trials on copies of the scenario's version-1 store; ``on_trial``
    hears of each trial as it ends."""
    rng = random.Random(seed)
    outcomes = []
    for i in range(rounds):
        point = KILL_POINTS[i % len(KILL_POINTS)]
        outcome = kill_trial(spark, scenario, folder / f"trial-{i:03d}", point, rng)
        if on_trial is not None:
            on_trial(i, outcome)
        outcomes.append(outcome)
    return outcomes


def kill_trial(
    spark: object,
    scenario: Scenario,
    folder: Path,
    point: KillPoint,
    rng: random.Random,
    store: Location | None = None,
    env: dict[str, str] | None = None,
) -> KillOutcome:
    """Kill one CLI load at ``point``; check the store, re-load, check again.

    ``store``: a store already at version 1 (a URI); by default a copy of the scenario's in
    ``folder``. ``env``: more environment for the load (an object store's settings).
    """
    store = scenario.fresh_store(folder / "store") if store is None else store
    first_files = store_files(store)
    env = {**(env or {}), **failpoint_env(point.failpoint, folder / "marker")}
    load = start_cli_load(scenario.job, store, env)
    try:
        finished = _wait_for_kill_point(load, point, store, first_files, folder / "marker", rng)
    finally:
        load.kill()
    phase = point.phase or _phase_seen(load, store, first_files, finished)
    code = load.process.returncode
    ended_badly = f"exit {code}: {load.error_lines()[-3:]}" if finished and code != 0 else ""
    try:
        version, answer = store_version(store), tree_dump(store)
        exact = (version, answer) in ((1, scenario.before), (2, scenario.reference))
        seen = f"version {version}, answer matches neither"
    except Exception as exc:  # a reader refusing the store: recorded, the round goes on
        exact, seen = False, f"{type(exc).__name__}: {exc}"
    after_kill = check_problems(store)
    reload_exact, detail = _reload(spark, scenario, store)
    after_reload = check_problems(store)
    if not exact:
        detail = f"after the kill: {seen}. {detail}"
    return KillOutcome(
        point.name, phase, exact, after_kill, reload_exact, after_reload, detail, ended_badly
    )


def _wait_for_kill_point(
    load: CliLoad,
    point: KillPoint,
    store: Location,
    first_files: set[str],
    marker: Path,
    rng: random.Random,
) -> bool:
    """Return when it is time to kill; True if the load ended on its own first."""
    checks: dict[str, Callable[[], bool]] = {
        "failpoint": lambda: marker_written(marker),
        "run file": lambda: _new_run_files(store, first_files),
        "found": lambda: load.saw("source "),
        "start": lambda: True,
    }
    delay = rng.uniform(0.0, point.max_delay)
    return wait_then_delay(load, checks[point.anchor], delay, point.name, WAIT_SECONDS)


def _new_run_files(store: Location, first_files: set[str]) -> bool:
    return bool(store_files(store, TREES) - first_files)


def _phase_seen(load: CliLoad, store: Location, first_files: set[str], finished: bool) -> str:
    """The phase a timed kill hit, read from the store and the output after the kill."""
    if finished:
        return PHASES[7]
    pages = page_store_for(store)
    if pages.read(CURRENT).strip() != b"1":
        return PHASES[6]
    if pages.exists(manifest_name(2)):
        return PHASES[5]
    if _new_run_files(store, first_files):
        return PHASES[2]
    return PHASES[1] if load.saw("source ") else PHASES[0]


def _reload(spark: object, scenario: Scenario, store: Location) -> tuple[bool, str]:
    """Load again (in this process): the store must end at version 2, exactly the reference."""
    try:
        run_load(spark, load_job(scenario.job), store)  # type: ignore[arg-type]
    except Exception as exc:  # a trial records what went wrong; the test shows it
        return False, f"the re-load failed: {type(exc).__name__}: {exc}"
    try:
        version, answer = store_version(store), tree_dump(store)
    except Exception as exc:  # recorded as above
        return False, f"after the re-load: {type(exc).__name__}: {exc}"
    if lock_holder(page_store_for(store)) is not None:
        return False, "the re-load left the lock held"
    if version != 2 or answer != scenario.reference:
        return False, f"after the re-load: version {version}, answer differs from the reference"
    return True, ""


@dataclass(frozen=True)
class RaceOutcome:
    """Two loads started together: what each said, and the store after both."""

    winners: int
    refusals: int
    nothing_new: int
    refusal_lines: list[str]
    exact: bool
    check: list[str]

    @property
    def clean(self) -> bool:
        """One load published; the other refused in one line or found nothing new; exact."""
        one_line = not self.refusals or len(self.refusal_lines) == 1
        return (
            self.winners == 1
            and self.refusals + self.nothing_new == 1
            and one_line
            and self.exact
            and not self.check
        )


def race_trial(scenario: Scenario, folder: Path) -> RaceOutcome:
    """Start two CLI loads of the second batch at once into a copy of the version-1 store."""
    store = scenario.fresh_store(folder / "store")
    loads = [start_cli_load(scenario.job, store) for _ in range(2)]
    try:
        codes = [load.wait(WAIT_SECONDS) for load in loads]
    finally:
        for load in loads:
            load.kill()
    winners = refusals = nothing_new = 0
    refusal_lines: list[str] = []
    for load, code in zip(loads, codes, strict=True):
        if code == 0 and load.saw("published version 2"):
            winners += 1
        elif code == 0 and load.saw("nothing new to load"):
            nothing_new += 1
        elif code == 2 and any("is locked by" in line for line in load.error_lines()):
            refusals += 1
            refusal_lines = load.error_lines()
    exact = store_version(store) == 2 and tree_dump(store) == scenario.reference
    exact = exact and lock_holder(page_store_for(store)) is None
    return RaceOutcome(winners, refusals, nothing_new, refusal_lines, exact, check_problems(store))
