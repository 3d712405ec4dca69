"""The store the reliability trials damage, and the tools they share.

A :class:`Scenario` is the demo's inputs with version 1 loaded (``before``), plus a
second, seeded batch of input files; ``reference`` is the tree of a store that loaded
everything without any fault. A trial copies the version-1 store (the inputs stay in
the scenario's folder, so the copied manifest's input paths stay true), runs a second
load that something goes wrong in, and compares the store with ``before`` and
``reference``. :func:`start_cli` runs a ``treestore`` command as a user would (a load:
:func:`start_cli_load`): its own process group (its JVM and Python workers included), so
a trial can kill all of it; :func:`wait_then_delay` waits for a trial's kill point and
:func:`failpoint_env` stops the command at a named failpoint
(:mod:`treestore.failpoints`). The tools that read or load a store take its location: a
local folder or a URI (``s3://bucket/store``, reached with the AWS settings of this
process).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import treestore
from loaders import load_job, run_load
from shell.demo import write_demo_inputs
from treestore.storage.pagestore import page_store_for
from treestore.store.maintenance import check_store

Location = Path | str
"""Where a store is: a local folder, or a URI (``s3://bucket/store``)."""

Dump = list[tuple[int, tuple[str, ...], int, int]]
"""Every node of every shard: (shard, path, hits, child count), sorted: a store's answer."""


def tree_dump(store: Location) -> Dump:
    """The store's whole answer, read as a reader reads it (CURRENT, manifest, runs)."""
    version = treestore.open(store).store_version
    return sorted(
        (shard, path, node.hits, node.child_count)
        for shard in version.manifest.trees
        for path, node in version.tree(shard).walk()
    )


def store_version(store: Location) -> int:
    """The store's published version."""
    return int(treestore.open(store).version)


def store_files(store: Location, under: str = "") -> set[str]:
    """Every file of the store (under its folder ``under``, if given), as names relative to
    the store: a local folder's files, or the objects listed under a URI."""
    if isinstance(store, str):
        return set(page_store_for(store).list(under))
    root = store / under if under else store
    return {str(p.relative_to(store)) for p in root.rglob("*") if p.is_file()}


def check_problems(store: Location) -> list[str]:
    """What ``treestore check`` reports for the store (empty when it is sound)."""
    return list(check_store(store))


def write_second_batch(folder: Path, rows: int, seed: int) -> None:
    """A second attributes file of ``rows`` records and a mapping file of half as many."""
    rng = random.Random(seed)
    uids = max(rows // 4, 1)
    lines = ["TIME\tUID\tATTRIBUTE_IDS"]
    for i in range(rows):
        ids = f"{rng.randrange(50)},{rng.randrange(50)}"
        lines.append(f"{1419441800000 + i}\t{rng.randrange(uids)}\t{ids}")
    (folder / "attributes" / "attributes-0002.tsv").write_text("\n".join(lines) + "\n")
    lines = ["TIME\tUID\tPUID"]
    for i in range(rows // 2):
        lines.append(f"{1419441900000 + i}\t{rng.randrange(uids)}\tp{rng.randrange(1000)}")
    (folder / "mapping" / "mapping-0002.tsv").write_text("\n".join(lines) + "\n")


@dataclass(frozen=True)
class Scenario:
    """Inputs and a job in ``folder``, version 1 in ``first_store``, the expected answers."""

    folder: Path
    first_store: Path
    before: Dump
    reference: Dump

    @property
    def job(self) -> Path:
        """The job file (its sources read the scenario's inputs)."""
        return self.folder / "job.json"

    def fresh_store(self, where: Path) -> Path:
        """A copy of the version-1 store at ``where`` (a folder that does not exist yet)."""
        shutil.copytree(self.first_store, where)
        return where


def prepare_scenario(spark: object, folder: Path, rows: int, seed: int) -> Scenario:
    """Write the demo inputs, load version 1, add the second batch, load the reference."""
    folder.mkdir(parents=True, exist_ok=True)
    write_demo_inputs(folder)
    job = load_job(folder / "job.json")
    first = folder / "stores" / "version-1"
    run_load(spark, job, first)  # type: ignore[arg-type]
    write_second_batch(folder, rows, seed)
    reference = folder / "stores" / "reference"
    run_load(spark, job, reference)  # type: ignore[arg-type]
    return Scenario(folder, first, tree_dump(first), tree_dump(reference))


@dataclass
class CliLoad:
    """A running ``treestore`` command (a load, a follower, a sweep, a gc): its process and
    what it printed so far (with times)."""

    process: subprocess.Popen[str]
    started: float
    out: list[tuple[float, str]] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    _readers: list[threading.Thread] = field(default_factory=list)

    def saw(self, prefix: str) -> bool:
        """Whether a line of its standard output starts with ``prefix``."""
        return any(line.startswith(prefix) for _, line in self.out)

    def kill(self) -> None:
        """SIGKILL its whole process group (driver, JVM, Python workers) and reap it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.wait(60)

    def wait(self, seconds: float) -> int:
        """Wait for it to end and for its output to be read; its exit status."""
        code = self.process.wait(timeout=seconds)
        for reader in self._readers:
            reader.join(timeout=10)
        return code

    def error_lines(self) -> list[str]:
        """Its standard error's non-blank lines."""
        return [line for line in self.err if line.strip()]


def start_cli_load(job: Path, store: Location, env: dict[str, str] | None = None) -> CliLoad:
    """Start ``treestore load JOB --store STORE`` on ``local[2]`` (see :func:`start_cli`)."""
    return start_cli(["load", str(job), "--store", str(store), "--master", "local[2]"], env)


def start_cli(arguments: Sequence[str], env: dict[str, str] | None = None) -> CliLoad:
    """Start ``treestore ARGUMENTS...`` in its own session (so its process group holds its
    JVM and Python workers too), unbuffered, with ``env`` added to this process's."""
    process = subprocess.Popen(
        [sys.executable, "-m", "treestore", *arguments],
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    load = CliLoad(process, time.monotonic())

    def read_out() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            load.out.append((time.monotonic() - load.started, line.rstrip("\n")))

    def read_err() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            load.err.append(line.rstrip("\n"))

    for target in (read_out, read_err):
        reader = threading.Thread(target=target, daemon=True)
        reader.start()
        load._readers.append(reader)
    return load


def failpoint_env(failpoint: str | None, marker: Path) -> dict[str, str]:
    """The variables that stop a command at ``failpoint`` (None: none), which then writes
    its pid to ``marker`` (:mod:`treestore.failpoints`)."""
    if not failpoint:
        return {}
    return {"TREESTORE_FAILPOINT": failpoint, "TREESTORE_FAILPOINT_MARKER": str(marker)}


def marker_written(marker: Path) -> bool:
    """Whether a failpoint wrote its pid to ``marker`` (the command stands there)."""
    return marker.exists() and bool(marker.read_text().strip())


def wait_then_delay(
    command: CliLoad,
    reached: Callable[[], bool],
    delay: float,
    what: str,
    seconds: float,
    poll: float = 0.02,
) -> bool:
    """Wait until ``reached()`` (asked every ``poll`` seconds; at most ``seconds``: a hang
    guard, failing with ``what``), then ``delay`` seconds more; True if the command ended
    on its own first."""
    deadline = time.monotonic() + seconds
    while not reached():
        if command.process.poll() is not None:
            return True
        if time.monotonic() > deadline:
            raise AssertionError(f"the command never reached {what}: {command.err[-5:]}")
        time.sleep(poll)
    end = time.monotonic() + delay
    while time.monotonic() < end:
        if command.process.poll() is not None:
            return True
        time.sleep(min(poll, 0.01))
    return command.process.poll() is not None
