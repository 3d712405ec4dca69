"""The completion engine: text before the cursor in, suggestions out (no terminal).

It knows where the cursor is in a shell line (:mod:`shell.repl.line`): a
meta-command, a path element (node names from the store, ``+``/``*``, property
names after ``:``), the ``| rops``/``| ops`` keywords, an op name, or an op's
argument letters and words. Node names come from a lookup function, so the
engine stays pure and testable with plain strings; :class:`NodeNames` is the lookup
that reads them from a store. The shell's completer and the service's ``/complete``
both call :func:`complete`.

>>> names = lambda parent, prefix: [n for n in ["12345", "67890"] if n.startswith(prefix)]
>>> [s.text for s in complete("root/+:nodes>1/1", names)]
['12345']
>>> [s.text for s in complete("root/+ | rops mer", names)]
['merge=']
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from query.ops import REGISTRY
from query.syntax.ast import quote_name
from query.syntax.path_parser import parse_path
from query.walk.names import child_names
from shell.output.formats import FORMATS
from shell.repl.line import PART_SEPARATOR
from shell.repl.meta import COMMANDS
from treestore.errors import TreestoreError
from treestore.store.versions import StoreVersion

__all__ = ["NamesLookup", "NodeNames", "Suggestion", "complete"]

NamesLookup = Callable[[str | None, str], list[str]]
"""(parent path text, or None at the top; name prefix) -> node names."""

_ELEMENT_SYNTAX = re.compile(
    r"^(?:\(\d*(?:-\d*)?\)?)?~?[|!]?\+?(?:\[[^\]]*\]?)?(?:\{[^}]*\}?)?[+@]?"
)
"""What may precede an element's names: (limits), ~, |/!, +, [default], {label}, + or @."""

PROPERTIES = (("hits", "visits of the node"), ("nodes", "children of the node"))


@dataclass(frozen=True)
class Suggestion:
    """One completion: ``text`` replaces the ``-start`` characters before the cursor."""

    text: str
    start: int = 0
    meta: str = ""


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc else ""


def complete(before: str, names: NamesLookup) -> list[Suggestion]:
    """The suggestions for a cursor placed after ``before``."""
    stripped = before.lstrip()
    if stripped.startswith("\\"):
        return _meta(stripped)
    parts = list(PART_SEPARATOR.finditer(before))
    if parts and (parts[-1].end() < len(before) or before[-1].isspace()):
        return _ops(before[parts[-1].end() :])
    keyword = re.search(r"\s\|\s*(\w*)$", before)
    if keyword:
        word = keyword.group(1)
        return [
            Suggestion(k, -len(word), meta)
            for k, meta in (("rops", "ops run in each shard's task"), ("ops", "ops run here"))
            if k.startswith(word)
        ]
    return _path(before, names)


def _meta(text: str) -> list[Suggestion]:
    command, _, argument = text.partition(" ")
    if not _:
        return [
            Suggestion(f"\\{name}", -len(command), _first_line(function.__doc__))
            for name, function in COMMANDS.items()
            if f"\\{name}".startswith(command)
        ]
    if command == "\\ops":
        return _op_names(argument.strip(), suffix="")
    if command == "\\format":
        word = argument.strip()
        return [Suggestion(f, -len(word)) for f in FORMATS if f.startswith(word)]
    return []


def _op_names(word: str, suffix: str = "=") -> list[Suggestion]:
    return [
        Suggestion(name + suffix, -len(word), _first_line(op.__doc__))
        for name, op in sorted(REGISTRY.items(), key=lambda item: item[0] + suffix)
        if name.startswith(word)
    ]


def _ops(text: str) -> list[Suggestion]:
    chunk = re.split(r"(?<!\\);", text)[-1]
    name, equals, arguments = chunk.partition("=")
    if not equals:
        return _op_names(name.strip())
    op = REGISTRY.get(name.strip())
    if op is None or not op.arguments:
        return []
    if op.separator:
        word = arguments.split(op.separator)[-1]
        return [
            Suggestion(token, -len(word), meaning)
            for token, meaning in op.arguments
            if token.startswith(word) and token != word
        ]
    return [Suggestion(token, 0, meaning) for token, meaning in op.arguments]


def _path(text: str, names: NamesLookup) -> list[Suggestion]:
    parent, slash, element = text.rpartition("/")
    parent_text = parent if slash else None
    if ":" in element:
        word = re.split(r"[:,]", element)[-1]
        shown = word.startswith("+")
        bare = word[1:] if shown else word
        return [
            Suggestion(("+" if shown else "") + name, -len(word), meaning)
            for name, meaning in PROPERTIES
            if name.startswith(bare) and name != bare
        ]
    body = _ELEMENT_SYNTAX.sub("", element, count=1)
    word = body.split(",")[-1]
    prefix = word[1:] if word.startswith('"') else word
    found = [
        Suggestion(quote_name(name), -len(word), "node") for name in names(parent_text, prefix)
    ]
    if not element:
        found += [Suggestion("+", 0, "every child, shown"), Suggestion("*", 0, "every child")]
    return found


class NodeNames:
    """Node names below a path, looked up in the store and cached per store version."""

    def __init__(self, version: Callable[[], StoreVersion], size: int = 256) -> None:
        self.version = version
        self.size = size
        self.cache: OrderedDict[tuple[int, str | None, str], list[str]] = OrderedDict()

    def __call__(self, parent: str | None, prefix: str) -> list[str]:
        """Names of the children of the nodes ``parent`` reaches, starting with ``prefix``."""
        version = self.version()
        key = (version.version, parent, prefix)
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        try:
            path = parse_path(parent) if parent else None
            found = child_names(version, path, prefix)
        except (TreestoreError, OSError):
            found = []
        self.cache[key] = found
        if len(self.cache) > self.size:
            self.cache.popitem(last=False)
        return found
