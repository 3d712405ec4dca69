"""Syntax highlighting of shell lines: path elements, properties, bounds, ops, meta-commands."""

from __future__ import annotations

import re
from collections.abc import Callable

from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.lexers import Lexer

from shell.repl.line import PART_SEPARATOR

__all__ = ["ShellLexer", "tokens"]

_PATH_TOKENS = re.compile(
    r"""(?P<string>"(?:[^"\\]|\\.)*"?)
      | (?P<sep>/)
      | (?P<syntax>\.\.|[()~|!@\[\]{}-])
      | (?P<wild>[+*])
      | (?P<prop>:|\b(?:hits|nodes)\b(?=[<>=,/]|$))
      | (?P<bound>[<>=]\d*)
      | (?P<punct>,)
      | (?P<name>[^/:,+*"<>=()~|!@\[\]{}]+)""",
    re.VERBOSE,
)


def _lex(text: str, pattern: re.Pattern[str]) -> StyleAndTextTuples:
    out: StyleAndTextTuples = []
    place = 0
    for match in pattern.finditer(text):
        if match.start() > place:  # anything the pattern skipped keeps its text, unstyled
            out.append(("", text[place : match.start()]))
        out.append((f"class:{match.lastgroup or 'name'}", match.group()))
        place = match.end()
    if place < len(text):
        out.append(("", text[place:]))
    return out


def tokens(line: str) -> StyleAndTextTuples:
    """The (style, text) pieces of one line."""
    stripped = line.lstrip()
    if stripped.startswith("\\"):
        command, space, rest = line.partition(" ")
        return [("class:meta", command), ("", space + rest)]
    out: StyleAndTextTuples = []
    parts = list(PART_SEPARATOR.finditer(line))
    end = parts[0].start() if parts else len(line)
    out += _lex(line[:end], _PATH_TOKENS)
    for index, match in enumerate(parts):
        out.append(("class:keyword", match.group()))
        stop = parts[index + 1].start() if index + 1 < len(parts) else len(line)
        out += _ops(line[match.end() : stop])
    return out


def _ops(text: str) -> StyleAndTextTuples:
    """``name=args;name=args``: only the first ``=`` of an op ends its name."""
    out: StyleAndTextTuples = []
    for index, chunk in enumerate(re.split(r"(?<!\\);", text)):
        if index:
            out.append(("class:punct", ";"))
        name, equals, arguments = chunk.partition("=")
        out += [("class:op", name), ("class:punct", equals), ("class:arg", arguments)]
    return [piece for piece in out if piece[1]]


class ShellLexer(Lexer):
    """prompt_toolkit lexer over :func:`tokens`."""

    def lex_document(self, document: Document) -> Callable[[int], StyleAndTextTuples]:
        """A function giving each line's styled pieces."""
        lines = document.lines
        return lambda number: tokens(lines[number]) if number < len(lines) else []
