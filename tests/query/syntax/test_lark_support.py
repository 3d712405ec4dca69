"""One lark loader and one reading of lark's failures, for every language of the project."""

from __future__ import annotations

import pytest

from query.syntax.lark_support import Failure, parse, parser
from treestore.errors import PositionedError


def _failure(grammar: tuple[str, str, str], text: str) -> Failure:
    seen: list[Failure] = []

    def error(failure: Failure) -> PositionedError:
        seen.append(failure)
        return PositionedError("no", text, failure.line, failure.column)

    with pytest.raises(PositionedError):
        parse(parser(*grammar), text, error)
    return seen[0]


PATH = ("query.syntax", "path.lark", "path")
OPS = ("query.syntax", "ops.lark", "ops")
JSON = ("loaders.job.text", "jsonpos.lark", "value")


def test_each_grammar_is_built_once() -> None:
    assert parser(*PATH) is parser(*PATH)
    assert parser(*OPS) is not parser(*PATH)


@pytest.mark.parametrize(
    ("grammar", "text", "kind", "line", "column"),
    [
        (PATH, "root/", "end", 1, 6),
        (PATH, "root/+:nodez", "token", 1, 8),
        (OPS, "merge=k;=", "token", 1, 9),
        (JSON, '{"a": [1,\n', "end", 1, 10),
        (JSON, '{"a": 1,\n "b" 2}', "token", 2, 6),
        (JSON, '{"a": #}', "character", 1, 7),
    ],
)
def test_failures_say_what_and_where(
    grammar: tuple[str, str, str], text: str, kind: str, line: int, column: int
) -> None:
    failure = _failure(grammar, text)
    assert (failure.kind, failure.line, failure.column) == (kind, line, column)
