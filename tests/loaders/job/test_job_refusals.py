"""Job files that once escaped as Python exceptions (a 5000-digit number, 2,000 levels of
nesting, a list where a name goes, a lone surrogate): each is now a JobConfigError naming
the file, line and column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lark.exceptions import UnexpectedInput

from loaders.job.model import load_job
from loaders.job.text import DEEPEST_NESTING
from query.syntax.lark_support import parser
from shell.demo import DEMO_JOB
from treestore.errors import JobConfigError


def _refusal(tmp_path: Path, text: str, suffix: str = ".json") -> JobConfigError:
    file = tmp_path / f"job{suffix}"
    file.write_text(text, encoding="utf-8")
    with pytest.raises(JobConfigError) as caught:
        load_job(file)
    assert caught.value.source == str(file)
    return caught.value


def _demo(edit: Any) -> str:
    job = json.loads(json.dumps(DEMO_JOB))
    edit(job)
    return json.dumps(job)


def _place_of(text: str, needle: str) -> tuple[int, int]:
    offset = text.index(needle)
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def test_a_number_of_5000_digits_is_out_of_range_at_the_number(tmp_path: Path) -> None:
    text = '{"shards": ' + "9" * 5000 + "}"  # was Python's 4300-digit ValueError
    error = _refusal(tmp_path, text)
    assert (error.line, error.column) == (1, 12) and "out of range" in error.reason


@pytest.mark.parametrize(
    "number", ["9223372036854775808", "-9223372036854775809", "-" + "9" * 20, "1e400"]
)
def test_numbers_past_a_long_or_not_finite_are_refused(tmp_path: Path, number: str) -> None:
    error = _refusal(tmp_path, _demo(lambda j: j.update(shards="N")).replace('"N"', number))
    assert "out of range" in error.reason and error.column > 1


def test_the_ends_of_a_long_are_numbers(tmp_path: Path) -> None:
    text = _demo(lambda j: j.update(shards="N")).replace('"N"', "9223372036854775807")
    error = _refusal(tmp_path, text)  # refused by the model's own range, not the reader's
    assert "'shards' must be a whole number from 1 to 65536" in error.reason


@pytest.mark.parametrize("depth", [DEEPEST_NESTING + 1, 2000, 20000])
def test_deep_nesting_is_refused_at_the_bracket_that_goes_too_deep(
    tmp_path: Path, depth: int
) -> None:
    error = _refusal(tmp_path, "[" * depth + "]" * depth)  # 2,000 was a RecursionError
    assert (error.line, error.column) == (1, DEEPEST_NESTING + 1)
    assert "nest more than" in error.reason


def test_nesting_up_to_the_limit_reads(tmp_path: Path) -> None:
    depth = DEEPEST_NESTING
    error = _refusal(tmp_path, "[" * depth + "]" * depth)
    assert "expected an object, found list" in error.reason  # read, then refused by the model


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (lambda j: j["map"]["filter_out"].update(op=["chain"]), "map.filter_out.op"),
        (lambda j: j["map"]["filter_out"].update(op={"a": 1}), "map.filter_out.op"),
        (
            lambda j: j["map"]["filter_out"]["filter"][0]["filter"].update(op=["split"]),
            "map.filter_out.filter[0].filter.op",
        ),
        (
            lambda j: j["tree"]["root"][0].update(data={"x": {"type": ["sum"]}}),
            "tree.root[0].data.x.type",
        ),
        (lambda j: j["tree"]["root"][0].update(type=["const"]), "tree.root[0].type"),
        (lambda j: j["source"][0].update(format={"f": 1}), "source[0].format"),
    ],
)
def test_a_list_or_object_where_a_name_goes_is_refused_there(
    tmp_path: Path, edit: Any, where: str
) -> None:
    error = _refusal(tmp_path, _demo(edit))  # "op": [...] was TypeError: unhashable type
    assert error.reason.startswith(where)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"shards": "\\ud800"}', '"\\ud800"'),
        ('{"\\udfff": 1}', '"\\udfff"'),
        ('{"a": ["x", "\\ud83d"]}', '"\\ud83d"'),
    ],
)
def test_a_lone_surrogate_is_refused_where_it_is_written(
    tmp_path: Path, text: str, needle: str
) -> None:
    error = _refusal(tmp_path, text)
    assert (error.line, error.column) == _place_of(text, needle)
    assert "lone surrogate" in error.reason


def test_a_surrogate_pair_is_one_character(tmp_path: Path) -> None:
    error = _refusal(tmp_path, '{"\\ud83d\\ude00": 1}')
    assert "unknown key '\U0001f600'" in error.reason


def test_a_bad_unicode_escape_is_a_syntax_error_at_the_string(tmp_path: Path) -> None:
    text = '{\n "shards": "\\uzzzz"}'  # was json.JSONDecodeError
    error = _refusal(tmp_path, text)
    assert (error.line, error.column) == (2, 12)


def test_lines_are_counted_as_lark_counts_them(tmp_path: Path) -> None:
    text = '{\x0c"a": 1,\x0c\n "b" 2}'  # \x0c is JSON blank; str.splitlines splits there
    with pytest.raises(UnexpectedInput) as caught:
        parser("loaders.job.text", "jsonpos.lark", "value").parse(text)
    error = _refusal(tmp_path, text)
    assert (error.line, error.column) == (caught.value.line, caught.value.column) == (2, 6)
    end = _refusal(tmp_path, '{\x0c"a": [1,\x0c\n')
    assert (end.line, end.column) == (1, 11)  # just past the last token


def test_toml_errors_carry_tomls_line_and_column(tmp_path: Path) -> None:
    error = _refusal(tmp_path, "shards = 1\nsource = ]\n", ".toml")
    assert (error.line, error.column) == (2, 10) and "Not valid TOML" in error.reason


def test_toml_numbers_and_nesting_are_bounded(tmp_path: Path) -> None:
    digits = _refusal(tmp_path, "shards = " + "9" * 5000 + "\n", ".toml")
    assert (digits.line, digits.column) == (1, 10) and "out of range" in digits.reason
    long = _refusal(tmp_path, "shards = 9223372036854775808\n", ".toml")
    assert "out of range" in long.reason
    deep = _refusal(tmp_path, "a = " + "[" * 3000 + "]" * 3000 + "\n", ".toml")
    assert "nest more than" in deep.reason and deep.column == DEEPEST_NESTING + 5
    nested = _refusal(tmp_path, "a = " + "[" * 150 + "]" * 150 + "\n", ".toml")
    assert "nest more than" in nested.reason


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_a_job_file_that_is_not_utf8_is_refused_at_the_bad_byte(
    tmp_path: Path, suffix: str
) -> None:
    text = json.dumps(DEMO_JOB, indent=1) if suffix == ".json" else 'shards = 4\nname = "x"\n'
    text = text.replace('"attributes"', '"caf\xe9"').replace('"x"', '"caf\xe9"')
    file = tmp_path / f"job{suffix}"
    file.write_bytes(text.encode("latin-1"))  # was line 1, column 1, under an empty line
    with pytest.raises(JobConfigError) as caught:
        load_job(file)
    error = caught.value
    assert (error.line, error.column) == _place_of(text, "\xe9")
    assert error.source == str(file) and "not UTF-8" in error.reason
    assert (
        "caf\ufffd" in error.snippet and error.hint and "Save the job file as UTF-8" in error.hint
    )
