"""A failed Spark job says its cause in one line, with the input file when there is one:
loads with bytes that are not text, a Java failure (a file grown past its size limit, in
a dedup index rebuilt by a load) and a sweep input that is not what it says, on the shared
SparkSession."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from loaders import load_job, run_load
from loaders.sweep.inputs import read_table
from tests.support.file_limits import file_size_limit
from treestore.errors import LoadError

pytestmark = pytest.mark.spark

RANDOM = random.Random(22).randbytes(2000)


def _job(folder: Path, dedup: bool = False) -> Path:
    doc: dict[str, Any] = {
        "shards": 2,
        "source": [{"name": "s", "path": "in/", "format": "tsv", "shard_by": "K"}],
        "tree": {"root": [{"type": "value", "key": "K"}, {"type": "value", "key": "V"}]},
    }
    if dedup:
        doc["source"][0]["dedup"] = {"keys": ["K", "V"]}
    (folder / "in").mkdir(exist_ok=True)
    (folder / "job.json").write_text(json.dumps(doc))
    return folder / "job.json"


def test_bytes_that_are_not_text_are_set_aside_and_a_header_of_them_names_the_file(
    spark: Any, tmp_path: Path
) -> None:
    job = _job(tmp_path)
    good = tmp_path / "in" / "a.tsv"
    good.write_bytes(b"K\tV\nk1\tv1\n" + RANDOM + b"\nk2\tv2\n")
    store = tmp_path / "store"
    report = run_load(spark, load_job(job), store).report
    lines = good.read_bytes().count(b"\n")
    assert report["sources"]["s"]["applied"] == 2
    assert report["sources"]["s"]["rejected"] == lines - 3
    rejected = [
        json.loads(line)
        for name in report["rejected"]["files"]
        for line in (store / name).read_text().splitlines()
    ]
    assert sorted((r["file"], r["line"]) for r in rejected) == [
        (str(good), line) for line in range(3, lines)
    ]
    random_file = tmp_path / "in" / "b.tsv"
    random_file.write_bytes(RANDOM)
    with pytest.raises(LoadError) as caught:
        run_load(spark, load_job(job), store)
    with pytest.raises(UnicodeDecodeError) as header:
        RANDOM.split(b"\n")[0].decode()
    first_bad = header.value.start
    assert str(caught.value) == (
        f"The load's Spark job failed: input file {random_file} cannot be read as tsv (its "
        f"header, line 1, is not UTF-8 text (byte offset {first_bad})); fix or remove it, "
        "then load again"
    )


def test_a_java_failure_in_a_load_says_its_root_cause(spark: Any, tmp_path: Path) -> None:
    """The JVM writes no file for a load's records (they travel in the Arrow pieces the
    Python tasks write), but it does for a dedup index rebuilt in a load (Spark's
    shuffle): a disk that is full there gives the Java failure's root cause."""
    job = _job(tmp_path, dedup=True)
    (tmp_path / "in" / "a.tsv").write_text("K\tV\n" + "".join(f"k{i}\tv{i}\n" for i in range(500)))
    assert run_load(spark, load_job(job), tmp_path / "store").version == 1
    (tmp_path / "store" / "dedup" / "INDEX").write_text("damaged")  # so it is rebuilt
    (tmp_path / "in" / "b.tsv").write_text("K\tV\nk1\tv1\nnew\tv\n")
    spark.range(1).mapInArrow(lambda batches: batches, "id long").collect()  # workers up
    jvm = spark.sparkContext._gateway.proc.pid
    with file_size_limit(jvm, 1), pytest.raises(LoadError) as caught:
        run_load(spark, load_job(job), tmp_path / "store")
    assert str(caught.value) == (
        "Indexing the records of source 's' failed: java.io.IOException: File too large"
    )
    second = run_load(spark, load_job(job), tmp_path / "store")  # the limit is gone
    assert second.version == 2 and second.report["sources"]["s"]["duplicates_of_earlier_loads"] == 1


def test_the_sweep_names_an_input_that_is_not_parquet(spark: Any, tmp_path: Path) -> None:
    # found when its fields are sampled, before a Spark job: a traceback until now
    garbage = tmp_path / "events.parquet"
    garbage.write_bytes(RANDOM)
    with pytest.raises(LoadError, match=rf"^input file {garbage} cannot be read as parquet \("):
        read_table(spark, str(garbage))
