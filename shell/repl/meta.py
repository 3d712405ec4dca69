"""The shell's meta-commands: ``\\name [argument]``, each a function whose docstring is its help.

They are registered by name in :data:`COMMANDS`; ``\\help`` lists them with
the first line of each docstring. A meta-command works on a :class:`MetaSession`:
what a shell session offers it (its settings, its store, a way to print), so this
module never imports the session that runs it.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from query.ops import REGISTRY
from query.ops.compiler import unknown_op_hint
from shell.output.formats import FORMATS
from treestore.errors import OpError

__all__ = [
    "COMMANDS",
    "LINE_HELP",
    "MetaSession",
    "OpSummary",
    "StoreView",
    "op_help",
    "op_summaries",
    "ops_lines",
    "render_doc",
    "run_meta",
]


class StoreView(Protocol):
    """What the shell shows of its open store."""

    @property
    def version(self) -> int:
        """The version the session reads."""
        ...

    @property
    def shards(self) -> int:
        """The store's shard count."""
        ...


class MetaSession(Protocol):
    """What a meta-command (and the toolbar) needs of a shell session."""

    store_dir: str
    format: str
    limit: int
    timing: bool
    done: bool

    @property
    def store(self) -> StoreView:
        """The open store."""
        ...

    def say(self, text: str) -> None:
        """Print a line of output."""

    def note(self, text: str) -> None:
        """Print a message about the session (to stderr in a script)."""

    def fail(self, text: str) -> None:
        """Print an error; the line counts as failed."""

    def info(self) -> None:
        """Print the store's summary."""

    def reload(self) -> None:
        """Open the newest published version of the store."""

    def newest_version(self) -> int:
        """The newest version published in the store (checked every few seconds)."""

    def explain(self, line: str) -> None:
        """Print the plan of the query ``line`` (``PATH [| rops OPS] [| ops OPS]``)."""


LINE_HELP = """\
A line is a path, optionally followed by ops run in each shard's task (rops)
and ops run here on all shards' rows (ops):

    PATH [| rops OPS] [| ops OPS]
    root/+:nodes>1/+/+ | rops str=c1,v=,cat,c2,cat,v2,set;merge=kij | ops merge=ij

A "|" starts a part only after a space and before the word rops or ops. Ops are
name=args;name=args (\\ops lists them). Tab completes node names, path syntax,
properties, op names and op letters; Ctrl-C cancels a running query, Ctrl-R
searches the history, Ctrl-D leaves.

Rows come once per shard, as in Hydra: each shard walks its own tree, so a node
found in several shards (web/by_day/+:+hits, a day in 8 shards) gives a row per
shard. | ops gather=ks merges them (k: key column, s: sum); the shell prints a
hint under the table when rows repeat a key.

Path elements (separated by /):
  name, a,b        the named children, no column      +name, +a,b   the same, shown
  +                every child, name shown             *             every child, hidden
  ++p              names starting with p (shown)       @from,to      from <= name < to
  |re, !re         names the regex matches / not       ..            back up one level
  +{label}         names the column                    (M-N)...      skip M, keep N
  ~...             keep nodes that fail a bound        "any text"    a quoted name
  %name, +%name    an attachment's keys                $+name        an attachment's value
  a;b              flat: one row per parent            -y            trap: parents with y
  :hits>1,nodes=2  bounds on a property                :+hits        the property shown
  :+{h}hits        the property shown, its column named h
Columns are named by the path (name, hits, nodes, an attachment, a {label});
ops that keep columns keep the names."""

Command = Callable[[MetaSession, str], None]
COMMANDS: dict[str, Command] = {}


def command(name: str) -> Callable[[Command], Command]:
    """Register a meta-command under ``name``."""

    def register(function: Command) -> Command:
        COMMANDS[name] = function
        return function

    return register


@command("help")
def help_command(session: MetaSession, argument: str) -> None:
    """Show the line syntax and the meta-commands."""
    session.say(LINE_HELP + "\n\nMeta-commands:")
    shown = set()
    for name, function in COMMANDS.items():
        if function in shown:
            continue  # an alias: its docstring names it
        shown.add(function)
        first = (function.__doc__ or "").strip().splitlines()[0]
        session.say(f"  \\{name:<8} {first}")


@command("ops")
def ops_command(session: MetaSession, argument: str) -> None:
    """List the ops, or show one op's help: \\ops [name]."""
    try:
        lines = ops_lines(argument.strip())
    except OpError as exc:
        session.fail(f"{exc.reason}. {exc.hint}")
        return
    for line in lines:
        session.say(line)


def ops_lines(name: str) -> list[str]:
    """What ``\\ops [name]`` and ``treestore ops [NAME]`` print: the catalogue (no name),
    or the op's help.

    Raises:
        OpError: no op (or alias) is called ``name``; its hint names the closest ones.
    """
    if not name:
        return [
            f"  {op.name:<8} {op.summary}"
            + (f" (also {', '.join(op.aliases)})" if op.aliases else "")
            for op in op_summaries()
        ]
    parts = _op_help_parts(name)
    if parts is None:
        hint = unknown_op_hint(name, "\\ops (or treestore ops) lists them all.")
        raise OpError(f"No op called {name!r}", name, 1, 1, hint=hint)
    return parts


@dataclass(frozen=True)
class OpSummary:
    """One line of the op catalogue: an op's name, its help's first line, its aliases."""

    name: str
    summary: str
    aliases: tuple[str, ...] = ()


def op_summaries() -> list[OpSummary]:
    """The op catalogue as ``\\ops`` lists it: each op once (aliases with it), by name."""
    return [
        OpSummary(name, render_doc(op.__doc__ or "").splitlines()[0], tuple(op.aliases))
        for name, op in sorted(REGISTRY.items())
        if name == op.name  # an alias is listed with its op
    ]


def op_help(name: str) -> str | None:
    """The help ``\\ops NAME`` prints for the op (or alias) ``name``; ``None`` if there is
    no such op. An alias's help starts with a line naming the op's other names."""
    parts = _op_help_parts(name)
    return None if parts is None else "\n".join(parts)


def _op_help_parts(name: str) -> list[str] | None:
    found = REGISTRY.get(name)
    if found is None:
        return None
    parts = [render_doc(found.__doc__ or "")]
    if found.name != name or any(a != name for a in found.aliases):
        others = ", ".join(a for a in (found.name, *found.aliases) if a != name)
        parts.insert(0, f"({name}: also {others})")
    return parts


def render_doc(text: str) -> str:
    """A docstring as the shell prints it: ``code`` and *emphasis* without their reST marks."""
    text = inspect.cleandoc(text)
    text = re.sub(r"``(.+?)``", r"\1", text)
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text)
    return re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"\1", text)


@command("info")
def info_command(session: MetaSession, argument: str) -> None:
    """Show the store: version, shards, nodes, recent loads."""
    session.info()


@command("explain")
def explain_command(session: MetaSession, argument: str) -> None:
    """Show how a query would run, without running it: \\explain PATH [| rops OPS] [| ops OPS].

    Says where it runs (on the driver or in one Spark job) and why, which shards, and
    what runs on columns and what on rows."""
    if not argument.strip():
        session.fail("\\explain takes a query line: \\explain PATH [| rops OPS] [| ops OPS].")
        return
    session.explain(argument.strip())


@command("timing")
def timing_command(session: MetaSession, argument: str) -> None:
    """Turn the row count and time after each query on or off: \\timing [on|off]."""
    word = argument.strip().lower()
    if word not in ("", "on", "off"):
        session.fail("Use \\timing, \\timing on or \\timing off.")
        return
    session.timing = (not session.timing) if not word else word == "on"
    session.note(f"timing is {'on' if session.timing else 'off'}")


@command("format")
def format_command(session: MetaSession, argument: str) -> None:
    """Set how rows print: \\format tsv|csv|json|jsonl|table."""
    word = argument.strip()
    if not word:
        session.note(f"format is {session.format}")
        return
    if word not in FORMATS:
        session.fail(f"Unknown format {word!r}; use one of {', '.join(FORMATS)}.")
        return
    session.format = word
    session.note(f"format is {word}")


@command("limit")
def limit_command(session: MetaSession, argument: str) -> None:
    """Show at most N rows of a query (default 1000; 0: no limit): \\limit N."""
    word = argument.strip()
    if not word:
        session.note(f"limit is {session.limit or 'off'}")
        return
    if not word.isdigit():
        session.fail(f"\\limit takes a whole number, not {word!r}.")
        return
    session.limit = int(word)
    session.note(f"limit is {session.limit or 'off'}")


@command("refresh")
def refresh_command(session: MetaSession, argument: str) -> None:
    """Move to the newest published version of the store (\\reload too).

    A follower or a load publishes new versions; the bottom bar says when one is out."""
    before = session.store.version
    session.reload()
    now = session.store.version
    session.note(f"store version {now}" + (f" (was {before})" if now != before else ""))


COMMANDS["reload"] = refresh_command


@command("q")
def quit_command(session: MetaSession, argument: str) -> None:
    """Leave the shell (Ctrl-D does too)."""
    session.done = True


def run_meta(session: MetaSession, line: str) -> None:
    """Run the meta-command ``line`` (starting with a backslash)."""
    name, _, argument = line.strip()[1:].partition(" ")
    function = COMMANDS.get(name)
    if function is None:
        session.fail(f"Unknown command \\{name}; \\help lists the commands.")
        return
    function(session, argument)
