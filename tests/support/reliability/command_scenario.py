"""The stores and inputs of the kill rounds of ``load --follow``, ``sweep`` and ``gc``
(:mod:`tests.support.reliability.kill_commands`), and the answers they must end at.

Built once (:func:`prepare_command_scenario`) on a
:class:`~tests.support.reliability.scenario.Scenario` (the demo at
version 1, a seeded second batch ``A``; ``reference``, the answer of the demo and ``A``,
comes from a store that loaded both at once, as its version 1):

- **follow**: a follower of the version-1 store whose first micro-batch finds ``A``;
  later a third batch ``B`` arrives (one small file, written by the trial).
  ``after_b`` is the answer of a load of ``B`` after the demo and ``A``.
- **sweep**: a small seeded events and intervals table beside the inputs (outside the
  job's sources), swept into a copy of the version-1 store as sweep ``NAME``;
  ``sweep_reference`` is the answer of an uninterrupted sweep.
- **gc**: version 1 (the demo and ``A`` in one load, as ``reference``), then one small
  batch per load up to version :data:`GC_VERSION` (the last load has more runs per shard
  than :data:`~treestore.storage.compaction.MAX_RUNS` and compacts them, so some runs are
  used by old versions only), plus what a load of a batch ``D`` killed between its
  manifest and ``CURRENT`` leaves (its runs and dedup runs, its manifest unpublished).
  ``gc_before`` is the answer of version :data:`GC_VERSION`, ``gc_files`` the files an
  uninterrupted ``gc --keep 1`` leaves (old manifests, the runs only they used and the
  killed load's files gone), ``gc_next`` the answer of the next load (it loads ``D``).
"""

from __future__ import annotations

import io
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

from loaders import load_job, run_load
from loaders.sweep.command import run_sweep
from shell.commands import command_gc
from tests.support.reliability.scenario import (
    Dump,
    Scenario,
    prepare_scenario,
    store_files,
    tree_dump,
)
from treestore.storage.compaction import MAX_RUNS
from treestore.storage.pagestore import page_store_for
from treestore.store.versions import open_version, published_versions

SECOND_BATCH_ROWS = 300
"""Records of the base scenario's second batch ``A``: small, the trials are about the
commands, not the load's size."""
SWEEP_NAME = "spans"
"""The sweep's name (its top node, and ``sweeps/spans`` in the store)."""
GC_KEEP = 1
"""``gc --keep``: every version but the newest goes."""
GC_VERSION = 2 + MAX_RUNS
"""The gc scenario's published version: one load more than a shard keeps runs, so the
last load compacts."""
GC_BATCH_ROWS = 30
"""Attribute records of each of the gc scenario's loads (and half as many mappings)."""
FOLLOW_INPUTS = ("job.json", "attributes", "mapping")
"""What a follower trial copies of the scenario's folder (its job and sources)."""


@dataclass(frozen=True)
class CommandScenario:
    """The base scenario, the inputs of the three commands and their expected answers."""

    base: Scenario
    follow_files: tuple[str, ...]
    """The base's input files (relative paths) a follower trial starts with: version 1's
    and ``A``."""
    after_b: Dump
    events: Path
    intervals: Path
    sweep_reference: Dump
    gc_store: Path
    gc_before: Dump
    gc_files: frozenset[str]
    """Every file of the gc'ed store but the lock's leases (relative paths)."""
    gc_next: Dump

    def follow_inputs(self, where: Path) -> Path:
        """A copy of the job and of version 1's and ``A``'s files under ``where`` (times
        kept, so they are the files the store loaded, under a new root); the job file."""
        return copy_files(self.base.folder, self.follow_files, where) / "job.json"

    def gc_copy(self, where: Path) -> Path:
        """A copy of the gc scenario's store at ``where`` (a folder that does not exist)."""
        shutil.copytree(self.gc_store, where)
        return where


def copy_files(source: Path, names: tuple[str, ...], where: Path) -> Path:
    """Copy the files ``names`` (relative paths) of ``source`` to ``where``, times kept."""
    for name in names:
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / name, where / name)
    return where


def write_batch(folder: Path, number: int, rows: int, seed: int, mapping: bool = True) -> None:
    """Attribute and (``mapping``) mapping files ``*-NNNN.tsv`` (``NNNN``: ``number``) of
    ``rows`` and ``rows // 2`` records under ``folder``'s sources, with times after the
    scenario's. Each file is written beside its source and renamed into it, so a follower
    never lists one half written."""
    rng = random.Random(seed)
    attributes = ["TIME\tUID\tATTRIBUTE_IDS"]
    for i in range(rows):
        ids = f"{rng.randrange(50)},{rng.randrange(50)}"
        attributes.append(f"{1419442000000 + number * 100_000 + i}\t{rng.randrange(200)}\t{ids}")
    files = {f"attributes/attributes-{number:04d}.tsv": attributes}
    if mapping:
        lines = ["TIME\tUID\tPUID"]
        for i in range(rows // 2):
            lines.append(f"{1419442050000 + number * 100_000 + i}\t{rng.randrange(300)}\tq{i}")
        files[f"mapping/mapping-{number:04d}.tsv"] = lines
    for name, lines in files.items():
        staged = folder / f".{number}-{Path(name).name}"
        staged.write_text("\n".join(lines) + "\n")
        os.replace(staged, folder / name)


FOLLOW_B = 3
"""The number of the follower's third batch ``B``: one attributes file,
``attributes-0003.tsv`` (one file, so it arrives in one micro-batch)."""
B_ROWS = 60


def write_follow_b(folder: Path) -> None:
    """Batch ``B``, the file that arrives while the follower runs (or is down)."""
    write_batch(folder, FOLLOW_B, B_ROWS, seed=43, mapping=False)


def _write_sweep_inputs(folder: Path, seed: int) -> tuple[Path, Path]:
    """A seeded events table (id, time) and intervals table (id, start, end, points)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    events = ["id,time"] + [f"{rng.randrange(20)},{rng.randrange(1000)}" for _ in range(400)]
    intervals = ["id,start,end,points"]
    for _ in range(120):
        start = rng.randrange(1000)
        intervals.append(
            f"{rng.randrange(20)},{start},{start + rng.randrange(200)},{rng.randrange(9)}"
        )
    (folder / "events.csv").write_text("\n".join(events) + "\n")
    (folder / "intervals.csv").write_text("\n".join(intervals) + "\n")
    return folder / "events.csv", folder / "intervals.csv"


def _load(spark: object, job: Path, store: Path) -> None:
    run_load(spark, load_job(job), store)  # type: ignore[arg-type]


def _left_by_a_killed_load(loaded: Path, store: Path) -> None:
    """Copy into ``store`` what ``loaded`` (``store`` plus one load) holds that ``store``
    does not (its manifest, runs, side files, dedup runs: not ``CURRENT``, the dedup
    index or the lock's leases): what the load killed before ``CURRENT`` leaves."""
    for path in sorted(loaded.rglob("*")):
        name = path.relative_to(loaded)
        if path.is_file() and name.parts[0] != "locks" and not (store / name).exists():
            (store / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, store / name)


def prepare_command_scenario(spark: object, folder: Path) -> CommandScenario:
    """Build the base scenario (:data:`SECOND_BATCH_ROWS` records in ``A``), then the
    three commands' stores and answers, in ``folder`` (the base's source folders also
    get the gc scenario's batches)."""
    base = prepare_scenario(spark, folder / "base", SECOND_BATCH_ROWS, seed=5)
    follow_files = tuple(
        sorted(
            str(p.relative_to(base.folder))
            for name in FOLLOW_INPUTS
            for p in [base.folder / name, *(base.folder / name).rglob("*")]
            if p.is_file()
        )
    )
    # follow: the answer once B is loaded after A, as a second load (a copy of the inputs)
    inputs = copy_files(base.folder, follow_files, folder / "follow" / "inputs")
    write_follow_b(inputs)
    after_b_store = folder / "follow" / "after-b"
    shutil.copytree(base.folder / "stores" / "reference", after_b_store)
    _load(spark, inputs / "job.json", after_b_store)
    # sweep: its inputs, and its answer on a copy of the version-1 store
    events, intervals = _write_sweep_inputs(folder / "sweep-inputs", seed=7)
    swept = base.fresh_store(folder / "sweep" / "reference")
    run_sweep(spark, str(events), str(intervals), str(swept), SWEEP_NAME)  # type: ignore[arg-type]
    # gc: versions 1 to GC_VERSION, and what a killed load of D left
    gc_store = folder / "gc" / "store"
    shutil.copytree(base.folder / "stores" / "reference", gc_store)  # one version: 1 and A
    for number in range(10, 10 + GC_VERSION - 1):  # a small batch a version
        write_batch(base.folder, number, GC_BATCH_ROWS, seed=number)
        _load(spark, base.job, gc_store)
    loaded = folder / "gc" / "loaded-d"
    shutil.copytree(gc_store, loaded)
    write_batch(base.folder, 9, GC_BATCH_ROWS, seed=9)  # D
    _load(spark, base.job, loaded)
    _left_by_a_killed_load(loaded, gc_store)
    collected = folder / "gc" / "collected"
    shutil.copytree(gc_store, collected)
    command_gc(str(collected), GC_KEEP, io.StringIO())
    _require_old_runs_collected(gc_store, collected)
    return CommandScenario(
        base=base,
        follow_files=follow_files,
        after_b=tree_dump(after_b_store),
        events=events,
        intervals=intervals,
        sweep_reference=tree_dump(swept),
        gc_store=gc_store,
        gc_before=tree_dump(gc_store),
        gc_files=frozenset(gc_files(collected)),
        gc_next=tree_dump(loaded),
    )


def _require_old_runs_collected(store: Path, collected: Path) -> None:
    """Fail unless gc removed a run a published version used (the compaction happened):
    else the gc trials would not try the removal of an old version's files."""
    newest = open_version(store).manifest.runs()
    kept = published_versions(page_store_for(store))[:-1]  # the loads' own gc kept these
    old = set().union(*(open_version(store, v).manifest.runs() for v in kept))
    removed = {name.rsplit(".", 1)[0] for name in gc_files(store) - gc_files(collected)}
    if not (old - newest) & removed:
        raise AssertionError("the gc scenario's gc removes no run of an old version")


def gc_files(store: Path) -> set[str]:
    """A store's files but its lock's leases (relative paths): what gc leaves to compare."""
    return {name for name in store_files(store) if not name.startswith("locks/")}
