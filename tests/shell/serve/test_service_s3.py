"""``treestore serve`` of a store on S3 (the test run's S3 server): the same answers as the
same store in a local folder, served side by side by one service, for a query the driver
walks and one that runs as a Spark job (whose tasks read the pages from S3 themselves).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.serve_server import start_serve

pytestmark = pytest.mark.slow

QUERIES = {
    "driver": ("root/+:nodes>1/+/+", "cross=0,1,2,M,A,list", "gather=kJ;sort"),
    "spark": ("+/+/+/+", None, None),
}


def test_a_store_on_s3_answers_as_the_same_store_in_a_folder(
    spark: object, demo_dir: Path, demo_store: Path, s3_bucket: str, tmp_path: Path
) -> None:
    from loaders import load_job, run_load

    on_s3 = f"{s3_bucket}/store"  # the demo loaded there as it is in demo_store's folder
    run_load(spark, load_job(demo_dir / "job.json"), on_s3)  # type: ignore[arg-type]
    stores = {"local": demo_store, "ons3": on_s3}
    server = start_serve(stores, folder=tmp_path)  # type: ignore[arg-type]  # the S3 settings: in os.environ
    try:
        assert f"ons3 ({on_s3})" in server.first_line
        listed = server.get_json("/stores")
        assert [s["location"] for s in listed["stores"]] == [str(demo_store), on_s3]  # type: ignore[index]
        server.wait_for_spark()
        for where, (path, rops, ops) in QUERIES.items():
            answers = []
            for name in stores:
                fields = {"store": name, "path": path, "rops": rops, "ops": ops}
                params = {k: v for k, v in fields.items() if v is not None}
                answer = httpx.get(server.url + "/query", params=params, timeout=120)
                assert answer.status_code == 200, answer.text
                assert answer.headers["x-treestore-where"] == where
                assert answer.headers["x-treestore-version"] == "1"
                answers.append(answer.json())
            assert answers[0] == answers[1] and answers[0]["rows"], where
    finally:
        status = server.stop()
    assert status == 0, server.output()
