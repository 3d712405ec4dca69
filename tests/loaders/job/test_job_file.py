"""Job files: the seed job validates; errors point at the line and column in the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loaders.filters.catalogue import ChainFilter, FieldFilter, ValueFilter
from loaders.job.model import load_job
from shell.demo import DEMO_JOB
from treestore.errors import JobConfigError


def test_seed_job_validates(demo_dir: Path) -> None:
    job = load_job(demo_dir / "job.json")
    assert job.shards == 8
    assert [s.name for s in job.sources] == ["attributes", "mapping"]
    assert job.sources[0].path == str((demo_dir / "attributes").resolve())
    assert job.sources[0].dedup_keys == ("TIME", "UID", "ATTRIBUTE_IDS")
    assert job.map.filter_out == ChainFilter(
        (
            FieldFilter(
                "ATTRIBUTE_IDS",
                "ATTRIBUTE_IDS",
                ValueFilter("split", (("fixedLength", -1), ("split", ","))),
                null_fail=False,
            ),
        )
    )
    kinds = [e.kind for e in job.elements()]
    assert kinds == ["const", "branch", "value", "const", "value", "value", "const", "value"]
    assert [e.create for e in job.elements() if e.key == "UID"] == [True, False]


def test_toml_job_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "job.toml").write_text(
        'shards = 1\n[[source]]\nname = "a"\npath = "in/"\nformat = "csv"\n'
        '[tree]\nroot = [{type = "value", key = "K"}]\n'
    )
    job = load_job(tmp_path / "job.toml")
    assert job.tree[0].key == "K" and job.sources[0].format == "csv"


def _job_with(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("edit", "line_of", "offset", "words"),
    [
        (
            lambda j: j["tree"]["root"][1]["list"][0][1].update(type="konst"),
            '"konst"',
            0,
            "unknown element type",
        ),
        (lambda j: j["source"][1].update(format="xml"), '"xml"', 0, "unknown format 'xml'"),
        (
            lambda j: j["map"]["filter_out"]["filter"][0].update(op="fieldz"),
            '"fieldz"',
            0,
            "unknown bundle filter",
        ),
        (lambda j: j.update(shards=0), '"shards"', 0, "'shards' must be"),
        (lambda j: j.update(hash="murmur3"), '"hash"', 0, "unknown shard hash 'murmur3'"),
        (
            lambda j: j["tree"]["root"][0].update(colour="red"),
            '"colour"',
            0,
            "unknown key 'colour'",
        ),
        # a missing key: the error points at the object that lacks it
        (
            lambda j: j["tree"]["root"][1]["list"][1][2].pop("key"),
            '"value": "M"',
            2,
            "needs a 'key'",
        ),
        (
            lambda j: j["source"][1].pop("shard_by"),
            '"name": "mapping"',
            -1,
            "'shard_by' is required",
        ),
        (
            lambda j: j["tree"]["root"][0].update(data={"n": {"type": "hll", "key": "UID"}}),
            '"hll"',
            0,
            "unknown attachment type 'hll'",
        ),
        (
            lambda j: j["tree"]["root"][0].update(data={"top": {"type": "key.top", "key": "U"}}),
            '"top"',
            0,
            "a key.top needs a 'size'",
        ),
        (
            lambda j: j["map"]["filter_out"]["filter"][0]["filter"].update(op="splitz"),
            '"splitz"',
            0,
            "unknown value filter 'splitz'",
        ),
        (
            lambda j: j["map"]["filter_out"]["filter"][0].update(
                filter={"op": "regex", "pattern": "(unclosed"}
            ),
            '"(unclosed"',
            0,
            "'pattern' is not a valid regular expression",
        ),
        (
            lambda j: j["map"]["filter_out"]["filter"][0].update(filter={"op": "hash", "type": 1}),
            '"type": 1',
            0,
            "hash type 1 is not available",
        ),
        (
            lambda j: j["map"]["filter_out"]["filter"][0].update(
                filter={"op": "mod", "mod": "ten"}
            ),
            '"ten"',
            0,
            "'mod' must be a whole number",
        ),
        (
            lambda j: j["tree"]["root"][1]["list"][0][0].update(pending={"loads": 2}),
            '"pending"',
            0,
            "'pending' is for update-only elements",
        ),
        (
            lambda j: j["tree"]["root"][1]["list"][1][0].update(pending={"loads": 0}),
            '"loads": 0',
            0,
            "'loads' must be a whole number from 1 to 1000",
        ),
        (
            lambda j: j["tree"]["root"][1]["list"][1][0].update(pending={"days": 2}),
            '"days"',
            0,
            "unknown key 'days'",
        ),
        (
            lambda j: j["tree"]["root"][1]["list"][1][0].update(pending={"time": "TIME"}),
            '"pending"',
            0,
            "a 'time' needs a 'delay'",
        ),
        (
            lambda j: j["tree"]["root"][1]["list"][1][0].update(pending={}),
            '"pending"',
            0,
            "'pending' needs 'loads'",
        ),
        (
            lambda j: j["tree"]["root"][1]["list"][1][0].update(pending={"loads": 1, "delay": 5}),
            '"delay"',
            0,
            "a 'delay' needs a 'time' field",
        ),
        (
            lambda j: (
                j["tree"]["root"][1]["list"][1].extend(
                    [
                        {"type": "const", "value": "x", "create": False, "pending": {"loads": 1}},
                        {
                            "type": "const",
                            "value": "y",
                            "create": False,
                            "pending": {"time": "T2", "delay": 1},
                        },
                    ]
                )
                or j["tree"]["root"][1]["list"][1][0].update(pending={"time": "TIME", "delay": 1})
            ),
            '"T2"',
            0,
            "waits on one time field",
        ),
    ],
)
def test_job_errors_point_at_the_value(
    tmp_path: Path, edit: object, line_of: str, offset: int, words: str
) -> None:
    job = json.loads(json.dumps(DEMO_JOB))
    edit(job)  # type: ignore[operator]
    text = json.dumps(job, indent=2)
    with pytest.raises(JobConfigError) as caught:
        load_job(_job_with(tmp_path, text))
    error = caught.value
    assert words in str(error)
    expected_line = next(i for i, line in enumerate(text.splitlines(), 1) if line_of in line)
    assert error.line == expected_line + offset, str(error)
    assert error.source == str(tmp_path / "job.json")


def test_bad_json_points_at_the_character(tmp_path: Path) -> None:
    with pytest.raises(JobConfigError) as caught:
        load_job(_job_with(tmp_path, '{\n  "shards": 2,\n  "source": [,]\n}'))
    assert (caught.value.line, caught.value.column) == (3, 14)
    with pytest.raises(JobConfigError, match="ends too early"):
        load_job(_job_with(tmp_path, '{"shards": 2'))


def test_comments_are_allowed(tmp_path: Path) -> None:
    text = json.dumps(DEMO_JOB, indent=2).replace('"shards": 8,', '"shards": 8, // as in Hydra', 1)
    assert load_job(_job_with(tmp_path, text)).shards == 8


def test_missing_job_file(tmp_path: Path) -> None:
    with pytest.raises(JobConfigError, match="does not exist"):
        load_job(tmp_path / "nope.json")
