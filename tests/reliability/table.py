"""The fault matrix, from one run: ``python -m tests.reliability.table`` (``make reliability``).

Runs the randomized kill rounds and the racing loads (:mod:`tests.support.reliability.kills`),
the kill rounds of ``load --follow``, ``sweep`` and ``gc``
(:mod:`tests.support.reliability.kill_commands`), the kill rounds of a load into a store on
S3 (:mod:`tests.support.reliability.kill_s3`, on moto's server, which it starts and stops),
the power-cut rounds (:mod:`tests.support.reliability.powercut_rounds`), the disk-full
trials on each filesystem this machine offers (:mod:`tests.support.reliability.diskfull`),
the named corruption and bad-input cases (their pytest files, counted from pytest's JUnit
XML), and the long fuzz round of the parsers (``python -m tests.reliability.fuzz``), then
prints the matrix as markdown on standard output (progress goes to standard error).
Every number comes from this run. Exits 1 if any trial or case failed.
``docs/reliability.md`` shows one run's output.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.profiles import PROFILE_ENV
from tests.support.reliability import diskfull, kill_commands, kill_s3, kills, powercut_rounds
from tests.support.reliability.command_scenario import CommandScenario, prepare_command_scenario
from tests.support.reliability.scenario import Scenario, prepare_scenario
from tests.support.s3_server import start_s3_server

ROOT = Path(__file__).resolve().parents[2]
COMMAND_KILLS = {f"kills-{kind}": kind for kind in kill_commands.KINDS}
"""The sections of the kill rounds of other commands than a load, by the kind they run."""
SECTIONS = ("kills", *COMMAND_KILLS, "races", "kills-s3", "powercut", "disk", "cases", "fuzz")
COMMAND_ROUNDS = 20
"""Kill trials of each other command when neither its option nor its variable says."""
NEXT_COMMANDS = {
    "follow": "the follower restarted (`--available-now`)",
    "sweep": "the same sweep again",
    "gc": "gc again, then the next load",
}

CASE_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "store damage: check names it, readers refuse or are unaffected",
        ("tests/treestore/store/test_check_damage.py",),
    ),
    (
        "store damage with real loads, partial files, published versions",
        (
            "tests/treestore/store/test_damage_real_loads.py",
            "tests/treestore/store/test_partial_files.py",
            "tests/shell/test_info_published.py",
        ),
    ),
    (
        "manifest and run checksums; sealed documents",
        (
            "tests/treestore/store/test_manifest_checksum.py",
            "tests/treestore/store/test_sealed_documents.py",
        ),
    ),
    (
        "lock holder identity (pid reuse, garbage leases)",
        ("tests/treestore/store/test_lock_identity.py",),
    ),
    (
        "bad input files: bytes that are not text, broken links",
        ("tests/loaders/formats/test_bad_bytes.py", "tests/loaders/listing/test_symlinks.py"),
    ),
    (
        "bad input files: csv quotes past a line's end, unreadable compressed files, long lines",
        ("tests/loaders/formats/test_input_damage.py",),
    ),
    ("a failed Spark job says its cause", ("tests/loaders/load/test_failure_causes.py",)),
    (
        "inputs keep their identity when moved",
        (
            "tests/loaders/listing/test_input_identity.py",
            "tests/loaders/follow/test_follow_moved.py",
        ),
    ),
    (
        "tree runs say their shard and store: a moved or copied run is refused, old runs read",
        ("tests/treestore/storage/test_run_owner.py", "tests/treestore/store/test_store_owner.py"),
    ),
    (
        "a store at a path only the driver has: the load fails in one line, publishes nothing",
        ("tests/loaders/load/test_driver_only_store.py", "tests/treestore/store/test_written.py"),
    ),
    (
        "parser refusals (the issue's repros, named)",
        (
            "tests/query/syntax/test_parser_refusals.py",
            "tests/query/ops/test_op_refusals.py",
            "tests/loaders/job/test_job_refusals.py",
        ),
    ),
    (
        "dedup index with real loads: rebuilt, caught up, runs of another shard, CURRENT "
        "rolled back",
        ("tests/loaders/load/test_dedup_load.py",),
    ),
    (
        "long texts: thousands of ops, path elements and names",
        (
            "tests/query/ops/test_long_chains.py",
            "tests/query/walk/test_long_paths.py",
            "tests/query/syntax/test_long_texts.py",
        ),
    ),
)
"""Named cases, by group: the pytest files whose cases are counted (one pytest run)."""
PER_CASE_GROUPS = frozenset({CASE_GROUPS[0][0], CASE_GROUPS[4][0], CASE_GROUPS[5][0]})
"""Groups whose every case gets a row of its own."""


@dataclass
class Section:
    """A part of the output: its rows in the matrix, its own tables, whether all held."""

    matrix_rows: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    clean: bool = True


def say(text: str) -> None:
    """Progress, on standard error (standard output carries the markdown only)."""
    print(text, file=sys.stderr, flush=True)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _yes(count: int, total: int) -> str:
    return f"{count}/{total}"


def kill_section(
    spark: object, scenario: Scenario | None, workdir: Path, rounds: int, seed: int
) -> Section:
    """Kill rounds: the matrix row, and a table of trials by phase."""
    assert scenario is not None
    outcomes = kills.run_kill_rounds(
        spark, scenario, workdir / "kills", rounds, seed, _kill_progress("kill", rounds)
    )
    section = Section()
    held = sum(o.clean for o in outcomes)
    section.matrix_rows.append(
        f"| SIGKILL of a load (driver, JVM and workers) | {len(kills.KILL_POINTS)} kill points, "
        f"random delays (seed {seed}) | {_count(rounds, 'trial')} | {_yes(held, rounds)} |"
    )
    _phase_table(section, f"Kills by phase ({rounds} trials, seed {seed})", outcomes)
    section.lines += ["", "Kill points: " + "; ".join(p.name for p in kills.KILL_POINTS) + "."]
    _failures(section, outcomes)
    return section


def kill_s3_section(spark: object, workdir: Path, rounds: int, seed: int) -> Section:
    """Kill rounds of a load into a store on S3 (moto's server, started here and stopped by
    pid): the matrix row, and a table of trials by phase."""
    scenario = prepare_scenario(
        spark, workdir / "kills-s3-scenario", kill_s3.SECOND_BATCH_ROWS, seed=1
    )
    (workdir / "s3-server").mkdir(exist_ok=True)
    server = start_s3_server(workdir / "s3-server")
    try:
        outcomes = kill_s3.run_s3_kill_rounds(
            spark, scenario, server, workdir / "kills-s3", rounds, seed,
            _kill_progress("kill on S3", rounds),
        )  # fmt: skip
    finally:
        server.stop()
    section = Section()
    held = sum(o.clean for o in outcomes)
    section.matrix_rows.append(
        "| SIGKILL of a load into a store on S3 (moto's server) "
        f"| {len(kill_s3.S3_KILL_POINTS)} kill points, random delays (seed {seed}) "
        f"| {_count(rounds, 'trial')} | {_yes(held, rounds)} |"
    )
    title = f"Kills of a load into a store on S3 by phase ({rounds} trials, seed {seed})"
    _phase_table(section, title, outcomes)
    points = "; ".join(p.name for p in kill_s3.S3_KILL_POINTS)
    section.lines += ["", f"Kill points: {points}."]
    _failures(section, outcomes)
    return section


def _kill_progress(label: str, rounds: int) -> Callable[[int, kills.KillOutcome], None]:
    def progress(i: int, outcome: kills.KillOutcome) -> None:
        result = "clean" if outcome.clean else f"FAILED: {outcome.reason()}"
        say(f"{label} {i + 1}/{rounds}: {outcome.point} -> {outcome.phase}: {result}")

    return progress


def _phase_table(
    section: Section,
    title: str,
    outcomes: list[kills.KillOutcome],
    phases: Sequence[str] = kills.PHASES,
    next_command: str = "re-load",
) -> None:
    """Kill trials counted by the phase the command was in."""
    section.lines += [
        f"### {title}",
        "",
        "| phase at the kill | trials | store exact after the kill | check clean after the kill "
        f"| {next_command}: exact | check clean after it |",
        "|---|---|---|---|---|---|",
    ]
    for phase in phases:
        got = [o for o in outcomes if o.phase == phase]
        if not got:
            continue
        counts = (
            sum(o.exact_after_kill for o in got),
            sum(not o.check_after_kill for o in got),
            sum(o.next_exact for o in got),
            sum(not o.check_after_next for o in got),
        )
        cells = " | ".join(_yes(c, len(got)) for c in counts)
        section.lines.append(f"| {phase} | {len(got)} | {cells} |")


def _failures(section: Section, outcomes: list[kills.KillOutcome]) -> None:
    failed = [o for o in outcomes if not o.clean]
    section.lines += [f"- FAILED: {o.point} ({o.phase}): {o.reason()}" for o in failed]
    section.clean = not failed


def command_kill_section(
    spark: object,
    scenario: CommandScenario | None,
    kind: str,
    workdir: Path,
    rounds: int,
    seed: int,
) -> Section:
    """Kill rounds of ``kind`` (``follow``, ``sweep``, ``gc``): the matrix row, and a table
    of trials by phase."""
    assert scenario is not None

    def progress(i: int, outcome: kills.KillOutcome) -> None:
        result = "clean" if outcome.clean else f"FAILED: {outcome.reason()}"
        say(f"kill {kind} {i + 1}/{rounds}: {outcome.point} -> {outcome.phase}: {result}")

    folder = workdir / f"kills-{kind}"
    outcomes = kill_commands.run_command_kill_rounds(
        spark, scenario, kind, folder, rounds, seed, progress
    )
    points = kill_commands.POINTS[kind]
    held = sum(o.clean for o in outcomes)
    section = Section(clean=held == rounds)
    title = kill_commands.TITLES[kind]
    section.matrix_rows.append(
        f"| {title} | {len(points)} kill points, random delays (seed {seed}) "
        f"| {_count(rounds, 'trial')} | {_yes(held, rounds)} |"
    )
    title = f"Kills of `{kill_commands.COMMANDS[kind]}` by phase ({rounds} trials, seed {seed})"
    _phase_table(section, title, outcomes, kill_commands.PHASES[kind], NEXT_COMMANDS[kind])
    section.lines += ["", "Kill points: " + "; ".join(p.name for p in points) + "."]
    _failures(section, outcomes)
    return section


def race_section(scenario: Scenario | None, workdir: Path, rounds: int) -> Section:
    """Two CLI loads started together, ``rounds`` times."""
    assert scenario is not None
    outcomes = []
    for i in range(rounds):
        outcome = kills.race_trial(scenario, workdir / f"race-{i:03d}")
        say(f"race {i + 1}/{rounds}: {'clean' if outcome.clean else f'FAILED: {outcome}'}")
        outcomes.append(outcome)
    refused = sum(o.refusals for o in outcomes)
    late = sum(o.nothing_new for o in outcomes)
    section = Section(clean=all(o.clean for o in outcomes))
    section.matrix_rows.append(
        "| two loads racing for the lock | two CLI loads started together "
        f"| {_count(rounds, 'trial')} "
        f"| {_yes(sum(o.clean for o in outcomes), rounds)} (loser: {refused} refused in one "
        f"line, {late} found nothing new) |"
    )
    section.lines += [f"- FAILED race: {o}" for o in outcomes if not o.clean]
    return section


def power_cut_section(spark: object, workdir: Path, next_commands: int, seed: int) -> Section:
    """Power cuts of a load, a gc and a follower's micro-batch at every point of their
    journals; the next command on ``next_commands`` distinct crash states of each (chosen at
    random; 0: on all of them)."""
    scenario = prepare_scenario(
        spark, workdir / "powercut-scenario", powercut_rounds.SECOND_BATCH_ROWS, seed=3
    )
    section = Section()
    section.lines += [
        f"### Power cuts (seed {seed})",
        "",
        "| run cut | operations journaled | cut points | crash states (distinct) | exact and "
        "check clean | next command run on | next command exact |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in powercut_rounds.KINDS:
        outcome = powercut_rounds.run_power_cut_round(
            spark, scenario, kind, workdir / f"powercut-{kind}", seed, None, next_commands or None
        )
        say(
            f"power cuts of a {kind}: {outcome.points} points, {outcome.distinct} states, "
            f"{len(outcome.failures)} failed"
        )
        section.lines.append(
            f"| {kind} | {outcome.operations} | {outcome.points} | {outcome.states:,} "
            f"({outcome.distinct:,}) | {_yes(outcome.exact, outcome.distinct)} "
            f"| {outcome.next_runs} | {_yes(outcome.next_exact, outcome.next_runs)} |"
        )
        section.matrix_rows.append(
            f"| power cut of a {powercut_rounds.TITLES[kind]} | its journal replayed: every "
            f"point ({outcome.points}), chosen and random crash states (seed {seed}) "
            f"| {outcome.distinct:,} states | {_yes(outcome.exact, outcome.distinct)} exact, "
            f"check clean; next command {_yes(outcome.next_exact, outcome.next_runs)} |"
        )
        section.lines += [f"- FAILED ({kind}): {o.line()}" for o in outcome.failures]
        section.clean = section.clean and outcome.clean
    return section


def disk_section(spark: object, workdir: Path) -> Section:
    """Disk full on a tmpfs (where it can be mounted) and on the ENOSPC wrapper, via the CLI."""
    scenario = prepare_scenario(
        spark, workdir / "disk-scenario", diskfull.SECOND_BATCH_ROWS, seed=2
    )
    kinds = ["wrapper"]
    if diskfull.tmpfs_available(workdir / "tmpfs-probe"):
        kinds.insert(0, "tmpfs")
    section = Section()
    section.lines += [
        "### Disk full",
        "",
        "| filesystem | failed in one line naming the cause and the file | previous version "
        "exact | no partial files left | next load after freeing space exact |",
        "|---|---|---|---|---|",
    ]
    for kind in kinds:
        outcome = diskfull.disk_full_trial(spark, scenario, workdir / f"disk-{kind}", kind, True)
        say(f"disk full on {kind}: {'clean' if outcome.clean else f'FAILED: {outcome}'}")
        cells = [
            outcome.one_line_with_cause_and_file,
            outcome.previous_exact,
            not outcome.partial_files,
            outcome.next_load_exact,
        ]
        shown = " | ".join("yes" if c else "**no**" for c in cells)
        section.lines.append(f"| {outcome.filesystem} | {shown} |")
        section.matrix_rows.append(
            f"| disk full | {outcome.filesystem}, {diskfull.CAPACITY // 1024} KB | 1 trial "
            f"| {_yes(int(outcome.clean), 1)} |"
        )
        section.clean = section.clean and outcome.clean
        if outcome.message:
            section.lines.append(f"|  | said: `{outcome.message[-1][:300]}` | | | |")
        if not outcome.clean:
            section.lines.append(f"- FAILED ({kind}): {outcome}")
    if "tmpfs" not in kinds:
        section.lines.append("\n(no tmpfs: this run could not mount one, as it needs root)")
    return section


@dataclass(frozen=True)
class CaseResult:
    """One pytest case from the JUnit XML."""

    file: str
    name: str
    outcome: str
    message: str = ""
    """The first line of a failure's message (from the XML)."""


def run_cases(paths: Sequence[str], workdir: Path) -> list[CaseResult]:
    """Run pytest once on ``paths`` with the ``fuzz`` Hypothesis profile (the random input
    files of the bad-bytes cases); each case's outcome, read from pytest's JUnit XML."""
    report = workdir / f"junit-{time.monotonic_ns()}.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += [f"--junitxml={report}", *paths]
    env = {**os.environ, PROFILE_ENV: "fuzz"}
    subprocess.run(command, cwd=ROOT, env=env, capture_output=True, check=False)
    if not report.exists():
        return []
    modules = {p.removesuffix(".py").replace("/", "."): p for p in paths}
    results = []
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        failed = kinds & {"failure", "error"}
        outcome = "failed" if failed else "skipped" if "skipped" in kinds else "passed"
        classname = case.get("classname", "")
        file = next((f for m, f in modules.items() if classname.startswith(m)), classname)
        failure = next((c for c in case if c.tag in ("failure", "error")), None)
        said = (failure.get("message") or "") if failure is not None else ""
        first = said.strip().splitlines()[0][:300] if said.strip() else ""
        results.append(CaseResult(file, case.get("name", ""), outcome, first))
    return results


def cases_section(workdir: Path) -> Section:
    """The named cases of :data:`CASE_GROUPS`, counted."""
    section = Section()
    every = [p for _, paths in CASE_GROUPS for p in paths if (ROOT / p).exists()]
    say(f"cases: pytest on {len(every)} files")
    results = run_cases(every, workdir)
    for label, paths in CASE_GROUPS:
        present = [p for p in paths if p in every]
        missing = [p for p in paths if p not in every]
        mine = [r for r in results if r.file in present]
        passed, total = sum(r.outcome == "passed" for r in mine), len(mine)
        note = f" (not found: {', '.join(missing)})" if missing else ""
        section.matrix_rows.append(
            f"| {label} | {', '.join(Path(p).name for p in present)}{note} "
            f"| {_count(total, 'case')} "
            f"| {_yes(passed, total)} |"
        )
        section.clean = section.clean and passed == total and total > 0
        say(f"cases {label}: {passed}/{total}")
        if label in PER_CASE_GROUPS and mine:
            section.lines += [f"### {label}", "", "| case | held |", "|---|---|"]
            one_function = len({r.name.partition("[")[0] for r in mine}) == 1
            section.lines += [
                f"| {_case_name(r.name, one_function)} | {_held(r.outcome)} |" for r in mine
            ]
            section.lines.append("")
        failed = [r for r in mine if r.outcome != "passed"]
        section.lines += [f"- {r.outcome.upper()}: {r.file}::{r.name}: {r.message}" for r in failed]
    return section


def _held(outcome: str) -> str:
    return "yes" if outcome == "passed" else f"**{outcome}**"


def _case_name(name: str, id_only: bool) -> str:
    """A case as a row: its parameter id alone (``id_only``), else its function's name in
    words with the id after it."""
    function, _, rest = name.partition("[")
    case = rest.removesuffix("]")
    if id_only and case:
        return case
    words = function.removeprefix("test_").replace("_", " ")
    return f"{words} [{case}]" if case else words


FUZZ_LINE = re.compile(
    r"^(?P<parser>\w+)\s+tried\s+(?P<tried>\d+)\s+parsed\s+(?P<parsed>\d+)\s+refused with our "
    r"error\s+(?P<refused>\d+)\s+crashes\s+(?P<crashes>\d+)"
)


def fuzz_section(examples: int) -> Section:
    """The parsers' long fuzz round (``python -m tests.reliability.fuzz``), its figures."""
    section = Section()
    if not (ROOT / "tests" / "reliability" / "fuzz.py").exists():
        section.matrix_rows.append("| fuzzing the parsers | TODO-lead: no fuzz round yet | | |")
        return section
    command = [sys.executable, "-m", "tests.reliability.fuzz", "--examples", str(examples)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    found = [m for m in map(FUZZ_LINE.match, done.stdout.splitlines()) if m]
    for match in found:
        tried, crashes = int(match["tried"]), int(match["crashes"])
        section.matrix_rows.append(
            f"| fuzzing the {match['parser']} parser | random text, token soup, mutated "
            f"vectors (hypothesis) | {tried:,} inputs ({int(match['parsed']):,} parsed, "
            f"{int(match['refused']):,} refused with a position) | {_yes(tried - crashes, tried)} "
            "without a crash or hang |"
        )
        section.clean = section.clean and crashes == 0
    say(f"fuzz: {len(found)} parsers, exit {done.returncode}")
    if not found or done.returncode != 0:
        section.clean = False
        section.lines += ["```", done.stdout[-3000:], done.stderr[-2000:], "```"]
    return section


def main(argv: list[str] | None = None) -> int:
    """Run the rounds and print the fault matrix as markdown."""
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    env = os.environ.get
    options.add_argument("--kills", type=int, default=int(env(kills.ROUNDS_VARIABLE, "100")))
    for kind, variable in kill_commands.ROUNDS_VARIABLES.items():
        options.add_argument(
            f"--kills-{kind}",
            type=int,
            default=int(env(variable, str(COMMAND_ROUNDS))),
            help=f"kill trials of {kind} ({variable}; default {COMMAND_ROUNDS})",
        )
    options.add_argument("--races", type=int, default=int(env("TREESTORE_RACE_ROUNDS", "5")))
    options.add_argument(
        "--kills-s3",
        type=int,
        default=int(env(kill_s3.ROUNDS_VARIABLE, "20")),
        help="kill trials of a load into a store on the S3 test server",
    )
    options.add_argument(
        "--fuzz-examples",
        type=int,
        default=int(env("TREESTORE_FUZZ_EXAMPLES", "34000")),
        help="inputs per parser (three parsers)",
    )
    options.add_argument(
        "--powercut-next",
        type=int,
        default=int(env("TREESTORE_POWERCUT_NEXT", "0")),
        help="crash states of each power-cut round the next command runs on (0: all)",
    )
    options.add_argument("--seed", type=int, default=None, help="the kill rounds' seed")
    options.add_argument("--only", nargs="*", choices=SECTIONS, default=list(SECTIONS))
    options.add_argument("--workdir", type=Path, default=None, help="kept if given")
    args = options.parse_args(argv)
    seed = args.seed if args.seed is not None else kills.seed_from_env()
    with tempfile.TemporaryDirectory(prefix="treestore-reliability-") as temporary:
        workdir = args.workdir or Path(temporary)
        workdir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        sections = _run_sections(args, seed, workdir)
        minutes = (time.monotonic() - started) / 60
    print(
        f"## Fault matrix\n\nOne run of `python -m tests.reliability.table` on "
        f"{time.strftime('%Y-%m-%d')}, {minutes:.0f} minutes, {os.cpu_count()} cores.\n"
    )
    print("| fault | how it is made | trials / cases | all expectations held |")
    print("|---|---|---|---|")
    for section in sections:
        for row in section.matrix_rows:
            print(row)
    for section in sections:
        if section.lines:
            print()
            print("\n".join(section.lines))
    return 0 if all(s.clean for s in sections) else 1


def _run_sections(args: argparse.Namespace, seed: int, workdir: Path) -> list[Section]:
    sections: list[Section] = []
    spark: object = None
    if {"kills", "races", "kills-s3", "powercut", "disk", *COMMAND_KILLS} & set(args.only):
        from treestore.spark import get_session

        spark = get_session("local[2]", app_name="treestore-reliability")
    scenario = None
    if {"kills", "races"} & set(args.only):
        scenario = prepare_scenario(spark, workdir / "scenario", kills.SECOND_BATCH_ROWS, 1)
    commands = None
    if set(COMMAND_KILLS) & set(args.only):
        commands = prepare_command_scenario(spark, workdir / "commands-scenario")

    def command_kills(kind: str) -> Callable[[], Section]:
        rounds = getattr(args, f"kills_{kind}")
        return lambda: command_kill_section(spark, commands, kind, workdir, rounds, seed)

    steps: dict[str, Callable[[], Section]] = {
        "kills": lambda: kill_section(spark, scenario, workdir, args.kills, seed),
        **{name: command_kills(kind) for name, kind in COMMAND_KILLS.items()},
        "races": lambda: race_section(scenario, workdir, args.races),
        "kills-s3": lambda: kill_s3_section(spark, workdir, args.kills_s3, seed),
        "powercut": lambda: power_cut_section(spark, workdir, args.powercut_next, seed),
        "disk": lambda: disk_section(spark, workdir),
        "cases": lambda: cases_section(workdir),
        "fuzz": lambda: fuzz_section(args.fuzz_examples),
    }
    for name in SECTIONS:
        if name in args.only:
            say(f"== {name}")
            try:
                sections.append(steps[name]())
            except Exception as exc:  # one part that breaks still leaves the others' figures
                row = f"| {name} | the harness failed: {type(exc).__name__}: {exc} | | |"
                sections.append(Section([row], [], clean=False))
    return sections


if __name__ == "__main__":
    sys.exit(main())
