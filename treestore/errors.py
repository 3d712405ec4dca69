"""The one exception tree of treestore.

Every error the project raises on purpose is a :class:`TreestoreError`; callers
catch that one class to handle any of them, or a phase's class to be precise::

    TreestoreError
    ├── PositionedError           has text, line, column and a caret snippet
    │   ├── QuerySyntaxError      a path that does not parse      (ValueError)
    │   ├── OpError               an op string or op argument     (ValueError)
    │   └── JobConfigError        a job file that is not valid    (ValueError)
    ├── RecordError               one input record that cannot be used (ValueError)
    ├── StoreError                a store folder that cannot be used
    │   ├── CorruptPageError      stored bytes that fail their check
    │   └── NodeNotFoundError     a path of names that leads to no node in any shard
    ├── LoadError                 a load that cannot run or finish
    ├── OutputError               a result that cannot be written where it was asked to go
    ├── SparkSetupError           Java or Spark missing or unusable (RuntimeError)
    ├── ServiceError              a treestore service answered with an error, or not at all
    └── ShadowedPackageError      a user's file hides one of treestore's packages (ImportError)

The command line prints ``str(error)`` and exits non-zero; it never shows a
traceback for these.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "CorruptPageError",
    "JobConfigError",
    "LoadError",
    "NodeNotFoundError",
    "OpError",
    "OutputError",
    "PositionedError",
    "QuerySyntaxError",
    "RecordError",
    "ServiceError",
    "SettingError",
    "ShadowedPackageError",
    "SparkSetupError",
    "StoreError",
    "TreestoreError",
    "did_you_mean",
]


_SNIPPET_WIDTH = 120
"""How many characters of a long line an error's snippet shows."""


class TreestoreError(Exception):
    """Root of every error treestore raises on purpose."""


class PositionedError(TreestoreError, ValueError):
    """An error at a place in a piece of text (a path, an op string, a job file).

    Attributes:
        reason: what went wrong, one sentence without the position.
        text: the whole text the error is about.
        line: 1-based line of the offending character.
        column: 1-based column of the offending character.
        source: where the text came from (a file name), or ``None``.
        hint: what to do about it, or ``None``.
    """

    def __init__(
        self,
        reason: str,
        text: str = "",
        line: int = 1,
        column: int = 1,
        *,
        source: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.reason = reason.rstrip(".")
        self.text = text
        self.line = line
        self.column = column
        self.source = source
        self.hint = hint
        super().__init__(self._render())

    @property
    def snippet(self) -> str:
        """The offending line with a caret under the offending column.

        Lines end at "\\n" only, as the parsers count them. A character that cannot be
        shown (a control character, a lone surrogate) shows as "?" and a tab as a blank, so
        the caret stays under its column; a long line shows the 60 characters either side.
        """
        lines = self.text.split("\n")
        shown = lines[self.line - 1] if 0 < self.line <= len(lines) else ""
        shown = "".join(" " if c == "\t" else c if c.isprintable() else "?" for c in shown)
        column = self.column
        if len(shown) > _SNIPPET_WIDTH + 10:
            start = max(0, column - 1 - _SNIPPET_WIDTH // 2)
            cut = shown[start : start + _SNIPPET_WIDTH]
            tail = "…" if start + _SNIPPET_WIDTH < len(shown) else ""
            shown = ("…" if start else "") + cut + tail
            column = column - start + (1 if start else 0)
        return f"  {shown}\n  {' ' * (column - 1)}^"

    def _render(self) -> str:
        where = f"{self.source}: " if self.source else ""
        stop = "" if self.reason.endswith((".", "?", "!")) else "."
        message = (
            f"{where}{self.reason}{stop} Line {self.line}, column {self.column}.\n{self.snippet}"
        )
        if self.hint:
            message += f"\n{self.hint}"
        return message


class QuerySyntaxError(PositionedError):
    """A query path that does not parse.

    Attributes:
        expected: the tokens the parser would have accepted, in words.
    """

    def __init__(
        self,
        reason: str,
        text: str,
        line: int,
        column: int,
        *,
        expected: tuple[str, ...] = (),
        source: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.expected = tuple(expected)
        super().__init__(reason, text, line, column, source=source, hint=hint)


class OpError(PositionedError):
    """An op string that does not parse, an unknown op, or a bad op argument."""


class JobConfigError(PositionedError):
    """A job file that cannot be read or does not describe a valid job."""


class RecordError(TreestoreError, ValueError):
    """An input record that cannot be used."""


class StoreError(TreestoreError):
    """A store folder that does not exist, is not a store, or disagrees with a job."""


class CorruptPageError(StoreError):
    """Stored bytes that fail their integrity check."""


class NodeNotFoundError(StoreError):
    """A path of node names that leads to no node in any shard of a store.

    Attributes:
        path: the names asked for.
        missing: how many of them lead to a node: ``path[missing]`` is the first name no
            shard has at that place.
    """

    def __init__(self, message: str, path: tuple[str, ...], missing: int) -> None:
        self.path = path
        self.missing = missing
        super().__init__(message)

    @property
    def name(self) -> str:
        """The first name that leads to no node."""
        return self.path[self.missing]


class LoadError(TreestoreError):
    """A load that cannot run or cannot finish."""


class OutputError(TreestoreError):
    """A query's result that cannot be written where it was asked to go: a file already
    there (and no leave to replace it), a folder that cannot be written, a write that
    failed."""


class SettingError(TreestoreError, ValueError):
    """A ``TREESTORE_*`` environment variable with a value treestore cannot use."""


class SparkSetupError(TreestoreError, RuntimeError):
    """Java or Spark is missing or unusable on this machine."""


class ServiceError(TreestoreError):
    """A ``treestore serve`` service answered with an error (or could not be reached).

    Attributes:
        status: the HTTP status (``None``: no answer).
        document: the error's JSON object as the service sent it (empty: none).
    """

    def __init__(
        self, message: str, status: int | None = None, document: dict[str, object] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.document = document or {}


class ShadowedPackageError(TreestoreError, ImportError):
    """A file or folder of the user's (``query.py`` next to a script) hides one of
    treestore's top-level packages (:mod:`treestore.packages`)."""


def did_you_mean(name: str, known: Iterable[str], most: int = 3) -> str | None:
    """A hint naming the known names closest to ``name`` (a misspelt op, property, field),
    or None when none is close.

    >>> did_you_mean("srot", ["sort", "merge", "sum"])
    "Did you mean 'sort'?"
    >>> did_you_mean("hitz", ["hits", "nodes", "count"]) == "Did you mean 'hits'?"
    True
    >>> did_you_mean("xyz", ["sort"]) is None
    True
    """
    close = difflib.get_close_matches(name, sorted(set(known)), n=most)
    if not close:
        return None
    return "Did you mean " + " or ".join(repr(c) for c in close) + "?"
