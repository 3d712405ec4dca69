"""Power-cut rounds: a load, a gc and a follower's micro-batch, each cut at every point of
its journal (see :mod:`tests.support.reliability.powercut` for the model).

A round copies the scenario's store as the run needs it, snapshots it, runs the
command once for real with the journal on (in this process; its Spark tasks journal
too), then for each cut point tried and each crash state of it (equal states once):

- **exact**: the store reads as the version before the run or the version after it,
  exactly (the version ``CURRENT`` names and every node of every shard), never
  anything else and never a refusal;
- **check clean**: ``treestore check`` finds no problem;
- **next command exact** (for the states chosen: all of them, or a few at random):
  after the power cut the machine restarted (a new boot id, so the dead run's lease is
  taken over), the next command (a load; a follower for the follower's round) finishes
  with exactly the answer of a run that never lost power, the lock free and ``check``
  clean after it.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from loaders import load_job, run_load
from loaders.follow import follow_job
from shell.commands import command_gc
from tests.support.reliability.powercut import (
    Disk,
    Op,
    crash_plans,
    journaling,
    materialize,
    read_journal,
    state_digest,
)
from tests.support.reliability.scenario import (
    Dump,
    Scenario,
    check_problems,
    store_version,
    tree_dump,
)
from treestore.storage.pagestore import page_store_for
from treestore.store.lock import lock_holder

KINDS = ("load", "gc", "follow")
TITLES = {
    "load": "load",
    "gc": "gc (of what a killed load left)",
    "follow": "follower's micro-batch (its load and gc)",
}
"""Each kind in words, for the fault matrix."""
POINTS_VARIABLE = "TREESTORE_POWERCUT_POINTS"
SEED_VARIABLE = "TREESTORE_POWERCUT_SEED"
DEFAULT_POINTS = 3
"""Cut points a round of ``make test`` tries (``make reliability`` tries them all)."""
SECOND_BATCH_ROWS = 2_000
"""Records of the second batch: a few files per shard, so a journal of about a hundred
operations."""
RANDOM_STATES = 2
"""Random crash states per cut point, besides the chosen ones."""

Answer = tuple[int, Dump]


@dataclass(frozen=True)
class Kind:
    """One kind of run to cut: how its store is made, the run, what it may read as after
    a cut, and the next command."""

    name: str
    prepare: Callable[[object, Scenario, Path], Path]
    run: Callable[[object, Scenario, Path], None]
    answers: Callable[[Scenario], tuple[Answer, ...]]
    next_command: Callable[[object, Scenario, Path], None]


def _version_1(spark: object, scenario: Scenario, where: Path) -> Path:
    return scenario.fresh_store(where)


def _version_2(spark: object, scenario: Scenario, where: Path) -> Path:
    """Version 1, then the second batch loaded as version 2 (version 1 still kept)."""
    store = scenario.fresh_store(where)
    run_load(spark, load_job(scenario.job), store)  # type: ignore[arg-type]
    return store


def _left_by_a_killed_load(spark: object, scenario: Scenario, where: Path) -> Path:
    """Version 1 with what a load killed between its manifest and ``CURRENT`` leaves: its
    runs, side files and dedup runs, and its manifest unpublished (``CURRENT``, the dedup
    index and the lock as version 1 has them), for a gc to remove."""
    loaded = _version_2(spark, scenario, where.with_name(f"{where.name}-loaded"))
    store = scenario.fresh_store(where)
    for path in sorted(loaded.rglob("*")):
        name = path.relative_to(loaded)
        if path.is_file() and name.parts[0] != "locks" and not (store / name).exists():
            (store / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, store / name)
    shutil.rmtree(loaded)
    return store


def _load(spark: object, scenario: Scenario, store: Path) -> None:
    run_load(spark, load_job(scenario.job), store)  # type: ignore[arg-type]


def _gc(spark: object, scenario: Scenario, store: Path) -> None:
    command_gc(str(store), 1, io.StringIO())


def _follow(spark: object, scenario: Scenario, store: Path) -> None:
    follow_job(spark, load_job(scenario.job), store, available_now=True)  # type: ignore[arg-type]


KIND = {
    "load": Kind(
        "load",
        _version_1,
        _load,
        lambda s: ((1, s.before), (2, s.reference)),
        _load,
    ),
    "gc": Kind("gc", _left_by_a_killed_load, _gc, lambda s: ((1, s.before),), _load),
    "follow": Kind(
        "follow",
        _version_1,
        _follow,
        lambda s: ((1, s.before), (2, s.reference)),
        _follow,
    ),
}


@dataclass(frozen=True)
class StateOutcome:
    """One crash state's findings."""

    cut: int
    op: str
    """The journal's operation the cut came after ('' for the cut before any)."""
    plan: str
    exact: bool
    check: list[str]
    next_exact: bool | None
    """None: the next command was not run on this state."""
    detail: str = ""

    @property
    def clean(self) -> bool:
        """Whether every check made held."""
        return self.exact and not self.check and self.next_exact is not False

    def line(self) -> str:
        """The state and what failed, in one line."""
        parts = [f"cut {self.cut} after '{self.op or 'nothing'}', {self.plan}"]
        if not self.exact:
            parts.append("not exact")
        if self.check:
            parts.append(f"check: {self.check[0]}")
        if self.next_exact is False:
            parts.append("next command not exact")
        if self.detail:
            parts.append(self.detail)
        return ": ".join(parts)


@dataclass
class RoundOutcome:
    """One kind's round: what was tried, what held."""

    kind: str
    operations: int
    points: int
    states: int
    outcomes: list[StateOutcome] = field(default_factory=list)

    @property
    def distinct(self) -> int:
        """Crash states checked (the distinct ones)."""
        return len(self.outcomes)

    @property
    def exact(self) -> int:
        """Distinct states that read exact with ``check`` clean."""
        return sum(o.exact and not o.check for o in self.outcomes)

    @property
    def next_runs(self) -> int:
        """States the next command ran on."""
        return sum(o.next_exact is not None for o in self.outcomes)

    @property
    def next_exact(self) -> int:
        """States whose next command was exact."""
        return sum(bool(o.next_exact) for o in self.outcomes)

    @property
    def failures(self) -> list[StateOutcome]:
        """The states where something did not hold."""
        return [o for o in self.outcomes if not o.clean]

    @property
    def clean(self) -> bool:
        """Whether every state held."""
        return not self.failures


def points_from_env(default: int = DEFAULT_POINTS) -> int:
    """How many cut points a test's round tries: ``TREESTORE_POWERCUT_POINTS``, else
    ``default``."""
    return int(os.environ.get(POINTS_VARIABLE, default))


def seed_from_env() -> int:
    """The rounds' seed: ``TREESTORE_POWERCUT_SEED`` (to replay a run), else a new one."""
    return int(os.environ.get(SEED_VARIABLE) or random.SystemRandom().randrange(10**6))


@contextmanager
def rebooted() -> Iterator[None]:
    """This host after a restart: a new boot id, so a lease this process wrote before the
    power cut is a dead holder's (as it is after a real power cut)."""
    with mock.patch("treestore.store.lock.boot_id", return_value=uuid.uuid4().hex):
        yield


def run_power_cut_round(
    spark: object,
    scenario: Scenario,
    kind: str,
    folder: Path,
    seed: int,
    cuts: int | None = None,
    next_commands: int | None = None,
    on_state: Callable[[StateOutcome], None] | None = None,
) -> RoundOutcome:
    """Cut ``kind``'s run at ``cuts`` points chosen at random (None: at every point of its
    journal) and check each crash state; the next command runs on ``next_commands`` of the
    distinct states, chosen at random (None: on all of them). Seeded by ``seed``."""
    rng = random.Random(seed)
    spec = KIND[kind]
    store = spec.prepare(spark, scenario, folder / "store")
    snapshot = folder / "snapshot"
    shutil.copytree(store, snapshot)
    journal = folder / "journal"
    with journaling(journal, spark):
        spec.run(spark, scenario, store)
    ops = read_journal(journal, store)
    points = list(range(len(ops) + 1))
    if cuts is not None:
        points = sorted(rng.sample(points, min(cuts, len(points))))
    states = _crash_states(Disk.of_snapshot(snapshot, journal / "blobs"), ops, points, rng)
    chosen = set(states) if next_commands is None else _some(states, next_commands, rng)
    result = RoundOutcome(kind, len(ops), len(points), sum(len(s[3]) for s in states.values()))
    for number, (digest, (cut, op, state, plans)) in enumerate(states.items()):
        where = materialize(state, folder / "states" / f"{number:05d}")
        outcome = _judge(spark, scenario, spec, where, digest in chosen)
        outcome = StateOutcome(cut, op, plans[0], *outcome)
        result.outcomes.append(outcome)
        if on_state is not None:
            on_state(outcome)
        if outcome.clean:
            shutil.rmtree(where, ignore_errors=True)
    return result


_State = tuple[int, str, dict[str, bytes | None], list[str]]


def _crash_states(
    disk: Disk, ops: list[Op], points: list[int], rng: random.Random
) -> dict[str, _State]:
    """Every distinct crash state of the cut points (by digest): the first cut and op that
    made it, its files, and the names of the plans that led to it."""
    found: dict[str, _State] = {}
    done = 0
    for point in points:
        while done < point:
            disk.apply(ops[done])
            done += 1
        op = str(ops[point - 1]) if point else ""
        for plan in crash_plans(disk, rng, RANDOM_STATES):
            state = disk.crash(plan)
            digest = state_digest(state)
            if digest in found:
                found[digest][3].append(plan.name)
            else:
                found[digest] = (point, op, state, [plan.name])
    return found


def _some(states: dict[str, _State], count: int, rng: random.Random) -> set[str]:
    return set(rng.sample(sorted(states), min(count, len(states))))


def _judge(
    spark: object, scenario: Scenario, spec: Kind, store: Path, run_next: bool
) -> tuple[bool, list[str], bool | None, str]:
    """Read the state, check it, and (``run_next``) run the next command on it."""
    answers = spec.answers(scenario)
    details = []
    with rebooted():
        try:
            version, answer = store_version(store), tree_dump(store)
            exact = (version, answer) in answers
            if not exact:
                details.append(f"reads as version {version}, whose answer matches neither")
        except Exception as exc:  # a reader refusing the store: recorded, the round goes on
            exact = False
            details.append(f"reading it: {type(exc).__name__}: {exc}")
        problems = check_problems(store)
        next_exact: bool | None = None
        if run_next:
            next_exact, said = _next(spark, scenario, spec, store)
            if said:
                details.append(said)
    return exact, problems, next_exact, "; ".join(details)


def _next(spark: object, scenario: Scenario, spec: Kind, store: Path) -> tuple[bool, str]:
    """Run the next command: it must end at the answer of a run that never lost power."""
    try:
        spec.next_command(spark, scenario, store)
    except Exception as exc:  # recorded, as above
        return False, f"the next {spec.next_command.__name__.strip('_')} failed: {exc}"
    try:
        version, answer = store_version(store), tree_dump(store)
    except Exception as exc:  # recorded, as above
        return False, f"after the next command: {type(exc).__name__}: {exc}"
    if lock_holder(page_store_for(store)) is not None:
        return False, "the next command left the lock held"
    if (version, answer) != (2, scenario.reference):
        return False, f"after the next command: version {version}, not the reference's answer"
    problems = check_problems(store)
    if problems:
        return False, f"check after the next command: {problems[0]}"
    return True, ""
