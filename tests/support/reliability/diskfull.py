"""Disk full: a load whose store lies on a filesystem that fills up.

The store (version 1) is copied onto a small filesystem beside a ballast file, so the
second batch's runs do not fit. The filesystem is a real tmpfs where this process may
mount one (root), else the ENOSPC wrapper of :mod:`treestore.faults` (a folder whose
files fail to grow past a capacity; set for the load's subprocess, so its Spark tasks
see it too). The trial records whether the load failed with one line naming the cause
and the file, whether the previous version stayed exact, whether the failed load left
no partial files, and whether a load after freeing space (the ballast removed) succeeds
with exactly the answer of a load that never ran out of space.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from loaders import load_job, run_load
from tests.support.reliability.scenario import (
    Scenario,
    start_cli_load,
    store_files,
    store_version,
    tree_dump,
)
from treestore.errors import TreestoreError
from treestore.faults import DISK_BYTES_VARIABLE, DISK_FOLDER_VARIABLE

CAPACITY = 1536 * 1024
"""The small filesystem's size: the version-1 store (8 KB) and the ballast fit."""
BALLAST = 1024 * 1024
"""What fills it: the second batch's runs (about 660 KB) do not fit beside it, and do
once it is removed (even if the failed load's files were left)."""
SECOND_BATCH_ROWS = 5_000
WAIT_SECONDS = 300.0
NO_SPACE = "No space left on device"


@dataclass(frozen=True)
class DiskFullOutcome:
    """One disk-full trial's findings (``message``: what the failed load said)."""

    filesystem: str
    message: list[str]
    one_line_with_cause_and_file: bool
    previous_exact: bool
    partial_files: list[str]
    next_load_exact: bool
    detail: str = ""

    @property
    def clean(self) -> bool:
        """Whether every expectation held."""
        return (
            self.one_line_with_cause_and_file
            and self.previous_exact
            and not self.partial_files
            and self.next_load_exact
        )


def tmpfs_available(folder: Path) -> bool:
    """Whether this process can mount a tmpfs (tried at ``folder``, unmounted again)."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with small_filesystem(folder, "tmpfs", 64 * 1024):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def small_filesystem(folder: Path, kind: str, capacity: int) -> Iterator[dict[str, str]]:
    """Make ``folder`` a filesystem of ``capacity`` bytes: a tmpfs mounted there (``kind``
    ``tmpfs``; OSError if it cannot be mounted), or the ENOSPC wrapper (``wrapper``).
    Yields the environment a load's process needs to see it (empty for a tmpfs)."""
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "wrapper":
        yield {DISK_FOLDER_VARIABLE: str(folder), DISK_BYTES_VARIABLE: str(capacity)}
        return
    command = ["mount", "-t", "tmpfs", "-o", f"size={capacity // 1024}k", "tmpfs", str(folder)]
    try:
        mounted = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except FileNotFoundError as exc:
        raise OSError("no mount command") from exc
    if mounted.returncode != 0:
        raise OSError(mounted.stderr.strip() or "mount failed")
    try:
        yield {}
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True, timeout=60, check=False)


def disk_full_trial(
    spark: object, scenario: Scenario, folder: Path, kind: str, via_cli: bool
) -> DiskFullOutcome:
    """Run the trial on a ``kind`` filesystem (``tmpfs`` or ``wrapper``). ``via_cli``: both
    loads run as ``treestore load`` subprocesses (what a user sees); else in this process
    (faster; the wrapper needs the subprocess for its failing load, so it always has one)."""
    disk = folder / "disk"
    with small_filesystem(disk, kind, CAPACITY) as env:
        store = scenario.fresh_store(disk / "store")
        (disk / "ballast").write_bytes(b"\0" * BALLAST)
        files_before = store_files(store)
        if via_cli or kind == "wrapper":
            message = _failing_cli_load(scenario, store, env)
        else:
            message = _failing_load_here(spark, scenario, store)
        shown = "\n".join(message)
        one_line = len(message) == 1 and NO_SPACE in shown and str(disk / "store") in shown
        previous_exact = store_version(store) == 1 and tree_dump(store) == scenario.before
        partial = sorted(
            name for name in store_files(store) - files_before if not name.startswith("locks/")
        )
        (disk / "ballast").unlink()
        next_exact, detail = _next_load(spark, scenario, store, env, via_cli)
    name = "tmpfs (mounted)" if kind == "tmpfs" else "ENOSPC wrapper (treestore.faults)"
    return DiskFullOutcome(name, message, one_line, previous_exact, partial, next_exact, detail)


def _failing_cli_load(scenario: Scenario, store: Path, env: dict[str, str]) -> list[str]:
    """Its standard error (non-blank lines), or a note if it did not fail as it should."""
    load = start_cli_load(scenario.job, store, env)
    try:
        code = load.wait(WAIT_SECONDS)
    finally:
        load.kill()
    if code != 2:
        return [f"(exit status {code}, expected 2)", *load.error_lines()]
    return load.error_lines()


def _failing_load_here(spark: object, scenario: Scenario, store: Path) -> list[str]:
    """The error message as the command line would print it, or a note."""
    try:
        run_load(spark, load_job(scenario.job), store)  # type: ignore[arg-type]
    except TreestoreError as exc:
        return f"treestore load: {exc}".splitlines()
    except Exception as exc:  # not the project's own error: recorded as a failure
        return [f"(not a TreestoreError) {type(exc).__name__}: {exc}"]
    return ["(the load succeeded on a full disk)"]


def _next_load(
    spark: object, scenario: Scenario, store: Path, env: dict[str, str], via_cli: bool
) -> tuple[bool, str]:
    """After freeing space, load again: it must publish version 2, exactly the reference."""
    if via_cli:
        load = start_cli_load(scenario.job, store, env)
        try:
            code = load.wait(WAIT_SECONDS)
        finally:
            load.kill()
        if code != 0:
            return False, f"the next load failed ({code}): {load.error_lines()[-3:]}"
    else:
        try:
            run_load(spark, load_job(scenario.job), store)  # type: ignore[arg-type]
        except Exception as exc:  # recorded: the trial reports it
            return False, f"the next load failed: {type(exc).__name__}: {exc}"
    if store_version(store) != 2 or tree_dump(store) != scenario.reference:
        return False, "the next load's answer differs from the reference"
    return True, ""
