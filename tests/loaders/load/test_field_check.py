"""Fields a job reads that no source has: an error before the load (a warning with
--lenient); a field only some sources lack: a warning (an error with --strict)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loaders.job.model import load_job
from loaders.load.inputs import check_job_fields, unknown_fields
from shell.cli import main
from shell.demo import DEMO_JOB
from treestore.errors import JobConfigError
from treestore.events import Event


def _misspelt_job(folder: Path) -> Path:
    """The demo's job with a value key ``PUDI`` (for PUID) and a sum over ``TMIE``."""
    job = json.loads(json.dumps(DEMO_JOB))
    mapping_branch = job["tree"]["root"][1]["list"][1]
    mapping_branch[2]["key"] = "PUDI"
    mapping_branch[2]["data"] = {"total": {"type": "sum", "key": "TMIE"}}
    path = folder / "typo.json"
    path.write_text(json.dumps(job, indent=2) + "\n")
    return path


def test_the_demo_job_reads_only_known_fields(demo_dir: Path) -> None:
    assert unknown_fields(load_job(demo_dir / "job.json")) == []


def test_misspelt_fields_are_warned_with_line_and_closest_when_lenient(demo_dir: Path) -> None:
    job = load_job(_misspelt_job(demo_dir))
    events: list[Event] = []
    check_job_fields(job, events.append, lenient=True)
    lines = [event.text() for event in events]
    text = (demo_dir / "typo.json").read_text().splitlines()
    pudi = 1 + next(i for i, line in enumerate(text) if '"PUDI"' in line)
    tmie = 1 + next(i for i, line in enumerate(text) if '"TMIE"' in line)
    assert lines == [
        f"warning: {demo_dir / 'typo.json'} line {pudi}: tree.root[1].list[1][2].key: field "
        "'PUDI' is in no source; did you mean 'PUID'?; the load reads it as missing",
        f"warning: {demo_dir / 'typo.json'} line {tmie}: tree.root[1].list[1][2].data.total.key: "
        "field 'TMIE' is in no source; did you mean 'TIME'?; the load reads it as missing",
    ]


def test_a_field_in_no_source_fails_the_load_before_spark_by_default(
    demo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It once was one warning line, exit 0, and a whole branch loaded empty."""
    job = load_job(_misspelt_job(demo_dir))
    with pytest.raises(JobConfigError) as caught:
        check_job_fields(job, lambda event: None)
    assert "field 'PUDI' is in no source; did you mean 'PUID'? (1 more unknown field(s)" in str(
        caught.value
    )
    assert "load with --lenient to read it as missing" in str(caught.value)
    store = demo_dir / "store"
    assert main(["load", str(demo_dir / "typo.json"), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "'PUDI' is in no source; did you mean 'PUID'?" in err and '"key": "PUDI"' in err
    assert "?. Line" not in err and "). Line 95, column 22." in err
    assert not store.exists()


def test_a_shard_by_field_must_be_in_its_own_source(demo_dir: Path) -> None:
    job = json.loads(json.dumps(DEMO_JOB))
    job["source"][0]["shard_by"] = "PUID"  # only the mapping has it
    (demo_dir / "shard.json").write_text(json.dumps(job))
    found = unknown_fields(load_job(demo_dir / "shard.json"))
    assert [(f.name, f.path, f.where) for f in found] == [
        ("PUID", ("source", 0, "shard_by"), "not in source 'attributes'")
    ]


def _shard_by_in_one_source(folder: Path) -> Path:
    job = json.loads(json.dumps(DEMO_JOB))
    job["source"][0]["shard_by"] = "PUID"  # only the mapping has it
    (folder / "shard.json").write_text(json.dumps(job))
    return folder / "shard.json"


def test_a_field_some_sources_lack_warns_and_strict_fails_it(
    demo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = load_job(_shard_by_in_one_source(demo_dir))
    events: list[Event] = []
    check_job_fields(job, events.append)
    (line,) = [event.text() for event in events]
    assert "field 'PUID' is not in source 'attributes'" in line
    assert line.endswith("the load reads it as missing (use --strict to make this an error)")
    with pytest.raises(JobConfigError, match="field 'PUID' is not in source 'attributes'"):
        check_job_fields(job, lambda event: None, strict=True)
    store = demo_dir / "store"
    assert main(["load", str(demo_dir / "shard.json"), "--store", str(store), "--strict"]) == 2
    assert "'PUID' is not in source 'attributes'" in capsys.readouterr().err
    assert not store.exists()


def test_strict_and_lenient_exclude_each_other(
    demo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["load", str(demo_dir / "job.json"), "--store", str(demo_dir / "s")]
    with pytest.raises(SystemExit):
        main([*argv, "--strict", "--lenient"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_json_keys_and_headerless_columns_are_the_known_fields(tmp_path: Path) -> None:
    (tmp_path / "events.json").write_text('{"user": "u1", "score": 1}\n{"user": "u2"}\n')
    (tmp_path / "plain.tsv").write_text("u1\t7\n")
    job = {
        "shards": 1,
        "source": [
            {"name": "events", "path": "events.json", "format": "json"},
            {"name": "plain", "path": "plain.tsv", "format": "tsv", "header": False},
        ],
        "tree": {
            "root": [
                {"type": "value", "key": "usr"},
                {"type": "value", "key": "_c1", "data": {"s": {"type": "sum", "key": "scroe"}}},
            ]
        },
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    found = unknown_fields(load_job(tmp_path / "job.json"))
    assert [(f.name, f.closest) for f in found] == [("usr", "user"), ("scroe", "score")]


@pytest.mark.spark
def test_lenient_loads_anyway_with_a_warning(
    spark: object, demo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = demo_dir / "store"
    argv = ["load", str(_misspelt_job(demo_dir)), "--store", str(store), "--lenient"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "field 'PUDI' is in no source; did you mean 'PUID'?; the load reads it as missing" in out
    assert "published version 1" in out
