"""The ``treestore`` command line (``python -m treestore`` is the same).

Errors that treestore raises on purpose are printed as one message (with a
caret under the offending column where there is one) and exit with status 2;
no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from treestore.errors import TreestoreError

if TYPE_CHECKING:
    from treestore.storage.pagestore import PageStore

__all__ = ["main"]


def _add_master(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--master",
        help="Spark master URL (default: $TREESTORE_SPARK_MASTER, else local[*])",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="treestore",
        description="A keyed-tree store with a path query language, on Apache Spark.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="build the seed-004 join example and query it")
    demo.add_argument(
        "--workdir", default="demo-work", help="folder for the demo's files (default: demo-work)"
    )
    _add_master(demo)

    load = commands.add_parser("load", help="load a job's new input files into a store")
    load.add_argument("job", metavar="JOB_FILE", help="the job file (JSON or TOML)")
    load.add_argument("--store", required=True, metavar="DIR", help="the store folder")
    load.add_argument(
        "--max-rejected",
        type=_whole_number(0),
        default=1000,
        metavar="N",
        help="fail (publishing nothing) when more than N records are rejected (default 1000)",
    )
    load.add_argument(
        "--reprocess-changed",
        action="store_true",
        help="read again input files that changed after they were loaded (default: skip them)",
    )
    _add_master(load)

    query = commands.add_parser("query", help="run a path query against a store")
    query.add_argument("store", metavar="DIR", help="the store folder")
    query.add_argument("path", metavar="PATH", help="the query path, e.g. 'root/+:nodes>1/+/+'")
    query.add_argument("--rops", help="ops run on each shard, e.g. 'str=c1,v=,cat;merge=kj'")
    query.add_argument("--ops", help="ops run on the driver over all shards' rows")
    query.add_argument("--format", default="tsv", choices=("tsv", "csv", "json", "table"))
    _add_master(query)

    shell = commands.add_parser("shell", help="the interactive shell on a store")
    shell.add_argument("store", metavar="DIR", help="the store folder")
    shell.add_argument(
        "-e",
        "--execute",
        action="append",
        metavar="LINE",
        help="run LINE (a query or a \\command) and exit; may be given several times",
    )
    _add_master(shell)

    sweep = commands.add_parser(
        "sweep", help="interval sweep: aggregate the intervals covering each event, into a store"
    )
    sweep.add_argument("--events", required=True, help="events file or folder (id, time, ...)")
    sweep.add_argument(
        "--intervals", required=True, help="intervals file or folder (id, start, end, points)"
    )
    sweep.add_argument(
        "--store", required=True, metavar="DIR", help="the store to keep the results in"
    )
    sweep.add_argument("--name", required=True, help="the results' top node in the store")
    sweep.add_argument(
        "--agg", default="sum", choices=("sum", "count", "set", "list", "min", "max")
    )
    sweep.add_argument("--closed", default="both", choices=("both", "left", "right", "neither"))
    sweep.add_argument(
        "--plan",
        default="auto",
        choices=("auto", "broadcast", "range"),
        help="broadcast (sum/count: intervals indexed in memory, no shuffle), range "
        "(range-partitioned sweep, every --agg) or auto (default: broadcast when it fits)",
    )
    sweep.add_argument("--out", help="also write the results as Parquet here")
    sweep.add_argument(
        "--time-format", help="how string times read, e.g. 'HH:mm' (Spark datetime pattern)"
    )
    for column, default in (
        ("id", "id"),
        ("time", "time"),
        ("start", "start"),
        ("end", "end"),
        ("value", "points"),
    ):
        sweep.add_argument(
            f"--{column}-col", default=default, help=f"column name (default {default})"
        )
    sweep.add_argument(
        "--shards", type=_whole_number(1), default=8, help="shards of a new store (default 8)"
    )
    _add_master(sweep)

    info = commands.add_parser("info", help="show a store's versions, shards, nodes and last loads")
    info.add_argument("store", metavar="DIR", help="the store folder")

    gc = commands.add_parser("gc", help="delete old versions and files no kept version uses")
    gc.add_argument("store", metavar="DIR", help="the store folder")
    gc.add_argument(
        "--keep", type=_whole_number(1), default=5, help="versions to keep (default 5, at least 1)"
    )

    check = commands.add_parser("check", help="verify every page of a store (exit 1 if damaged)")
    check.add_argument("store", metavar="DIR", help="the store folder")
    return parser


def _whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``minimum`` (argparse's error names the option)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}")
        return value

    return parse


def command_load(
    job_file: str,
    store: str,
    master: str | None,
    out: TextIO,
    max_rejected: int = 1000,
    reprocess_changed: bool = False,
) -> int | None:
    """``treestore load``: returns the published version, or None if nothing was new."""
    from loaders import load_job, run_load
    from loaders.load.report import format_load_report
    from treestore.spark import get_session

    job = load_job(job_file)
    result = run_load(
        get_session(master),
        job,
        store,
        log=lambda line: print(line, file=out),
        max_rejected=max_rejected,
        reprocess_changed=reprocess_changed,
    )
    if result.version is not None:
        for line in format_load_report(result.report, store):
            print(line, file=out)
    return result.version


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


def command_info(store: str, out: TextIO) -> None:
    """``treestore info``: versions, shards, nodes and bytes per shard, recent loads."""
    from treestore.store.versions import open_version, published_versions

    version = open_version(store)
    manifest = version.manifest
    kept = published_versions(version.pages)
    states = manifest.trees
    print(f"store {version.location}", file=out)
    print(
        f"version {manifest.version} (kept: {', '.join(map(str, kept)) or 'none'}), "
        f"{manifest.shards} shards, {sum(s.nodes for s in states.values()):,} nodes, "
        f"{sum(s.bytes for s in states.values()):,} bytes of pages, "
        f"{len(manifest.inputs)} input files loaded",
        file=out,
    )
    for shard in range(manifest.shards):
        state = states.get(shard)
        if state is None:
            print(f"  shard {shard}: empty", file=out)
        else:
            waiting = (
                f", {state.pending_records:,} pending update-only record(s) waiting"
                if state.pending
                else ""
            )
            print(
                f"  shard {shard}: {state.nodes:,} nodes, {state.bytes:,} bytes, "
                f"{len(state.runs)} run(s){waiting}",
                file=out,
            )
    _print_dedup_index(version.pages, manifest.version, out)
    for load in manifest.loads[-5:]:
        sources = json.dumps(load["sources"], sort_keys=True)
        print(
            f"  load -> version {load['version']} at {load['started']} "
            f"({load['seconds']} s): {sources}",
            file=out,
        )


def _print_dedup_index(pages: PageStore, version: int, out: TextIO) -> None:
    """The dedup index's sources, runs and the version it covers, for ``treestore info``."""
    from treestore.errors import StoreError
    from treestore.store.dedup_index import read_dedup_manifest

    try:
        index = read_dedup_manifest(pages)
    except StoreError as exc:
        print(f"dedup index: {exc} The next load rebuilds it.", file=out)
        return
    if index is None:
        return
    behind = "" if index.covers == version else " (behind: the next load catches it up)"
    print(f"dedup index covers version {index.covers}{behind}", file=out)
    for name in sorted(index.sources):
        runs = index.runs(name)
        print(
            f"  source {name} (keys {', '.join(index.keys(name) or ())}): "
            f"{sum(len(r) for r in runs.values())} run(s) in {len(runs)} shard(s)",
            file=out,
        )


def command_sweep(args: argparse.Namespace, out: TextIO) -> None:
    """``treestore sweep``: run the interval sweep and keep its results in the store."""
    from loaders.sweep.command import run_sweep
    from treestore.spark import get_session

    columns = {c: getattr(args, f"{c}_col") for c in ("id", "time", "start", "end", "value")}
    run_sweep(
        get_session(args.master),
        args.events,
        args.intervals,
        args.store,
        args.name,
        agg=args.agg,
        closed=args.closed,
        plan=args.plan,
        columns=columns,
        time_format=args.time_format,
        out=args.out,
        shards=args.shards,
        log=lambda line: print(line, file=out),
    )


def command_gc(store: str, keep: int, out: TextIO) -> None:
    """``treestore gc``: drop versions beyond ``keep`` and the files only they used."""
    from treestore.storage.pagestore import page_store_for
    from treestore.store.versions import collect_garbage, store_lock

    pages = page_store_for(store)
    with store_lock(pages, "treestore gc"):
        removed = collect_garbage(pages, keep)
    print(
        f"removed {removed['versions']} old version(s) and {removed['files']} unused file(s)",
        file=out,
    )


def command_check(store: str, out: TextIO) -> int:
    """``treestore check``: verify every page of every kept version; returns the problem count."""
    from treestore.store.versions import check_store

    problems = check_store(store)
    for problem in problems:
        print(problem, file=out)
    print("store is sound" if not problems else f"{len(problems)} problem(s) found", file=out)
    return len(problems)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    out = sys.stdout
    try:
        if args.command == "demo":
            from shell.demo import run_demo

            run_demo(Path(args.workdir), args.master, out)
        elif args.command == "load":
            command_load(
                args.job,
                args.store,
                args.master,
                out,
                max_rejected=args.max_rejected,
                reprocess_changed=args.reprocess_changed,
            )
        elif args.command == "query":
            command_query(args.store, args.path, args.rops, args.ops, args.format, args.master, out)
        elif args.command == "shell":
            from shell.repl.app import run_shell
            from treestore.spark import get_session

            return run_shell(args.store, lambda: get_session(args.master), args.execute)
        elif args.command == "sweep":
            command_sweep(args, out)
        elif args.command == "info":
            command_info(args.store, out)
        elif args.command == "gc":
            command_gc(args.store, args.keep, out)
        elif args.command == "check":
            return 1 if command_check(args.store, out) else 0
    except TreestoreError as exc:
        out.flush()
        print(f"treestore {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
