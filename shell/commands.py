"""The work of each ``treestore`` command, one function each; :mod:`shell.cli` parses and
dispatches. Spark and the loaders are imported inside the commands that need them, so
``treestore --help`` and the store commands start fast.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Mapping
from typing import TextIO

from shell.progress_view import showing_events

__all__ = [
    "command_check",
    "command_follow",
    "command_gc",
    "command_info",
    "command_load",
    "command_query",
    "command_shell",
    "command_sweep",
]


def command_load(
    job_file: str,
    store: str,
    master: str | None,
    out: TextIO,
    max_rejected: int | None = None,
    reprocess_changed: bool = False,
) -> int | None:
    """``treestore load``: returns the published version, or None if nothing was new."""
    from loaders import load_job, run_load
    from loaders.load.options import DEFAULT_MAX_REJECTED
    from loaders.load.report import format_load_report
    from treestore.spark import get_session

    job = load_job(job_file)
    with showing_events(out) as on_event:
        result = run_load(
            get_session(master),
            job,
            store,
            on_event=on_event,
            max_rejected=DEFAULT_MAX_REJECTED if max_rejected is None else max_rejected,
            reprocess_changed=reprocess_changed,
        )
    if result.version is not None:
        for line in format_load_report(result.report, store):
            print(line, file=out)
    return result.version


def command_follow(
    job_file: str,
    store: str,
    master: str | None,
    out: TextIO,
    *,
    trigger: str,
    available_now: bool,
    max_files: int | None,
    max_rejected: int,
) -> int:
    """``treestore load --follow``: load new files as they arrive until Ctrl-C/SIGTERM (the
    first stops after the current micro-batch, a second at once), or with
    ``--available-now`` until every file there now is loaded; then one summary line.
    Returns the exit status: 130 when a micro-batch under way was stopped."""
    from loaders import load_job
    from loaders.follow import follow_job, parse_trigger

    seconds = parse_trigger(trigger)
    job = load_job(job_file)
    stop, stop_now = threading.Event(), threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if stop.is_set():
            stop_now.set()
            return
        stop.set()
        print("stopping after the current micro-batch (Ctrl-C again stops at once)", file=out)

    from treestore.spark import get_session

    spark = get_session(master)
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with showing_events(out) as on_event:
            summary = follow_job(
                spark, job, store, trigger_seconds=seconds, available_now=available_now,
                max_files=max_files, max_rejected=max_rejected, on_event=on_event, stop=stop,
                stop_now=stop_now,
            )  # fmt: skip
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(summary.line(), file=out)
    return 130 if summary.interrupted else 0


def command_query(
    store: str,
    path: str,
    rops: str | None,
    ops: str | None,
    fmt: str,
    master: str | None,
    out: TextIO,
) -> int:
    """``treestore query``: print the rows; returns how many were printed."""
    from query.driver.runner import open_store
    from shell.formats import write_rows
    from treestore.spark import get_session

    handle = open_store(store, session_factory=lambda: get_session(master))
    rows = handle.query(path, rops=rops, ops=ops)
    return write_rows(rows, out, fmt)


def command_shell(store: str, master: str | None, lines: list[str] | None) -> int:
    """``treestore shell``: the interactive loop, or the given lines; returns the exit status."""
    from shell.repl.app import run_shell
    from treestore.spark import get_session

    return run_shell(store, lambda: get_session(master), lines)


def command_info(store: str, out: TextIO) -> None:
    """``treestore info``: versions, shards, nodes and bytes per shard, recent loads."""
    from shell.info import write_info

    write_info(store, out)


def command_sweep(
    events: str,
    intervals: str,
    store: str,
    name: str,
    master: str | None,
    out: TextIO,
    *,
    agg: str,
    closed: str,
    plan: str,
    columns: Mapping[str, str],
    time_format: str | None,
    parquet_out: str | None,
    shards: int,
    input_format: str | None = None,
) -> None:
    """``treestore sweep``: run the interval sweep and keep its results in the store."""
    from loaders.sweep.command import run_sweep
    from treestore.spark import get_session

    with showing_events(out) as on_event:
        run_sweep(
            get_session(master),
            events,
            intervals,
            store,
            name,
            agg=agg,
            closed=closed,
            plan=plan,
            columns=dict(columns),
            time_format=time_format,
            input_format=input_format,
            out=parquet_out,
            shards=shards,
            on_event=on_event,
        )


def command_gc(store: str, keep: int, out: TextIO) -> None:
    """``treestore gc``: drop versions beyond ``keep`` and the files only they used."""
    from treestore.storage.pagestore import page_store_for
    from treestore.store.lock import store_lock
    from treestore.store.maintenance import collect_garbage

    pages = page_store_for(store)
    with store_lock(pages, "treestore gc"):
        removed = collect_garbage(pages, keep)
    print(
        f"removed {removed['versions']} old version(s) and {removed['files']} unused file(s)",
        file=out,
    )


def command_check(store: str, out: TextIO) -> int:
    """``treestore check``: verify every page of every kept version; returns the problem count."""
    from treestore.store.maintenance import check_store

    problems = check_store(store)
    for problem in problems:
        print(problem, file=out)
    print("store is sound" if not problems else f"{len(problems)} problem(s) found", file=out)
    return len(problems)
