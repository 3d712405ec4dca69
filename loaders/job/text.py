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
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from treestore.errors import JobConfigError

__all__ = ["JobText", "KeyPath", "read_job_file"]

KeyPath = tuple[str | int, ...]


@cache
def _json_parser() -> Lark:
    grammar = resources.files("loaders.job").joinpath("jsonpos.lark").read_text()
    return Lark(grammar, start="value", parser="lalr", propagate_positions=True)


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


def _json_syntax_error(job: JobText, exc: UnexpectedInput) -> JobConfigError:
    if isinstance(exc, UnexpectedEOF) or (
        isinstance(exc, UnexpectedToken) and exc.token.type == "$END"
    ):
        lines = job.text.splitlines() or [""]
        return JobConfigError(
            "The job file ends too early (a bracket or brace is not closed)",
            job.text,
            len(lines),
            len(lines[-1]) + 1,
            source=job.file,
        )
    if isinstance(exc, UnexpectedCharacters):
        reason = "This character cannot stand here in JSON"
    else:
        assert isinstance(exc, UnexpectedToken)
        reason = f"Unexpected {str(exc.token)[:20]!r} in JSON"
    return JobConfigError(
        reason,
        job.text,
        exc.line,
        exc.column,
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
    try:
        tree = _json_parser().parse(text)
    except UnexpectedInput as exc:
        raise _json_syntax_error(job, exc) from None
    job.content = _decode(tree, (), job.positions)
    return job
