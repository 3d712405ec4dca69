"""Reading a job file into plain data, remembering where every value stood.

JSON job files (``//`` line comments allowed) are parsed with lark so that each
value keeps its line and column; TOML files (``.toml``) are read with
``tomllib`` and errors name the key path instead. :class:`JobText` turns a
key path into a :class:`~treestore.errors.JobConfigError` pointing at the value.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from lark import Token, Tree

from query.syntax.lark_support import Failure, parse, parser
from treestore.errors import JobConfigError

__all__ = ["JobText", "KeyPath", "read_job_file"]

KeyPath = tuple[str | int, ...]


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


def _decode(
    node: Tree[Token] | Token, path: KeyPath, positions: dict[KeyPath, tuple[int, int]]
) -> Any:
    if isinstance(node, Token):  # unreachable with this grammar; kept total
        return str(node)
    positions[path] = (node.meta.line, node.meta.column) if not node.meta.empty else (1, 1)
    kind = node.data
    if kind == "string":
        return json.loads(str(node.children[0]))
    if kind == "number":
        return json.loads(str(node.children[0]))
    if kind in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[kind]
    if kind == "array":
        items = [c for c in node.children if c is not None]
        return [_decode(item, (*path, i), positions) for i, item in enumerate(items)]
    result: dict[str, Any] = {}
    pair: Any
    for pair in node.children:
        if pair is None:
            continue
        key_token: Any
        key_token, value = pair.children
        key = json.loads(key_token)
        positions[(*path, key)] = (key_token.line, key_token.column)
        result[key] = _decode(value, (*path, key), positions)
        if isinstance(value, Tree) and value.data in ("object", "array"):
            positions[(*path, key)] = (key_token.line, key_token.column)
    return result


def _json_syntax_error(job: JobText, failure: Failure) -> JobConfigError:
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
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise JobConfigError(
            f"Job file {file} does not exist", "", source=str(file), hint="Check the path."
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise JobConfigError(
            f"Job file {file} cannot be read ({exc})", "", source=str(file)
        ) from None
    job = JobText(str(file), text)
    if file.suffix.lower() == ".toml":
        try:
            job.content = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            line, column = getattr(exc, "lineno", 1), getattr(exc, "colno", 1)
            raise JobConfigError(
                f"Not valid TOML ({getattr(exc, 'msg', exc)})", text, line, column, source=str(file)
            ) from None
        return job
    tree = parse(
        parser("loaders.job", "jsonpos.lark", "value"), text, partial(_json_syntax_error, job)
    )
    job.content = _decode(tree, (), job.positions)
    return job
