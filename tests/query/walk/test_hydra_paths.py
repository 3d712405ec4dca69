"""Hydra's query-path behaviour as test vectors (fixtures/hydra/paths.txt over trees.json,
and tests/query/syntax/fixtures/hydra/parse.txt for parsing alone).

Comparison rule for paths.txt: a case's ``path`` is parsed and run with :func:`run_path` over its
tree (built on the in-memory page store, each node visited with its hits). The rows,
as lists, must equal ``rows`` exactly: same values, same order, nulls as ``None``.
When the path reads no attachment, the column engine must give the same rows.

A case with ``differs`` is a deliberate difference from Hydra: treestore must give
its own stated ``rows`` (or, with ``error``, reject the path at that column), and
Hydra's rows (``hydra``) must differ from them, so a difference cannot pass
silently or hide a case where treestore in fact agrees with Hydra. Every case
names its ``source``.

Comparison rule for parse.txt: ``str(parse_path(path))`` must equal ``canonical``
(and parse back to the same tree); it must equal ``path`` itself, as Hydra's
``getPathString`` gives it, unless the case ``differs``. Each attribute listed in
``element`` must equal the first element's (tuples compared as lists, fields as
dicts); ``default_hits`` is Hydra's number, treestore's ``None`` counting as 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from query import parse_path, run_path
from query.walk.column_engine import run_path_columns, supports
from treestore.attachments import update_attachment
from treestore.errors import QuerySyntaxError
from treestore.storage.pagestore import MemoryPageStore
from treestore.storage.tree import Handle, ShardTree

FIXTURES = Path(__file__).parent / "fixtures" / "hydra"
PARSE_FIXTURE = Path(__file__).parents[1] / "syntax" / "fixtures" / "hydra" / "parse.txt"
_KEYS = {"source", "tree", "path", "rows", "differs", "hydra", "error"}
_PARSE_KEYS = {"source", "path", "canonical", "element", "differs"}


@dataclass(frozen=True)
class Case:
    """One vector: a path over a named tree and what it must give."""

    source: str
    tree: str
    path: str
    rows: list[list[Any]] | None
    differs: str | None = None
    hydra: list[list[Any]] | None = None
    error: int | None = None


def _parse_block(block: str) -> Case:
    fields: dict[str, str] = {}
    for line in block.splitlines():
        key, _, value = line.partition(": ")
        assert key in _KEYS and key not in fields, f"bad line {line!r}"
        fields[key] = value
    return Case(
        source=fields["source"],
        tree=fields["tree"],
        path=fields["path"],
        rows=json.loads(fields["rows"]) if "rows" in fields else None,
        differs=fields.get("differs"),
        hydra=json.loads(fields["hydra"]) if "hydra" in fields else None,
        error=int(fields["error"]) if "error" in fields else None,
    )


def _blocks(fixture: Path) -> list[str]:
    lines = [line for line in fixture.read_text().splitlines() if line[:1] != "#"]
    return [block.strip() for block in "\n".join(lines).split("\n\n") if block.strip()]


def _cases() -> list[Case]:
    return [_parse_block(block) for block in _blocks(FIXTURES / "paths.txt")]


def _parse_cases() -> list[dict[str, str]]:
    cases = []
    for block in _blocks(PARSE_FIXTURE):
        fields = dict(line.partition(": ")[::2] for line in block.splitlines())
        assert set(fields) <= _PARSE_KEYS and len(fields) == len(block.splitlines()), block
        cases.append(fields)
    return cases


def _add(tree: ShardTree, parent: Handle, children: dict[str, list[Any]]) -> None:
    for name, spec in children.items():
        hits, kids, data = [*spec, {}, {}][:3]
        handle = tree.visit(parent, name, hits=hits)
        assert handle is not None
        if data:

            def update(state: dict[str, Any], data: dict[str, list[Any]] = data) -> None:
                for attachment, (kind, values, options) in data.items():
                    current = state.get(attachment, [kind, None])[1]
                    for value in values:
                        current = update_attachment(kind, current, [value], 1, options)
                    state[attachment] = [kind, current]

            tree.update_data(handle, update)
        _add(tree, handle, kids)


def _build(name: str) -> ShardTree:
    spec = json.loads((FIXTURES / "trees.json").read_text())[name]
    tree = ShardTree(MemoryPageStore())
    _add(tree, tree.root_handle, spec)
    return ShardTree(tree.pages, tree.commit())


def _column_rows(tree: ShardTree, text: str) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for count, columns in run_path_columns(tree, parse_path(text)):
        values = [c.to_pylist() for c in columns]
        rows.extend([list(r) for r in zip(*values, strict=True)] if columns else [[]] * count)
    return rows


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[f"{c.tree}:{c.path}" for c in CASES])
def test_hydra_path_vector(case: Case) -> None:
    assert case.source
    if case.differs is not None:
        assert case.hydra is not None, "a deliberate difference states Hydra's rows"
        assert case.hydra != case.rows, "Hydra agrees: this is no difference"
    if case.error is not None:
        assert case.differs is not None and case.rows is None
        with pytest.raises(QuerySyntaxError) as caught:
            parse_path(case.path)
        assert caught.value.column == case.error
        return
    tree = _build(case.tree)
    assert [list(row) for row in run_path(tree, parse_path(case.path))] == case.rows
    if supports(parse_path(case.path)):
        assert _column_rows(tree, case.path) == case.rows


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        # a property's label is not Hydra's: left out of the vectors when it is unset
        fields = value.__dataclass_fields__
        return {
            name: _plain(getattr(value, name))
            for name in fields
            if not (name == "label" and getattr(value, name) is None)
        }
    return value


PARSE_CASES = _parse_cases()


@pytest.mark.parametrize("case", PARSE_CASES, ids=[c["path"] for c in PARSE_CASES])
def test_hydra_parse_vector(case: dict[str, str]) -> None:
    assert case["source"]
    parsed = parse_path(case["path"])
    assert str(parsed) == case["canonical"]
    assert parse_path(str(parsed)) == parsed
    assert (case["canonical"] == case["path"]) == ("differs" not in case)
    first = parsed.elements[0]
    for name, expected in json.loads(case.get("element", "{}")).items():
        actual = _plain(getattr(first, name))
        if name == "default_hits":
            actual = actual or 0
        assert actual == expected, name


def test_every_tree_is_used() -> None:
    names = {name for name in json.loads((FIXTURES / "trees.json").read_text()) if name[:1] != "_"}
    assert names == {case.tree for case in CASES}
