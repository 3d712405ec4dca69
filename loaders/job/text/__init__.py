"""Reading a job file into plain data, remembering where every value stood.

JSON job files (``//`` line comments allowed) are parsed with lark so that each
value keeps its line and column; TOML files (``.toml``) are read with
``tomllib`` and errors name the key path instead. :class:`JobText` turns a
key path into a :class:`~treestore.errors.JobConfigError` pointing at the value.

Whatever the text, reading it gives a job's plain data or a ``JobConfigError``: values
are nested at most :data:`DEEPEST_NESTING` deep, whole numbers lie in Java's ``long``
range (as Hydra reads them), real numbers are finite, and no text holds a lone
surrogate (``"\\ud800"``: it cannot be written as UTF-8).

A room of its own, below the job model and the filters (both point into a job's text),
with its grammar ``jsonpos.lark`` beside it.

May import: ``query.syntax``, ``treestore``.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from lark import Token, Tree

from query.syntax.lark_support import (
    LARGEST_WHOLE,
    Failure,
    bounded_whole,
    first_surrogate,
    line_column,
    parse,
    parser,
)
from treestore.errors import JobConfigError

__all__ = ["DEEPEST_NESTING", "JobText", "KeyPath", "read_job_file"]

KeyPath = tuple[str | int, ...]

DEEPEST_NESTING = 100
"""How deep objects and lists may nest in a job file (a real job nests about 10 deep)."""
_LONG = LARGEST_WHOLE + 1


def format_key_path(path: KeyPath) -> str:
    """``("tree", "root", 1)`` -> ``tree.root[1]``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "the top level"


@dataclass
class JobText:
    """A job file's text, its decoded content, and the position of every value."""

    file: str
    text: str
    content: Any = None
    positions: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)

    def check_keys(
        self, doc: dict[str, Any], path: KeyPath, known: set[str], context: str = ""
    ) -> None:
        """Refuse a key of the object ``doc`` (at ``path``) that is not in ``known``,
        at that key, naming the known ones; ``context`` ends the reason (`` for op 'x'``)."""
        for key in doc:
            if key not in known:
                raise self.error(
                    (*path, key),
                    f"unknown key {key!r}{context}",
                    hint="Known keys: " + ", ".join(sorted(known)) + ".",
                )

    def error(self, path: KeyPath, reason: str, hint: str | None = None) -> JobConfigError:
        """A :class:`JobConfigError` at the value found at ``path``."""
        probe = path
        while probe and probe not in self.positions:
            probe = probe[:-1]
        line, column = self.positions.get(probe, (1, 1))
        where = format_key_path(path)
        return JobConfigError(
            f"{where}: {reason}", self.text, line, column, source=self.file, hint=hint
        )


class _Decoder:
    """Lark's tree of a JSON job file -> plain data, noting where every value stood."""

    def __init__(self, job: JobText) -> None:
        self.job = job

    def refuse(self, line: int, column: int, reason: str, hint: str | None = None) -> Exception:
        """A :class:`JobConfigError` at ``line``, ``column`` of the job file."""
        return JobConfigError(reason, self.job.text, line, column, source=self.job.file, hint=hint)

    def text(self, token: Token) -> str:
        """A STRING token's text (the grammar admits only valid JSON strings)."""
        decoded: str = json.loads(str(token))
        surrogate = first_surrogate(decoded)
        if surrogate is not None:
            raise self.refuse(
                token.line or 1,
                token.column or 1,
                f"A text cannot hold a lone surrogate ({decoded[surrogate]!r})",
                hint='Write a character outside the BMP as a pair: "\\ud83d\\ude00".',
            )
        return decoded

    def number(self, token: Token) -> int | float:
        """A number token, refused outside Java's long range (whole) or not finite (real)."""
        text = str(token)
        if re.fullmatch(r"[+-]?[0-9]+", text):
            whole = bounded_whole(text.lstrip("+-"), _LONG)
            number: int | float = _LONG + 1 if whole is None else whole  # None: out of range
            number = -number if text.startswith("-") else number
            if -_LONG <= number < _LONG:
                return number
        else:
            number = float(text)
            if math.isfinite(number):
                return number
        raise self.refuse(
            token.line or 1,
            token.column or 1,
            "This number is out of range",
            hint=f"Whole numbers lie between {-_LONG} and {_LONG - 1}; real ones are finite.",
        )

    def decode(self, node: Tree[Token], path: KeyPath, depth: int = 0) -> Any:
        """The value of ``node`` (at ``path``), nested ``depth`` deep."""
        positions = self.job.positions
        positions[path] = (node.meta.line, node.meta.column) if not node.meta.empty else (1, 1)
        kind = node.data
        if kind == "string":
            return self.text(node.children[0])  # type: ignore[arg-type]
        if kind == "number":
            return self.number(node.children[0])  # type: ignore[arg-type]
        if kind in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[kind]
        if depth >= DEEPEST_NESTING:
            raise self.refuse(
                *positions[path],
                f"Objects and lists nest more than {DEEPEST_NESTING} deep here",
                hint="A job nests about 10 deep: check for brackets opened by mistake.",
            )
        if kind == "array":
            items = [c for c in node.children if c is not None]
            return [self.decode(item, (*path, i), depth + 1) for i, item in enumerate(items)]  # type: ignore[arg-type]
        result: dict[str, Any] = {}
        pair: Any
        for pair in node.children:
            if pair is None:
                continue
            key_token: Any
            key_token, value = pair.children
            key = self.text(key_token)
            positions[(*path, key)] = (key_token.line, key_token.column)
            result[key] = self.decode(value, (*path, key), depth + 1)
            if isinstance(value, Tree) and value.data in ("object", "array"):
                positions[(*path, key)] = (key_token.line, key_token.column)
        return result


def _json_syntax_error(job: JobText, failure: Failure) -> JobConfigError:
    if failure.kind == "surrogate":
        return JobConfigError(
            f"A lone surrogate ({failure.token!r}) cannot stand in a job file",
            job.text,
            failure.line,
            failure.column,
            source=job.file,
        )
    if failure.kind == "end":
        return JobConfigError(
            "The job file ends too early (a bracket or brace is not closed)",
            job.text,
            failure.line,
            failure.column,
            source=job.file,
        )
    if failure.kind == "character":
        reason = "This character cannot stand here in JSON"
    else:
        reason = f"Unexpected {failure.token[:20]!r} in JSON"
    return JobConfigError(
        reason,
        job.text,
        failure.line,
        failure.column,
        source=job.file,
        hint="Check for a missing comma or quote, or a trailing comma, just before it.",
    )


def read_job_file(path: str | Path) -> JobText:
    """Read and decode a JSON or TOML job file; errors point at line and column."""
    file = Path(path)
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise JobConfigError(
            f"Job file {file} does not exist", "", source=str(file), hint="Check the path."
        ) from None
    except OSError as exc:
        raise JobConfigError(
            f"Job file {file} cannot be read ({exc})", "", source=str(file)
        ) from None
    job = JobText(str(file), _utf8_text(str(file), data))
    if file.suffix.lower() == ".toml":
        job.content = _read_toml(job)
        return job
    tree = parse(
        parser("loaders.job.text", "jsonpos.lark", "value"),
        job.text,
        partial(_json_syntax_error, job),
    )
    job.content = _Decoder(job).decode(tree, ())
    return job


def _utf8_text(file: str, data: bytes) -> str:
    """``data`` as UTF-8 text, with Python's universal newlines (as ``read_text`` reads it);
    bytes that are not UTF-8 are refused at the first of them: its line and column, and
    its line shown with the bytes that are not text replaced."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = _universal_newlines(data[: exc.start].decode("utf-8"))
        raise JobConfigError(
            f"The job file is not UTF-8 text here (byte 0x{data[exc.start]:02x})",
            _universal_newlines(data.decode("utf-8", errors="replace")),
            *line_column(before, len(before)),
            source=file,
            hint="Save the job file as UTF-8: it holds text of another encoding (Latin-1, "
            "UTF-16...) or bytes that are not text.",
        ) from None
    return _universal_newlines(text)


def _universal_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


_TOML_PLACE = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def _read_toml(job: JobText) -> Any:
    """A TOML job file's content; its errors at their line and column when tomllib says."""
    try:
        content = tomllib.loads(job.text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        place = _TOML_PLACE.search(message)
        line, column = (int(place[1]), int(place[2])) if place else (1, 1)
        reason = message[: place.start()] if place else message
        raise JobConfigError(
            f"Not valid TOML ({reason})", job.text, line, column, source=job.file
        ) from None
    except ValueError:  # a whole number of more than 4300 digits: Python's int refuses it
        digits = re.search(r"[0-9_]{4300,}", job.text)
        line, column = line_column(job.text, digits.start()) if digits else (1, 1)
        raise JobConfigError(
            "Not valid TOML (a number is out of range)", job.text, line, column, source=job.file
        ) from None
    except RecursionError:
        raise JobConfigError(
            f"Not valid TOML (arrays or tables nest more than {DEEPEST_NESTING} deep)",
            job.text,
            *line_column(job.text, _too_deep(job.text)),
            source=job.file,
        ) from None
    _check_values(job, content, ())
    return content


def _too_deep(text: str) -> int:
    """Where brackets and braces first nest past :data:`DEEPEST_NESTING` (quoted text
    skipped, roughly: for an error's place only), or 0."""
    depth, quote = 0, ""
    for offset, character in enumerate(text):
        if quote:
            quote = "" if character in (quote, "\n") else quote
        elif character in "\"'":
            quote = character
        elif character in "[{":
            depth += 1
            if depth > DEEPEST_NESTING:
                return offset
        elif character in "]}":
            depth -= 1
    return 0


def _check_values(job: JobText, value: Any, path: KeyPath, depth: int = 0) -> None:
    """Refuse TOML content a JSON job file could not hold: nested past
    :data:`DEEPEST_NESTING`, a whole number past Java's long, a real one not finite."""
    if isinstance(value, dict | list):
        if depth >= DEEPEST_NESTING:
            raise job.error(path, f"objects and lists nest more than {DEEPEST_NESTING} deep")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            _check_values(job, item, (*path, key), depth + 1)
    elif isinstance(value, bool):
        return
    elif isinstance(value, int) and not -_LONG <= value < _LONG:
        raise job.error(path, "this number is out of range", hint=f"Write at most {_LONG - 1}.")
    elif isinstance(value, float) and not math.isfinite(value):
        raise job.error(path, "a real number must be finite")
