"""The work of each ``treestore`` command, one function each; :mod:`shell.cli` parses and
dispatches. Spark and the loaders are imported inside the commands that need them, so
``treestore --help`` and the store commands start fast.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, TextIO

from shell.progress_view import showing_events
from shell.spark_start import SparkStart, started_spark

if TYPE_CHECKING:
    from loaders.follow.options import FollowOptions
    from loaders.load.options import LoadOptions
    from loaders.sweep.options import SweepOptions
    from query.driver.plan import QueryRequest

__all__ = [
    "check_parquet_out",
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
    options: LoadOptions | None = None,
) -> int | None:
    """``treestore load``: returns the published version, or None if nothing was new; a
    field the job reads that no source has fails it before Spark starts (unless
    ``options.lenient``; ``options.strict``: also one that some source lacks)."""
    from loaders import LoadOptions, load_job, run_load
    from loaders.load.inputs import check_job_fields
    from loaders.load.precheck import precheck_load
    from loaders.load.report import format_load_report

    start = SparkStart()
    options = options or LoadOptions()
    job = load_job(job_file)
    with showing_events(out) as on_event:
        check_job_fields(job, on_event, options.strict, options.lenient)  # before Spark starts
        if not precheck_load(job, store, on_event, reprocess_changed=options.reprocess_changed):
            return None  # nothing new: said without starting Spark
    spark = started_spark(master, start=start)
    with showing_events(out) as on_event:
        result = run_load(spark, job, store, on_event=on_event, options=options)
    if result.version is not None:
        lines = format_load_report(result.report, store)
        lines[0] += f" ({start.whole():.1f} s in all, {start.seconds:.1f} s of it starting Spark)"
        for line in lines:
            print(line, file=out)
    return result.version


def command_follow(
    job_file: str, store: str, master: str | None, out: TextIO, options: FollowOptions
) -> int:
    """``treestore load --follow``: load new files as they arrive until Ctrl-C/SIGTERM (the
    first stops after the current micro-batch, a second at once), or with
    ``--available-now`` until every file there now is loaded; then one summary line.
    Returns the exit status: 130 when a micro-batch under way was stopped."""
    from loaders import load_job
    from loaders.follow import check_follow, follow_job

    job = load_job(job_file)
    check_follow(job, store)  # the refusals that need no Spark, before it starts
    stop, stop_now = threading.Event(), threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if stop.is_set():
            stop_now.set()
            return
        stop.set()
        print("stopping after the current micro-batch (Ctrl-C again stops at once)", file=out)

    spark = started_spark(master)
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with showing_events(out) as on_event:
            summary = follow_job(
                spark, job, store, options=options, on_event=on_event, stop=stop,
                stop_now=stop_now,
            )  # fmt: skip
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(summary.line(), file=out)
    return 130 if summary.interrupted else 0


def command_query(
    store: str,
    request: QueryRequest,
    fmt: str,
    master: str | None,
    out: TextIO,
    *,
    header: bool = True,
    explain: bool = False,
    parquet: str | None = None,
    replace: bool = False,
) -> int:
    """``treestore query``: print the rows (after a row of their column names unless not
    ``header``); returns how many were printed. ``explain``: print the query's plan
    instead (as one JSON object with ``fmt`` json or jsonl; nothing runs, no Spark
    starts) and return 0. ``parquet`` (``--out``): write the rows there as Parquet
    instead (see :func:`check_parquet_out`; ``replace``: over what is there) and print
    one line saying how many went where."""
    from query.driver.runner import open_store
    from shell.output.formats import write_rows
    from shell.repl.hints import KeyRepeats

    if parquet is not None:
        check_parquet_out(parquet)
    handle = open_store(store, session_factory=lambda: started_spark(master))
    plan = handle.plan_request(request)
    if explain:
        as_json = fmt in ("json", "jsonl")
        print(json.dumps(plan.to_dict()) if as_json else plan, file=out)
        return 0
    if parquet is not None:
        from query.driver.parquet_out import parquet_target

        target = parquet_target(parquet, overwrite=replace, option="--replace")
        if plan.location is not None:
            target.check_outside(plan.location)  # both before Spark starts
    rows = handle.run(plan)
    if parquet is not None:
        written = rows.to_parquet(parquet, overwrite=replace)
        count = len(written.files)
        parts = f", {count} part file{'' if count == 1 else 's'}" if written.folder else ""
        print(
            f"wrote {written.rows:,} rows to {parquet} ({written.columns} columns{parts})",
            file=out,
        )
        count = written.rows
    else:
        repeats = KeyRepeats()
        named = rows.column_names()
        count = write_rows(repeats.watch(rows), out, fmt, header=header, columns=named)
        hint = repeats.hint()
        if hint is not None:  # as the shell says it, on stderr: the rows stay as they are
            print(f"treestore query: {hint}", file=sys.stderr)
    for warning in rows.warnings():  # an op argument read leniently, a column past a row
        print(f"treestore query: warning: {warning}", file=sys.stderr)
    return count


def check_parquet_out(location: str) -> None:
    """Refuse an ``--out`` that names no Parquet target: it must be a ``.parquet`` file, a
    local folder (one that exists, or a path ending in ``/``) or a URI (a folder of part
    files). Looks at the name alone (and whether a local folder is there)."""
    from treestore.errors import OutputError
    from treestore.filesystems import is_uri

    if (
        is_uri(location)
        or location.lower().endswith(".parquet")
        or location.endswith(("/", os.sep))
        or os.path.isdir(location)
    ):
        return
    raise OutputError(
        f"--out writes Parquet: name a .parquet file, a folder (ending in /) or a folder URI "
        f"(s3://bucket/results/), not {location}. For tsv, csv or json, send the printed rows "
        f"to a file: > {location}"
    )


def command_shell(
    store: str, master: str | None, lines: list[str] | None, *, header: bool = True
) -> int:
    """``treestore shell``: the interactive loop, or the given lines; returns the exit status.
    ``header``: whether rows print after a row of column names."""
    from shell.repl.app import run_shell
    from treestore.spark import get_session

    return run_shell(store, lambda: get_session(master), lines, header=header)


def command_info(store: str, out: TextIO, *, as_json: bool = False) -> None:
    """``treestore info``: versions, shards, nodes and bytes per shard, recent loads;
    ``as_json``: the same facts as one JSON document."""
    from shell.output.info import store_info, write_info
    from treestore.store.versions import open_version

    if as_json:
        print(json.dumps(store_info(open_version(store)).to_json(), indent=1), file=out)
        return
    write_info(store, out)


def command_sweep(
    events: str,
    intervals: str,
    store: str,
    name: str,
    master: str | None,
    out: TextIO,
    options: SweepOptions,
) -> None:
    """``treestore sweep``: run the interval sweep and keep its results in the store; what
    the sweep would refuse is refused before Spark starts."""
    from loaders.load.progress import spark_progress
    from loaders.sweep.command import check_sweep, run_sweep

    check_sweep(events, intervals, store, name, options)
    spark = started_spark(master)
    with showing_events(out) as on_event, spark_progress(spark, on_event, "treestore sweep"):
        run_sweep(
            spark, events, intervals, store, name, options=options,
            on_event=on_event,
        )  # fmt: skip


def command_gc(store: str, keep: int, out: TextIO) -> None:
    """``treestore gc``: drop versions beyond ``keep`` and the files only they used."""
    from treestore.storage.pagestore import page_store_for
    from treestore.store.lock import store_lock
    from treestore.store.maintenance import collect_garbage
    from treestore.store.versions import read_config

    pages = page_store_for(store)
    read_config(pages)  # not a store (or not there): say so, and create nothing
    with store_lock(pages, "treestore gc"):
        removed = collect_garbage(pages, keep)
    print(
        f"removed {removed['versions']} old version(s) and {removed['files']} unused file(s)",
        file=out,
    )


def command_check(store: str, out: TextIO) -> int:
    """``treestore check``: verify what readers read and every byte of every kept version
    against its checksums; one line per problem, then notes; returns the problem count."""
    from treestore.store.maintenance import inspect_store

    report = inspect_store(store)
    for problem in report.problems:
        print(problem, file=out)
    for note in report.notes:
        print(f"note: {note}", file=out)
    problems = report.problems
    print("store is sound" if not problems else f"{len(problems)} problem(s) found", file=out)
    return len(problems)
