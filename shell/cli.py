"""The ``treestore`` command line (``python -m treestore`` is the same): options and dispatch.

The work of each command is in :mod:`shell.commands` (and :mod:`shell.demo`); the
defaults and choices shown here come from the rooms that own them.

Errors that treestore raises on purpose are printed as one message (with a
caret under the offending column where there is one) and exit with status 2;
no traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from loaders.load.options import DEFAULT_MAX_REJECTED
from loaders.sweep import options as sweep_options
from shell import commands
from shell.formats import FORMATS
from treestore.errors import TreestoreError
from treestore.store.versions import DEFAULT_RETENTION

__all__ = ["build_parser", "main"]


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
        default=DEFAULT_MAX_REJECTED,
        metavar="N",
        help="fail (publishing nothing) when more than N records are rejected "
        "(default %(default)s)",
    )
    load.add_argument(
        "--reprocess-changed",
        action="store_true",
        help="read again input files that changed after they were loaded (default: skip them)",
    )
    load.add_argument(
        "--follow",
        action="store_true",
        help="keep loading new files as they arrive (Spark Structured Streaming): each "
        "micro-batch publishes one version; Ctrl-C stops after the current one",
    )
    load.add_argument(
        "--trigger",
        default="10s",
        metavar="INTERVAL",
        help="with --follow: how often to look for new files (default %(default)s)",
    )
    load.add_argument(
        "--max-files-per-trigger",
        type=_whole_number(1),
        metavar="N",
        help="with --follow: at most N new files of each source per micro-batch",
    )
    load.add_argument(
        "--available-now",
        action="store_true",
        help="with --follow: load every file there now (in micro-batches), then stop",
    )
    _add_master(load)

    query = commands.add_parser("query", help="run a path query against a store")
    query.add_argument("store", metavar="DIR", help="the store folder")
    query.add_argument("path", metavar="PATH", help="the query path, e.g. 'root/+:nodes>1/+/+'")
    query.add_argument("--rops", help="ops run on each shard, e.g. 'str=c1,v=,cat;merge=kj'")
    query.add_argument("--ops", help="ops run on the driver over all shards' rows")
    query.add_argument("--format", default=FORMATS[0], choices=FORMATS)
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
        "--agg", default=sweep_options.DEFAULT_AGG, choices=sweep_options.AGGREGATIONS
    )
    sweep.add_argument(
        "--closed", default=sweep_options.DEFAULT_CLOSED, choices=sweep_options.CLOSED
    )
    sweep.add_argument(
        "--plan",
        default=sweep_options.DEFAULT_PLAN,
        choices=sweep_options.PLANS,
        help="broadcast (sum/count: intervals indexed in memory, no shuffle), range "
        "(range-partitioned sweep, every --agg) or auto (default: broadcast when it fits)",
    )
    sweep.add_argument(
        "--format",
        dest="input_format",
        choices=sorted(set(sweep_options.INPUT_FORMATS.values())),
        help="the format of both inputs (default: told by their names)",
    )
    sweep.add_argument("--out", help="also write the results as Parquet here")
    sweep.add_argument(
        "--time-format", help="how string times read, e.g. 'HH:mm' (Spark datetime pattern)"
    )
    for role, default in sweep_options.COLUMNS.items():
        sweep.add_argument(
            f"--{role}-col", default=default, help="column name (default %(default)s)"
        )
    sweep.add_argument(
        "--shards",
        type=_whole_number(1),
        default=sweep_options.DEFAULT_SHARDS,
        help="shards of a new store (default %(default)s)",
    )
    _add_master(sweep)

    info = commands.add_parser("info", help="show a store's versions, shards, nodes and last loads")
    info.add_argument("store", metavar="DIR", help="the store folder")

    gc = commands.add_parser("gc", help="delete old versions and files no kept version uses")
    gc.add_argument("store", metavar="DIR", help="the store folder")
    gc.add_argument(
        "--keep",
        type=_whole_number(1),
        default=DEFAULT_RETENTION,
        help="versions to keep (default %(default)s, at least 1)",
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


def _dispatch(args: argparse.Namespace, out: TextIO) -> int:
    """Run the parsed command; returns the exit status."""
    if args.command == "demo":
        from shell.demo import run_demo

        run_demo(Path(args.workdir), args.master, out)
    elif args.command == "load" and (args.follow or args.available_now):
        return commands.command_follow(
            args.job,
            args.store,
            args.master,
            out,
            trigger=args.trigger,
            available_now=args.available_now,
            max_files=args.max_files_per_trigger,
            max_rejected=args.max_rejected,
        )
    elif args.command == "load":
        commands.command_load(
            args.job,
            args.store,
            args.master,
            out,
            max_rejected=args.max_rejected,
            reprocess_changed=args.reprocess_changed,
        )
    elif args.command == "query":
        commands.command_query(
            args.store, args.path, args.rops, args.ops, args.format, args.master, out
        )
    elif args.command == "shell":
        return commands.command_shell(args.store, args.master, args.execute)
    elif args.command == "sweep":
        commands.command_sweep(
            args.events,
            args.intervals,
            args.store,
            args.name,
            args.master,
            out,
            agg=args.agg,
            closed=args.closed,
            plan=args.plan,
            columns={role: getattr(args, f"{role}_col") for role in sweep_options.COLUMNS},
            time_format=args.time_format,
            input_format=args.input_format,
            parquet_out=args.out,
            shards=args.shards,
        )
    elif args.command == "info":
        commands.command_info(args.store, out)
    elif args.command == "gc":
        commands.command_gc(args.store, args.keep, out)
    elif args.command == "check":
        return 1 if commands.command_check(args.store, out) else 0
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    out = sys.stdout
    try:
        return _dispatch(args, out)
    except TreestoreError as exc:
        out.flush()
        print(f"treestore {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
