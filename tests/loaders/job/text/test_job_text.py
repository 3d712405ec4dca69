"""A job file's text read with positions, without the job model: values with their line
and column (comments allowed), TOML without positions, and errors placed at the value
they name, or at the nearest value above it that has a place."""

from __future__ import annotations

from pathlib import Path

import pytest

from loaders.job.text import JobText, format_key_path, read_job_file
from treestore.errors import JobConfigError

JSON = '{\n  // the number of shards\n  "shards": 4,\n  "source": [{"name": "a"}]\n}\n'


@pytest.fixture
def job(tmp_path: Path) -> JobText:
    (tmp_path / "job.json").write_text(JSON)
    return read_job_file(tmp_path / "job.json")


def test_every_value_keeps_its_line_and_column(job: JobText) -> None:
    assert job.content == {"shards": 4, "source": [{"name": "a"}]}
    assert job.positions[("shards",)] == (3, 13)
    assert job.positions[("source", 0)] == (4, 14)
    assert job.positions[("source", 0, "name")] == (4, 23)


def test_an_error_stands_at_its_value_or_the_nearest_one_above(job: JobText) -> None:
    error = job.error(("source", 0, "path"), "a source needs a path")
    assert (error.line, error.column) == (4, 14)
    assert error.reason == "source[0].path: a source needs a path"
    assert error.source == job.file
    with pytest.raises(JobConfigError) as caught:
        job.check_keys(job.content["source"][0], ("source", 0), {"path", "format"}, " here")
    assert (caught.value.line, caught.value.column) == (4, 23)
    assert caught.value.reason == "source[0].name: unknown key 'name' here"
    assert caught.value.hint == "Known keys: format, path."


def test_toml_reads_the_same_content_without_positions(tmp_path: Path) -> None:
    (tmp_path / "job.toml").write_text('shards = 4\n[[source]]\nname = "a"\n')
    job = read_job_file(tmp_path / "job.toml")
    assert job.content == {"shards": 4, "source": [{"name": "a"}]}
    error = job.error(("source", 0, "name"), "unknown")
    assert (error.line, error.column) == (1, 1) and error.reason == "source[0].name: unknown"


def test_key_paths_read_as_written() -> None:
    assert format_key_path(("tree", "root", 1, "key")) == "tree.root[1].key"
    assert format_key_path((0,)) == "[0]"
    assert format_key_path(()) == "the top level"


def test_a_missing_file_is_a_job_error(tmp_path: Path) -> None:
    with pytest.raises(JobConfigError, match="does not exist"):
        read_job_file(tmp_path / "nowhere.json")


NOT_UTF8_HINT = (
    "Save the job file as UTF-8: it holds text of another encoding (Latin-1, UTF-16...) "
    "or bytes that are not text."
)


@pytest.mark.parametrize(
    ("name", "data", "byte", "line", "column", "shown"),
    [
        # Latin-1 "é" in a value: was line 1, column 1 under an empty line
        (
            "job.json",
            b'{\n  "shards": 4,\n  "source": [{"name": "caf\xe9"}]\n}\n',
            0xE9,
            3,
            27,
            '    "source": [{"name": "caf\ufffd"}]',
        ),
        (
            "job.toml",
            b'shards = 4\n[[source]]\nname = "caf\xe9"\n',
            0xE9,
            3,
            12,
            '  name = "caf\ufffd"',
        ),
        # lines counted as the parsers count them ("\r\n" and "\r" end one line each)
        ("job.json", b'{\r\n"shards": 4,\r"a": "\xff"}', 0xFF, 3, 7, '  "a": "\ufffd"}'),
        # UTF-16 (its byte order mark is no UTF-8), and a character cut short at the end
        ("job.json", '{"shards": 4}'.encode("utf-16"), 0xFF, 1, 1, None),
        ("job.json", b'{"shards": 4}\n\xe2\x82', 0xE2, 2, 1, "  \ufffd"),
    ],
)
def test_a_job_file_that_is_not_utf8_is_refused_at_its_first_bad_byte(
    tmp_path: Path, name: str, data: bytes, byte: int, line: int, column: int, shown: str | None
) -> None:
    (tmp_path / name).write_bytes(data)
    with pytest.raises(JobConfigError) as caught:
        read_job_file(tmp_path / name)
    error = caught.value
    assert (error.line, error.column) == (line, column)
    assert error.reason == f"The job file is not UTF-8 text here (byte 0x{byte:02x})"
    assert error.source == str(tmp_path / name) and error.hint == NOT_UTF8_HINT
    if shown is not None:
        assert error.snippet == f"{shown}\n  {' ' * (column - 1)}^"
