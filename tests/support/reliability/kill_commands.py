"""Randomized kill rounds of ``treestore load --follow``, ``treestore sweep`` and
``treestore gc`` (the load's own are :mod:`tests.support.reliability.kills`).

Each trial runs the command as a user does (:func:`~tests.support.reliability.scenario.
start_cli`: a subprocess in its own process group, a follower and a sweep with their own
JVM) on a copy of its store (:mod:`tests.support.reliability.command_scenario`), sends
SIGKILL to the whole group at one of the kind's kill points (trial ``i`` takes point ``i``
modulo their number; the delays are random, seeded), and records:

- the phase the command was in (a failpoint's own, or read from the store and the
  command's output after the kill);
- **store exact after the kill**: the version ``CURRENT`` names and every node of every
  shard (:func:`~tests.support.reliability.scenario.tree_dump`) are one of the states an
  uninterrupted run passes through, exactly:

  - follower: version 1 (before), 2 (its first micro-batch: ``A``) or 3 (the next: ``B``),
    each with the answer of loads of the same files;
  - sweep: version 1 with the answer of before (results it wrote under ``sweeps/NAME``
    that no version loaded may be left: nothing reads them, the next sweep of that name
    removes them), or version 2 with the answer of an uninterrupted sweep and
    ``sweeps/NAME`` holding exactly the files that version loaded;
  - gc: the version of before with its answer (gc publishes nothing);
- **check clean after the kill**: ``treestore check`` finds no problem;
- **next command exact** (run in this process, taking the dead command's lock over):
  the follower restarted with ``--available-now`` ends at the answer of loading every
  file (``A`` then ``B``); the same sweep again succeeds with the uninterrupted sweep's
  answer and files (or, when the killed one had published, is refused in one line as a
  name already taken, the store unchanged); gc again leaves exactly the files an
  uninterrupted gc leaves, the version exact, and the next load (the killed load's batch
  ``D``) publishes the next version with the answer of a load that never met a gc; the
  lock is free after each;
- **check clean after the next command** (after each of its steps).

Trial counts: ``TREESTORE_KILL_FOLLOW_ROUNDS``, ``TREESTORE_KILL_SWEEP_ROUNDS``,
``TREESTORE_KILL_GC_ROUNDS`` (default 1 each; 0 skips the kind); the seed
``TREESTORE_KILL_SEED``, as the load's rounds.
"""

from __future__ import annotations

import io
import os
import random
import re
from collections.abc import Callable, Collection
from pathlib import Path

from loaders import load_job, run_load
from loaders.follow import follow_job
from loaders.sweep.command import run_sweep
from shell.commands import command_gc
from tests.support.reliability.command_scenario import (
    GC_KEEP,
    GC_VERSION,
    SWEEP_NAME,
    CommandScenario,
    gc_files,
    write_follow_b,
)
from tests.support.reliability.kills import KillOutcome, KillPoint
from tests.support.reliability.scenario import (
    CliLoad,
    Dump,
    check_problems,
    failpoint_env,
    marker_written,
    start_cli,
    store_version,
    tree_dump,
    wait_then_delay,
)
from treestore.errors import StoreError
from treestore.storage.pagestore import page_store_for
from treestore.store.layout import CURRENT, LOCKS, STREAM_CHECKPOINT, TREES, manifest_name
from treestore.store.lock import check_unlocked, lock_holder
from treestore.store.versions import open_version, published_versions

KINDS = ("follow", "sweep", "gc")
COMMANDS = {"follow": "load --follow", "sweep": "sweep", "gc": "gc"}
"""Each kind's command, as a user types it after ``treestore``."""
TITLES = {
    "follow": "SIGKILL of `load --follow` (driver, JVM and workers)",
    "sweep": "SIGKILL of `sweep` (driver, JVM and workers)",
    "gc": "SIGKILL of `gc`",
}
"""Each kind's row in the fault matrix."""
ROUNDS_VARIABLES = {
    "follow": "TREESTORE_KILL_FOLLOW_ROUNDS",
    "sweep": "TREESTORE_KILL_SWEEP_ROUNDS",
    "gc": "TREESTORE_KILL_GC_ROUNDS",
}
DEFAULT_ROUNDS = 1
WAIT_SECONDS = 300.0
"""The longest a trial waits for a command to reach its kill point (a hang guard)."""
TRIGGER = "1s"
"""The follower's ``--trigger``: a new file is offered within a second."""

FOLLOW_PHASES = (
    "start-up: JVM, lock, stream (no micro-batch yet)",
    "micro-batch under way, before any run file",
    "micro-batch: tasks writing run files",
    "micro-batch: in a task, its runs written",
    "micro-batch: tasks done, before the manifest",
    "micro-batch: manifest written, CURRENT not",
    "micro-batch: CURRENT written, dedup index not",
    "micro-batch published, Spark has not noted it",
    "between micro-batches (idle)",
    "follower ended before the kill",
)
SWEEP_PHASES = (
    "start-up: JVM, lock, reading the inputs",
    "results being written or written, not loaded",
    "results written, their load not begun",
    "results' load: tasks writing run files",
    "results' load: in a task, its runs written",
    "results' load: manifest written, CURRENT not",
    "results' load: CURRENT written, dedup index not",
    "sweep finished before the kill",
)
GC_PHASES = (
    "start-up: Python, lock (nothing removed)",
    "old manifests removed, not one of their files",
    "removing unused run files",
    "run files removed, dedup runs and record files not",
    "gc finished before the kill",
)
UNREADABLE = "unknown: the store could not be read after the kill"
"""The phase of a timed kill whose store the phase's readout could not read (the trial
fails on the store anyway)."""
PHASES = {
    "follow": (*FOLLOW_PHASES, UNREADABLE),
    "sweep": (*SWEEP_PHASES, UNREADABLE),
    "gc": (*GC_PHASES, UNREADABLE),
}
"""Where each command can be when it is killed, in the order it passes them."""


def _at(failpoint: str, phase: str) -> KillPoint:
    return KillPoint(f"failpoint {failpoint}", "failpoint", 0.0, failpoint, phase)


POINTS = {
    "follow": (
        _at("after-manifest", FOLLOW_PHASES[5]),
        KillPoint("first micro-batch printed + 0-3 s", "batch printed", 3.0),
        _at("in-task", FOLLOW_PHASES[3]),
        KillPoint("new file added after the first micro-batch + 0-5 s", "new file", 5.0),
        _at("follow-after-publish", FOLLOW_PHASES[7]),
        KillPoint("start + 0-12 s", "start", 12.0),
        _at("after-tasks", FOLLOW_PHASES[4]),
        _at("between-data-and-index", FOLLOW_PHASES[6]),
    ),
    "sweep": (
        _at("sweep-after-results", SWEEP_PHASES[2]),
        KillPoint("start + 0-10 s", "start", 10.0),
        _at("after-manifest", SWEEP_PHASES[5]),
        KillPoint("first result file + 0-1 s", "result file", 1.0),
        _at("in-task", SWEEP_PHASES[4]),
        _at("between-data-and-index", SWEEP_PHASES[6]),
    ),
    "gc": (
        _at("gc-in-runs", GC_PHASES[2]),
        KillPoint("start + 0-0.45 s", "start", 0.45),
        _at("gc-after-manifests", GC_PHASES[1]),
        KillPoint("lock taken + 0-10 ms", "lease", 0.01),
        _at("gc-after-runs", GC_PHASES[3]),
    ),
}
"""The kill points trial ``i`` of each kind takes in turn (``i`` modulo their number)."""


def rounds_from_env(kind: str, default: int = DEFAULT_ROUNDS) -> int:
    """How many trials of ``kind`` to run: its variable (:data:`ROUNDS_VARIABLES`), else
    ``default``."""
    return int(os.environ.get(ROUNDS_VARIABLES[kind], default))


def run_command_kill_rounds(
    spark: object,
    scenario: CommandScenario,
    kind: str,
    folder: Path,
    rounds: int,
    seed: int,
    on_trial: Callable[[int, KillOutcome], None] | None = None,
) -> list[KillOutcome]:
    """Run ``rounds`` kill trials of ``kind`` (``follow``, ``sweep``, ``gc``), each on its
    own copy of the store; ``on_trial`` hears of each trial as it ends."""
    rng = random.Random(f"{kind}:{seed}")
    trial = {"follow": follow_trial, "sweep": sweep_trial, "gc": gc_trial}[kind]
    outcomes = []
    for i in range(rounds):
        point = POINTS[kind][i % len(POINTS[kind])]
        outcome = trial(spark, scenario, folder / f"{kind}-{i:03d}", point, rng)
        if on_trial is not None:
            on_trial(i, outcome)
        outcomes.append(outcome)
    return outcomes


def _kill_when(
    command: CliLoad,
    point: KillPoint,
    anchors: dict[str, Callable[[], bool]],
    marker: Path,
    rng: random.Random,
) -> bool:
    """Wait for ``point`` (its anchor, then a random delay), then SIGKILL the command's
    group; True if it ended on its own first."""
    reached = {"failpoint": lambda: marker_written(marker), "start": lambda: True, **anchors}
    delay = rng.uniform(0.0, point.max_delay)
    poll = min(0.02, point.max_delay / 10) or 0.02  # a short window is watched closely
    try:
        return wait_then_delay(
            command, reached[point.anchor], delay, point.name, WAIT_SECONDS, poll
        )
    finally:
        command.kill()


def _phase_seen(read: Callable[[], str]) -> str:
    """The phase a timed kill hit, as ``read`` reads it from the store after the kill, or
    :data:`UNREADABLE`."""
    try:
        return read()
    except Exception:  # a damaged store: the trial's checks say what is wrong with it
        return UNREADABLE


def _ended_badly(command: CliLoad, finished: bool) -> str:
    code = command.process.returncode
    return f"exit {code}: {command.error_lines()[-3:]}" if finished and code != 0 else ""


def _reads_as(store: Path, answers: dict[int, Dump]) -> tuple[bool, str]:
    """Whether the store reads as one of ``answers`` (version -> answer), exactly; if not,
    what it reads as."""
    try:
        version, answer = store_version(store), tree_dump(store)
    except Exception as exc:  # a reader refusing the store: recorded, the round goes on
        return False, f"reading it: {type(exc).__name__}: {exc}"
    if answers.get(version) == answer:
        return True, ""
    return False, f"version {version}, whose answer is not that of an uninterrupted run"


def _ends_at(
    store: Path, versions: Collection[int], answer: Dump, what: str, lock_free: bool = True
) -> str:
    """'' if the store is at one of ``versions`` with ``answer`` and (``lock_free``) its
    lock is free; else what is wrong, after ``what``."""
    try:
        seen, dump = store_version(store), tree_dump(store)
    except Exception as exc:  # recorded, as above
        return f"after {what}: {type(exc).__name__}: {exc}"
    if lock_free and lock_holder(page_store_for(store)) is not None:
        return f"{what} left the lock held"
    if dump != answer or seen not in versions:
        return f"after {what}: version {seen}, not the answer of an uninterrupted run"
    return ""


def _outcome(
    kind: str,
    point: KillPoint,
    phase: str,
    after_kill: tuple[bool, str, list[str]],
    after_next: tuple[str, list[str]],
    ended_badly: str,
) -> KillOutcome:
    exact, seen, check_after_kill = after_kill
    said, check_after_next = after_next
    detail = "; ".join(
        p for p in (f"after the kill: {seen}" if seen else "", said) if p
    )  # fmt: skip
    return KillOutcome(
        point.name, phase, exact, check_after_kill, not said, check_after_next, detail,
        ended_badly, kind,
    )  # fmt: skip


# -- load --follow ------------------------------------------------------------------------

_PUBLISHED = re.compile(r"batch \d+: .*, version (\d+),")
"""A follower's line for a micro-batch that published a version."""


def follow_trial(
    spark: object, scenario: CommandScenario, folder: Path, point: KillPoint, rng: random.Random
) -> KillOutcome:
    """Kill a follower of the version-1 store at ``point``; check, restart it, check."""
    job = scenario.follow_inputs(folder / "inputs")
    store = scenario.base.fresh_store(folder / "store")
    marker = folder / "marker"
    arguments = ["load", str(job), "--store", str(store), "--follow", "--trigger", TRIGGER]
    follower = start_cli(
        [*arguments, "--master", "local[2]"], failpoint_env(point.failpoint, marker)
    )
    arrived: list[bool] = []

    def first_printed() -> bool:
        return any(_PUBLISHED.match(line) for _, line in follower.out)

    def new_file() -> bool:  # reached once the first micro-batch is out: B arrives then
        if first_printed() and not arrived:
            write_follow_b(folder / "inputs")
            arrived.append(True)
        return bool(arrived)

    anchors = {"batch printed": first_printed, "new file": new_file}
    finished = _kill_when(follower, point, anchors, marker, rng)
    phase = point.phase or _phase_seen(lambda: _follow_phase(follower, store, finished))
    if not arrived:  # B arrives while the follower is down
        write_follow_b(folder / "inputs")
    base = scenario.base
    exact, seen = _reads_as(store, {1: base.before, 2: base.reference, 3: scenario.after_b})
    after_kill = (exact, seen, check_problems(store))
    try:
        follow_job(spark, load_job(job), store, available_now=True)  # type: ignore[arg-type]
        # version 3 (A, then B), or 2 (both in one micro-batch), never an empty version
        said = _ends_at(store, (2, 3), scenario.after_b, "the restarted follower")
    except Exception as exc:  # recorded: the trial fails, the round goes on
        said = f"the restarted follower failed: {type(exc).__name__}: {exc}"
    after_next = (said, check_problems(store))
    return _outcome(
        "follow", point, phase, after_kill, after_next, _ended_badly(follower, finished)
    )


def _numbers(folder: Path) -> list[int]:
    return (
        sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []
    )


def _follow_phase(follower: CliLoad, store: Path, finished: bool) -> str:
    """The phase a timed kill hit, read from the store, Spark's checkpoint (a micro-batch
    is under way from its offsets' entry to its commit's) and the follower's output."""
    if finished:
        return FOLLOW_PHASES[9]
    current = int((store / CURRENT).read_text().strip())
    if (store / manifest_name(current + 1)).exists():
        return FOLLOW_PHASES[5]
    offsets = _numbers(store / STREAM_CHECKPOINT / "offsets")
    commits = _numbers(store / STREAM_CHECKPOINT / "commits")
    if not offsets:
        return FOLLOW_PHASES[0]
    if commits and commits[-1] >= offsets[-1]:
        return FOLLOW_PHASES[8]
    printed = [int(m[1]) for _, line in follower.out if (m := _PUBLISHED.match(line))]
    if current > max(printed, default=1):
        return FOLLOW_PHASES[7]
    return FOLLOW_PHASES[2] if _unpublished_tree_files(store) else FOLLOW_PHASES[1]


def _unpublished_tree_files(store: Path) -> bool:
    """Whether ``trees/`` holds a file no published version uses (a load's, unfinished)."""
    pages = page_store_for(store)
    try:
        used: set[str] = set()
        for version in published_versions(pages):
            manifest = open_version(pages, version).manifest
            used |= manifest.runs() | {n.rsplit(".", 1)[0] for n in manifest.side_files()}
    except Exception:  # a store a reader refuses: the trial says so; this is only its phase
        return False
    return any(name.rsplit(".", 1)[0] not in used for name in pages.list(TREES))


# -- sweep --------------------------------------------------------------------------------


def _results(store: Path) -> tuple[set[str] | None, set[str]]:
    """The sweep's files the published version loaded (None: it loaded none) and the files
    under ``sweeps/NAME`` now."""
    folder = store / "sweeps" / SWEEP_NAME
    present = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
    source = f"sweep-{SWEEP_NAME}"
    inputs = open_version(store).manifest.inputs.values()
    loaded = {str(entry["relative"]) for entry in inputs if entry.get("source") == source}
    return loaded or None, present


def _results_differ(store: Path, when: str) -> str:
    """'' if ``sweeps/NAME`` holds exactly the files the published version loaded of it."""
    loaded, present = _results(store)
    if loaded is None or loaded == present:
        return ""
    return f"{when}: sweeps/{SWEEP_NAME} holds {sorted(present)}, it loaded {sorted(loaded)}"


def sweep_trial(
    spark: object, scenario: CommandScenario, folder: Path, point: KillPoint, rng: random.Random
) -> KillOutcome:
    """Kill a sweep into the version-1 store at ``point``; check, sweep again, check."""
    store = scenario.base.fresh_store(folder / "store")
    marker = folder / "marker"
    inputs = ["--events", str(scenario.events), "--intervals", str(scenario.intervals)]
    arguments = ["sweep", *inputs, "--store", str(store), "--name", SWEEP_NAME]
    sweep = start_cli([*arguments, "--master", "local[2]"], failpoint_env(point.failpoint, marker))
    folder_of_results = store / "sweeps" / SWEEP_NAME
    anchors = {
        "result file": lambda: folder_of_results.is_dir() and any(folder_of_results.iterdir())
    }
    finished = _kill_when(sweep, point, anchors, marker, rng)
    phase = point.phase or _phase_seen(lambda: _sweep_phase(store, finished))
    exact, seen = _reads_as(store, {1: scenario.base.before, 2: scenario.sweep_reference})
    published = False
    if exact:  # what the published version loaded of the sweep is all that is there
        published = _results(store)[0] is not None
        seen = _results_differ(store, "its results")
        exact = not seen
    after_kill = (exact, seen, check_problems(store))
    said = _sweep_again(spark, scenario, store, published)
    after_next = (said, check_problems(store))
    return _outcome("sweep", point, phase, after_kill, after_next, _ended_badly(sweep, finished))


def _sweep_again(spark: object, scenario: CommandScenario, store: Path, published: bool) -> str:
    """Run the same sweep again: '' if it ends exact (or, ``published``, is refused as a
    name taken, the store unchanged), else what went wrong."""
    try:
        run_sweep(spark, str(scenario.events), str(scenario.intervals), str(store), SWEEP_NAME)  # type: ignore[arg-type]
    except StoreError as exc:
        if not (published and f"already holds a sweep called {SWEEP_NAME!r}" in str(exc)):
            return f"the sweep again failed: {exc}"
    except Exception as exc:  # recorded: the trial fails, the round goes on
        return f"the sweep again failed: {type(exc).__name__}: {exc}"
    else:
        if published:
            return "the sweep ran again over a sweep of its name already published"
    # refused before taking the lock, it leaves the dead sweep's lease to the next writer
    said = _ends_at(store, (2,), scenario.sweep_reference, "the sweep again", not published)
    if published and not said:
        try:
            check_unlocked(page_store_for(store))
        except StoreError as exc:
            said = f"the dead sweep's lock cannot be taken over: {exc}"
    return said or _results_differ(store, "after the sweep again")


def _sweep_phase(store: Path, finished: bool) -> str:
    if finished:
        return SWEEP_PHASES[7]
    current = int((store / CURRENT).read_text().strip()) if (store / CURRENT).exists() else 0
    if current == 2:
        return SWEEP_PHASES[6]
    if (store / manifest_name(2)).exists():
        return SWEEP_PHASES[5]
    if _unpublished_tree_files(store):
        return SWEEP_PHASES[3]
    results = store / "sweeps" / SWEEP_NAME
    return SWEEP_PHASES[1] if results.is_dir() and any(results.iterdir()) else SWEEP_PHASES[0]


# -- gc -----------------------------------------------------------------------------------


def gc_trial(
    spark: object, scenario: CommandScenario, folder: Path, point: KillPoint, rng: random.Random
) -> KillOutcome:
    """Kill ``treestore gc --keep 1`` at ``point``; check, gc again, check, load, check."""
    store = scenario.gc_copy(folder / "store")
    marker = folder / "marker"
    leases = {p.name for p in (store / LOCKS).iterdir()}
    gc = start_cli(
        ["gc", str(store), "--keep", str(GC_KEEP)], failpoint_env(point.failpoint, marker)
    )
    anchors = {"lease": lambda: any(p.name not in leases for p in (store / LOCKS).iterdir())}
    finished = _kill_when(gc, point, anchors, marker, rng)
    phase = point.phase or _phase_seen(lambda: _gc_phase(scenario, store, finished))
    exact, seen = _reads_as(store, {GC_VERSION: scenario.gc_before})
    after_kill = (exact, seen, check_problems(store))
    checks: list[str] = []
    try:
        command_gc(str(store), GC_KEEP, io.StringIO())
        said = _ends_at(store, (GC_VERSION,), scenario.gc_before, "the gc again")
        left = gc_files(store)
        if not said and left != scenario.gc_files:
            said = (
                f"the gc again left {sorted(left - scenario.gc_files)[:3]} and lacks "
                f"{sorted(scenario.gc_files - left)[:3]}"
            )
        checks += check_problems(store)
        run_load(spark, load_job(scenario.base.job), store)  # type: ignore[arg-type]
        said = said or _ends_at(store, (GC_VERSION + 1,), scenario.gc_next, "the next load")
    except Exception as exc:  # recorded: the trial fails, the round goes on
        said = f"the next command failed: {type(exc).__name__}: {exc}"
    after_next = (said, checks + check_problems(store))
    return _outcome("gc", point, phase, after_kill, after_next, _ended_badly(gc, finished))


def _gc_phase(scenario: CommandScenario, store: Path, finished: bool) -> str:
    """The phase a timed kill hit: what of what gc removes is gone."""
    left = gc_files(store)
    if finished or left == scenario.gc_files:
        return GC_PHASES[4]
    doomed = gc_files(scenario.gc_store) - scenario.gc_files
    removed = doomed - left
    runs = {name for name in doomed if name.startswith(f"{TREES}/")}
    if not removed:
        return GC_PHASES[0]
    if not runs & removed:
        return GC_PHASES[1]
    return GC_PHASES[2] if runs - removed else GC_PHASES[3]
