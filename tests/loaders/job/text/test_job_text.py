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
