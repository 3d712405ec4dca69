"""The ``treestore`` command line (``python -m treestore`` is the same): options and dispatch.

The work of each command is in :mod:`shell.commands` (and :mod:`shell.demo`); the
defaults and choices shown here come from the rooms that own them.

Errors that treestore raises on purpose are printed as one message (with a
caret under the offending column where there is one) and exit with status 2;
no traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from treestore.errors import TreestoreError
from treestore.spark import VERBOSE_ENV, note_interrupts, verbose, was_interrupted

__all__ = ["build_parser", "main"]


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' line breaks; adds ``(default: X)`` to an option's help when it
    has a default and its help does not already say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        # a flag's default is its absence: "--no-header (default: True)" reads backwards
        flag = isinstance(action.default, bool)
        shown = not flag and action.default not in (None, argparse.SUPPRESS)
        if shown and "default" not in text and action.option_strings:
            text += " (default: %(default)s)"
        return text


def _command(
    commands: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    summary: str,
    description: str,
    examples: Sequence[str],
) -> argparse.ArgumentParser:
    """A subcommand's parser: its one-line summary (in ``treestore --help``), its
    description and examples (in ``treestore NAME --help``)."""
    sub: argparse.ArgumentParser = commands.add_parser(
        name,
        help=summary,
        description=description,
        epilog="examples:\n" + "\n".join(f"  {line}" for line in examples),
        formatter_class=_Formatter,
    )
    sub.set_defaults(command_parser=sub)
    return sub


def _version() -> str:
    """The installed package's version (the source's own when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("treestore-spark")  # the distribution (the command is treestore)
    except PackageNotFoundError:
        from treestore import __version__

        return __version__


def _add_master(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--master",
        help="Spark master URL (default: $TREESTORE_SPARK_MASTER, else local[*])",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show the JVM's and Spark's own messages on stderr (default: hidden; "
        "or set TREESTORE_VERBOSE=1)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    # imported here, not at the top: a Ctrl-C while they load is main's to answer
    from loaders.follow.options import DEFAULT_TRIGGER
    from loaders.load.options import DEFAULT_MAX_REJECTED
    from loaders.sweep import options as sweep_options
    from shell.output.formats import FORMATS
    from treestore.store.versions import DEFAULT_RETENTION

    parser = argparse.ArgumentParser(
        prog="treestore",
        description="A keyed-tree store with a path query language, on Apache Spark.",
        epilog="examples:\n  treestore demo\n  treestore load job.json --store store\n"
        "  treestore query store 'root/+:+hits'\n"
        "run 'treestore COMMAND --help' for a command's options and examples.",
        formatter_class=_Formatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"treestore {_version()}", help="show the version"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = _command(
        commands,
        "demo",
        "build the seed-004 join example and query it",
        "Write the two tables of Hydra's join example and a job file, load them into a "
        "store and query it,\nshowing each command it runs.",
        ["treestore demo", "treestore demo --workdir /tmp/demo --force"],
    )
    demo.add_argument("--workdir", default="demo-work", help="folder for the demo's files")
    demo.add_argument(
        "--force", action="store_true", help="rebuild an earlier demo folder that changed since"
    )
    _add_master(demo)

    load = _command(
        commands,
        "load",
        "load a job's new input files into a store",
        "Read the job's input files that are new to the store, fold them into the shards' "
        "trees and publish\none new version (a new store is created). Nothing new: nothing "
        "is published.",
        [
            "treestore load job.json --store store",
            "treestore load job.toml --store s3://bucket/store --master spark://host:7077",
            "treestore load job.json --store store --follow --trigger 30s",
        ],
    )
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
    fields = load.add_mutually_exclusive_group()
    fields.add_argument(
        "--strict",
        action="store_true",
        help="fail also when a field the job reads is missing from some of its sources "
        "(a field in no source always fails the load, unless --lenient)",
    )
    fields.add_argument(
        "--lenient",
        action="store_true",
        help="load even when the job reads a field no source has (a warning; the field "
        "reads as missing)",
    )
    load.add_argument(
        "--follow",
        action="store_true",
        help="keep loading new files as they arrive (Spark Structured Streaming): each "
        "micro-batch publishes one version; Ctrl-C stops after the current one",
    )
    load.add_argument(
        "--trigger",
        default=DEFAULT_TRIGGER,
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

    query = _command(
        commands,
        "query",
        "run a path query against a store",
        "Run PATH on every shard of the store's newest version (rops in each shard's task, "
        "ops on the\ndriver over all the rows) and print the rows.",
        [
            "treestore query store 'root/+:+hits' --format table",
            "treestore query store 'root/+:nodes>1/+/+' --rops 'str=c1,v=,cat,c2,cat,v2,set;"
            "merge=kij'",
            "treestore query store 'root/+/+' --ops 'merge=ki' --out results.parquet",
        ],
    )
    query.add_argument("store", metavar="DIR", help="the store folder")
    query.add_argument("path", metavar="PATH", help="the query path, e.g. 'root/+:nodes>1/+/+'")
    query.add_argument("--rops", help="ops run on each shard, e.g. 'str=c1,v=,cat;merge=kj'")
    query.add_argument("--ops", help="ops run on the driver over all shards' rows")
    query.add_argument(
        "--format", default=FORMATS[0], choices=FORMATS, help="how the rows are printed"
    )
    query.add_argument(
        "--no-header",
        dest="header",
        action="store_false",
        help="no row of column names first (tsv, csv, table); json rows as arrays",
    )
    query.add_argument(
        "--out",
        metavar="FILE",
        help="write the rows as Parquet instead of printing them: a .parquet file, else a "
        "folder of part files (an existing folder, a path ending in /, or a URI such as "
        "s3://bucket/results/); what is there needs --replace",
    )
    query.add_argument(
        "--replace", action="store_true", help="with --out: replace the file or part files there"
    )
    query.add_argument(
        "--explain",
        action="store_true",
        help="print how the query would run (on the driver or in Spark, which shards, what "
        "runs on columns or rows, and why) instead of its rows; starts no Spark",
    )
    _add_master(query)

    shell = _command(
        commands,
        "shell",
        "the interactive shell on a store",
        "Start Spark once and query the store line by line (PATH [| rops OPS] [| ops OPS]); "
        "\\help inside\nlists the meta-commands. Without a terminal, or with -e, the lines "
        "run in order and print tsv.",
        [
            "treestore shell store",
            "treestore shell store -e 'root/+:+hits' -e '\\format json' -e 'root/+:+nodes'",
            "printf 'root/+:+hits\\n' | treestore shell store",
        ],
    )
    shell.add_argument("store", metavar="DIR", help="the store folder")
    shell.add_argument(
        "--no-header",
        dest="header",
        action="store_false",
        help="no row of column names first (tsv, csv, table); json rows as arrays",
    )
    shell.add_argument(
        "-e",
        "--execute",
        action="append",
        metavar="LINE",
        help="run LINE (a query or a \\command) and exit; may be given several times",
    )
    _add_master(shell)

    sweep = _command(
        commands,
        "sweep",
        "interval sweep: aggregate the intervals covering each event, into a store",
        "For each event (id, time), aggregate the points of the intervals (id, start, end, "
        "points) with\nthe same id that cover its time, without a join; keep the results in "
        "the store under NAME.",
        [
            "treestore sweep --events events.csv --intervals intervals.csv --store s --name one",
            "treestore sweep --events ev/ --intervals iv/ --store s --name two --agg set "
            "--closed left",
            "treestore sweep --events a/ --intervals b/ --store s --name t "
            "--time-format H:mm --out t.parquet",
        ],
    )
    sweep.add_argument("--events", required=True, help="events file or folder (id, time, ...)")
    sweep.add_argument(
        "--intervals", required=True, help="intervals file or folder (id, start, end, points)"
    )
    sweep.add_argument(
        "--store", required=True, metavar="DIR", help="the store to keep the results in"
    )
    sweep.add_argument(
        "--name", required=True, help="the results' top node in the store (required)"
    )
    sweep.add_argument(
        "--agg",
        default=sweep_options.DEFAULT_AGG,
        choices=sweep_options.AGGREGATIONS,
        help="how the covering intervals' points are aggregated",
    )
    sweep.add_argument(
        "--closed",
        default=sweep_options.DEFAULT_CLOSED,
        choices=sweep_options.CLOSED,
        help="which ends of [start, end] an interval includes",
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
    sweep.add_argument(
        "--out",
        help="also write the results as Parquet here: a .parquet file, else a folder of "
        "part files (an existing one needs --replace)",
    )
    sweep.add_argument(
        "--replace", action="store_true", help="replace the results already at --out"
    )
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

    info = _command(
        commands,
        "info",
        "show a store's versions, shards, nodes and last loads",
        "Show the store's published versions, its shards with their nodes and bytes, and "
        "its recent loads.\nNeeds no Spark.",
        ["treestore info store", "treestore info s3://bucket/stores/clicks --json"],
    )
    info.add_argument("store", metavar="DIR", help="the store folder")
    info.add_argument(
        "--json",
        action="store_true",
        help="print the same facts as one JSON document (what the service's /stores/NAME gives)",
    )

    gc = _command(
        commands,
        "gc",
        "delete old versions and files no kept version uses",
        "Delete the versions beyond the newest --keep ones and the files only they used "
        "(under the store's\nlock). Needs no Spark.",
        ["treestore gc store", "treestore gc store --keep 1"],
    )
    gc.add_argument("store", metavar="DIR", help="the store folder")
    gc.add_argument(
        "--keep",
        type=_whole_number(1),
        default=DEFAULT_RETENTION,
        help="versions to keep (default %(default)s, at least 1)",
    )

    check = _command(
        commands,
        "check",
        "verify a store: what readers read, and every byte (exit 1 if damaged)",
        "Verify a store without Spark. First what readers read: store.json, CURRENT and each\n"
        "published version's manifest. Then every byte: each run, side file and dedup index\n"
        "file of those versions against the sizes and checksums its manifest records.\n\n"
        "Prints one line per problem, naming the file, then notes (files written before\n"
        "treestore kept checksums, a manifest a load left unpublished).\n"
        "Exit status 1 if anything is damaged.",
        ["treestore check store", "treestore check store && echo sound"],
    )
    check.add_argument("store", metavar="DIR", help="the store folder")
    ops = _command(
        commands,
        "ops",
        "list the ops, or show one op's help (as the shell's \\ops)",
        "Without NAME: every op (for --rops and --ops) with its help's first line.\n"
        "With NAME: that op's whole help, its arguments and examples. Needs no Spark.",
        ["treestore ops", "treestore ops gather"],
    )
    ops.add_argument("name", metavar="NAME", nargs="?", help="an op's name (or alias)")
    _serve_parser(commands)
    return parser


def _serve_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from shell.serve.options import ServeOptions

    defaults = ServeOptions()
    serve = _command(
        commands,
        "serve",
        "serve stores over HTTP: the query API and a page to browse and query them",
        "Keep one SparkSession warm and answer path queries over HTTP (GET/POST /query, "
        "streamed as json,\njsonl, csv, tsv or Arrow), browse calls and a page at /; "
        "read-only. Ctrl-C or SIGTERM stops it.\nSee docs/serve.md for the API.",
        [
            "treestore serve demo-work/store",
            "treestore serve a=s3://bucket/a b=/data/b --port 9000 --master spark://host:7077",
            "treestore serve store --host 0.0.0.0 --token-file token.txt",
        ],
    )
    serve.add_argument(
        "stores", nargs="+", metavar="STORE",
        help="a store folder or URI (named by its last part), or NAME=STORE",
    )  # fmt: skip
    serve.add_argument(
        "--name", action="append", default=[], metavar="NAME=STORE",
        help="serve STORE under NAME (may be given several times)",
    )  # fmt: skip
    serve.add_argument("--host", default=defaults.host, help="the address to listen on")
    serve.add_argument("--port", type=_whole_number(0), default=defaults.port, help="the port")
    auth = serve.add_mutually_exclusive_group()
    auth.add_argument(
        "--token-file", metavar="FILE",
        help="every API call must carry 'Authorization: Bearer TOKEN', TOKEN this file's "
        "first line (needed to listen on an address other than loopback)",
    )  # fmt: skip
    auth.add_argument(
        "--no-auth", action="store_true",
        help="listen on an address other than loopback without a token, on purpose",
    )  # fmt: skip
    serve.add_argument(
        "--max-concurrent", type=_whole_number(1), default=defaults.max_concurrent,
        metavar="N", help="queries running at once; more wait in a short queue, then 503",
    )  # fmt: skip
    serve.add_argument(
        "--max-timeout", type=float, default=defaults.max_timeout, metavar="S",
        help="the longest timeout a query may ask for, in seconds",
    )  # fmt: skip
    serve.add_argument(
        "--cache-mb", type=_whole_number(0), default=defaults.cache_mb, metavar="M",
        help="the result cache's size in MiB (0: no cache)",
    )  # fmt: skip
    serve.add_argument(
        "--cors", metavar="ORIGIN", help="let pages from ORIGIN call the API (default: none)"
    )
    _add_master(serve)


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
    from loaders.sweep import options as sweep_options
    from shell import commands

    if args.command == "demo":
        from shell.demo import run_demo

        run_demo(Path(args.workdir), args.master, out, force=args.force)
    elif args.command == "load" and (args.follow or args.available_now):
        from loaders.follow.options import FollowOptions, parse_trigger

        following = FollowOptions(
            trigger_seconds=parse_trigger(args.trigger),
            available_now=args.available_now,
            max_files=args.max_files_per_trigger,
            max_rejected=args.max_rejected,
        )
        return commands.command_follow(args.job, args.store, args.master, out, following)
    elif args.command == "load":
        from loaders.load.options import LoadOptions

        loading = LoadOptions(
            max_rejected=args.max_rejected,
            reprocess_changed=args.reprocess_changed,
            strict=args.strict,
            lenient=args.lenient,
        )
        commands.command_load(args.job, args.store, args.master, out, loading)
    elif args.command == "query":
        from query.driver.plan import QueryRequest

        request = QueryRequest(args.path, args.rops, args.ops)
        commands.command_query(
            args.store, request, args.format, args.master, out,
            header=args.header, explain=args.explain, parquet=args.out, replace=args.replace,
        )  # fmt: skip
    elif args.command == "ops":
        from shell.repl.meta import ops_lines

        for line in ops_lines(args.name or ""):
            print(line, file=out)
    elif args.command == "shell":
        return commands.command_shell(args.store, args.master, args.execute, header=args.header)
    elif args.command == "sweep":
        sweeping = sweep_options.SweepOptions(
            agg=args.agg,
            closed=args.closed,
            plan=args.plan,
            columns={role: getattr(args, f"{role}_col") for role in sweep_options.COLUMNS},
            time_format=args.time_format,
            input_format=args.input_format,
            out=args.out,
            replace=args.replace,
            shards=args.shards,
        )
        commands.command_sweep(
            args.events, args.intervals, args.store, args.name, args.master, out, sweeping
        )
    elif args.command == "info":
        commands.command_info(args.store, out, as_json=args.json)
    elif args.command == "gc":
        commands.command_gc(args.store, args.keep, out)
    elif args.command == "check":
        return 1 if commands.command_check(args.store, out) else 0
    elif args.command == "serve":
        return _serve(args, out)
    return 0


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    from shell.serve.command import named_stores, read_token, run_serve
    from shell.serve.options import ServeOptions

    options = ServeOptions(
        stores=named_stores(args.stores, args.name),
        host=args.host,
        port=args.port,
        master=args.master,
        token=read_token(args.token_file) if args.token_file else None,
        no_auth=args.no_auth,
        max_concurrent=args.max_concurrent,
        max_timeout=args.max_timeout,
        cache_mb=args.cache_mb,
        cors=args.cors,
    )
    return run_serve(options, out)


def _interrupted() -> int:
    """Ctrl-C: one line, exit status 130 (a second Ctrl-C meanwhile is ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    print("interrupted", file=sys.stderr)
    return 130


def _quiet_libraries() -> None:
    """Keep py4j's and PySpark's log records (a Ctrl-C during a JVM call logs a
    traceback on the root logger) off the terminal, unless ``--verbose``."""
    root = logging.getLogger()
    if not verbose() and not any(isinstance(h, logging.NullHandler) for h in root.handlers):
        root.addHandler(logging.NullHandler())
    if not verbose():
        for name in ("py4j", "pyspark"):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (130 after Ctrl-C, at any moment)."""
    try:
        note_interrupts(fresh=True)
        parser = build_parser()
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # the subcommand's usage, not the top level's
            getattr(args, "command_parser", parser).error(
                f"unrecognized arguments: {' '.join(unknown)}"
            )
        if getattr(args, "verbose", False):
            os.environ[VERBOSE_ENV] = "1"
        _quiet_libraries()
        out = sys.stdout
        try:
            return _dispatch(args, out)
        except TreestoreError as exc:
            if was_interrupted():
                return _interrupted()
            out.flush()
            print(f"treestore {args.command}: {exc}", file=sys.stderr)
            return 2
        except BrokenPipeError:
            return 0
        except Exception:
            if was_interrupted():  # a Spark call cut short by Ctrl-C
                return _interrupted()
            raise
    except KeyboardInterrupt:
        return _interrupted()


if __name__ == "__main__":
    raise SystemExit(main())
