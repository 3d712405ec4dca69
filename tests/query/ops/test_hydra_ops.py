"""Hydra's own op unit tests, ported as test vectors (fixtures/hydra/TestOp*.txt).

Each fixture file holds the cases of one Hydra test class
(``hydra-data/src/test/java/com/addthis/hydra/data/query/``), each case as lines::

    case TestOpX.java:LINE      where the doOpTest call stands in Hydra
    in [[...], ...]             the input table (JSON rows)
    ops OPS                     the ops string
    out [[...], ...]            the rows Hydra's test expects
    differs REASON              (optional) a deliberate difference, listed in
    ours [[...], ...]           docs/hydra-differences.md; ``ours`` is treestore's answer

How Hydra builds and compares (``TestOp.java``, ``DataTableHelper.java``):

- Every input cell is ``ValueFactory.create(String)``: text. ``parse("A 1|B 2")`` splits
  rows at ``|`` and cells at spaces with ``Strings.splitArray``, which drops empty pieces,
  so ``parse("")`` is an empty table and ``parse(" ")`` one row with no cells.
  ``td()`` / ``tdNull()`` leaves a cell unset: null here.
- ``doOpTest`` runs the ops over the rows, then walks the expected rows in order: the
  output must have exactly as many rows, and each row must equal the expected row cell by
  cell (``assertEquals`` on the values) with the same cell count.

So the rule here: the output has the same number of rows, in the same order, and each
row's cells, rendered as Java prints them (ints plainly, floats as ``Double.toString`` does:
``3.0``, ``1.0E7``, ``-Infinity``), equal the expected text; a null cell equals only a
null cell, and trailing nulls are ignored (an unset trailing cell is no cell). Hydra's
optional "format size" check (the table's column count) has no counterpart: treestore
rows carry no shared format.

A ``differs`` case checks that treestore gives ``ours`` and NOT Hydra's ``out``, so a
difference cannot pass silently, nor be fixed without its listing being updated.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from query import apply_ops, compile_ops
from treestore.errors import OpError

HYDRA_FIXTURES = Path(__file__).parent / "fixtures" / "hydra"
DIFFERENCES_DOC = Path(__file__).parents[3] / "docs" / "hydra-differences.md"


@dataclass
class HydraCase:
    """One doOpTest call of a Hydra test class."""

    where: str
    rows: list[list[Any]]
    ops: str
    expected: list[list[Any]]
    difference: str | None = None
    ours: list[list[Any]] | None = None


def _load_cases() -> list[HydraCase]:
    cases: list[HydraCase] = []
    for path in sorted(HYDRA_FIXTURES.glob("*.txt")):
        for line in path.read_text().splitlines():
            if not line or line.startswith("#"):
                continue
            word, _, rest = line.partition(" ")
            if word == "case":
                if not rest.startswith(f"{path.stem}.java:"):
                    raise ValueError(f"{path.name}: case {rest!r} cites another file")
                cases.append(HydraCase(rest, [], "", []))
            elif word == "in":
                cases[-1].rows = json.loads(rest)
            elif word == "ops":
                cases[-1].ops = rest
            elif word == "out":
                cases[-1].expected = json.loads(rest)
            elif word == "differs":
                cases[-1].difference = rest
            elif word == "ours":
                cases[-1].ours = json.loads(rest)
            else:
                raise ValueError(f"{path.name}: unknown line {line!r}")
    return cases


CASES = _load_cases()


def java_text(value: Any) -> str | None:
    """A value as Hydra's ValueObject prints it (null stays None)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    power = len(digit_tuple) + int(exponent) - 1
    return f"{'-' if sign else ''}{digits[0]}.{digits[1:] or '0'}E{power}"


def as_hydra_rows(rows: list[Any]) -> list[list[str | None]]:
    """Rows as Hydra's comparison sees them: cells as text, trailing nulls dropped."""
    result = []
    for row in rows:
        cells = [java_text(v) for v in row]
        while cells and cells[-1] is None:
            cells.pop()
        result.append(cells)
    return result


@pytest.mark.parametrize("case", CASES, ids=[f"{c.where}:{c.ops}" for c in CASES])
def test_hydra_case(case: HydraCase) -> None:
    got = as_hydra_rows([list(r) for r in apply_ops(case.rows, case.ops)])
    if case.difference is None:
        assert got == as_hydra_rows(case.expected)
        return
    assert case.ours is not None, f"{case.where}: a 'differs' case needs an 'ours' line"
    assert got == as_hydra_rows(case.ours)
    assert got != as_hydra_rows(case.expected)
    assert case.where in DIFFERENCES_DOC.read_text(), (
        f"{case.where} is marked 'differs' but not listed in docs/hydra-differences.md"
    )


def test_java_text_matches_double_to_string() -> None:
    values = (3, 1.5, 3.0, 0.25, -3, 1e7, 12345678.9, -2.5e-7, 1.5e20, float("-inf"), None)
    assert [java_text(v) for v in values] == [
        "3",
        "1.5",
        "3.0",
        "0.25",
        "-3",
        "1.0E7",
        "1.23456789E7",
        "-2.5E-7",
        "1.5E20",
        "-Infinity",
        None,
    ]


def test_every_hydra_test_class_has_a_fixture() -> None:
    expected = {
        "TestChainingOps", "TestOpChangepoints", "TestOpCompare", "TestOpContains",
        "TestOpDateFormat", "TestOpDepivot", "TestOpDiff", "TestOpFill", "TestOpFold",
        "TestOpFrequencyTable", "TestOpGather", "TestOpGroupBy", "TestOpHistogramExplicit",
        "TestOpLimit", "TestOpMap", "TestOpMedian", "TestOpMerge", "TestOpNumber",
        "TestOpOrder", "TestOpOrderMap", "TestOpPercentileDistribution",
        "TestOpPercentileRank", "TestOpPivot", "TestOpRange", "TestOpRemoveSingletons",
        "TestOpRoll", "TestOpSort", "TestOpString", "TestOpTitle", "TestOpTop",
        "TestOpTranspose",
    }  # fmt: skip
    assert {p.stem for p in HYDRA_FIXTURES.glob("*.txt")} == expected


@pytest.mark.parametrize("argument", ["1", "10", "10:10", "k10", "kk10", "kk10:10"])
def test_limit_accepts_what_hydra_accepts(argument: str) -> None:
    """TestOpLimit.java:27 (validInput): OpLimit's argument pattern accepts these."""
    compile_ops(f"limit={argument}")


@pytest.mark.parametrize("argument", ["10k", "abcd", ""])
def test_limit_rejects_what_hydra_rejects(argument: str) -> None:
    """TestOpLimit.java:33 (validInput): and rejects these (here with an OpError)."""
    with pytest.raises(OpError):
        compile_ops(f"limit={argument}")
