"""``/query`` against a real ``treestore serve`` (the session's ``serve_server``): every
format's rows are ``treestore query``'s, the Arrow stream is ``to_arrow()``, errors have
their status and the CLI's text, limit, timeout, a client gone cancels the Spark job,
a new version is read by the next query, conditional requests and the cache."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow.ipc as ipc
import pytest

from shell.output.formats import write_rows
from tests.support.serve_server import ServeProcess

SEED = ("root/+:nodes>1/+/+", "cross=0,1,2,M,A,list", "gather=kJ;sort")
"""The seed's query: its path starts with a name lookup, so the driver walks it."""
SEED_IN_SPARK = ("+/+:nodes>1/+/+", "cross=1,2,3,M,A,list", "gather=kJ;sort")
"""The same join from a path with no leading name lookup: it runs as a Spark job."""
SCAN = ("+/+/+/+", None, None)
QUERIES = {"seed": SEED, "seed-in-spark": SEED_IN_SPARK, "scan": SCAN}


def _server(serve_server: object) -> ServeProcess:
    assert isinstance(serve_server, ServeProcess)
    return serve_server


def _get(server: ServeProcess, **fields: Any) -> httpx.Response:
    params = {k: v for k, v in fields.items() if v is not None}
    return httpx.get(server.url + "/query", params=params, timeout=120)


def _local(spark: object, store: Path, query: tuple[str, str | None, str | None]) -> Any:
    import treestore

    return treestore.open(store, spark).query(*query)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_format_gives_treestore_querys_rows(
    serve_server: object, spark: object, demo_store: Path, name: str
) -> None:
    server, query = _server(serve_server), QUERIES[name]
    rows = _local(spark, demo_store, query)
    expected = [list(r) for r in rows]
    columns = rows.column_names(len(expected[0]))
    where = "driver" if name == "seed" else "spark"
    fields = {"store": "demo", "path": query[0], "rops": query[1], "ops": query[2]}
    answer = _get(server, **fields, format="json")
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-treestore-where"] == where
    document = answer.json()
    assert document["rows"] == expected and document["columns"] == columns
    assert document["complete"] is True and document["version"] == 1
    lines = [json.loads(line) for line in _get(server, **fields, format="jsonl").text.splitlines()]
    assert lines[0] == {"columns": columns, "version": 1}
    assert lines[1:-1] == expected and lines[-1]["complete"] is True
    for fmt in ("csv", "tsv"):
        printed = io.StringIO()  # what `treestore query --format FMT` prints
        write_rows(_local(spark, demo_store, query), printed, fmt, columns=columns)
        assert _get(server, **fields, format=fmt).text == printed.getvalue()
    arrow = ipc.open_stream(_get(server, **fields, format="arrow").content).read_all()
    assert arrow.equals(_local(spark, demo_store, query).to_arrow())
    posted = httpx.post(server.url + "/query", json={**fields, "format": "json"}, timeout=120)
    assert posted.json()["rows"] == expected


def test_hydra_names_and_the_one_store_default_are_accepted(serve_server: object) -> None:
    server = _server(serve_server)
    answer = _get(server, job="demo", q="root/+:+hits")
    assert answer.status_code == 200 and answer.json()["rows"]
    assert _get(server, path="root").status_code == 400  # two stores: name one


def test_a_bad_path_is_a_400_with_the_command_lines_text(
    serve_server: object, demo_store: Path
) -> None:
    import treestore
    from treestore.errors import OpError, QuerySyntaxError

    server = _server(serve_server)
    answer = _get(server, store="demo", path="root/12345/(/+")
    assert answer.status_code == 400
    document = answer.json()
    with pytest.raises(QuerySyntaxError) as raised:
        treestore.open(demo_store).plan("root/12345/(/+")
    assert document["error"] == str(raised.value)
    assert (document["line"], document["column"], document["field"]) == (1, 13, "path")
    assert document["caret"].endswith("^") and document["expected"]
    bad_ops = _get(server, store="demo", path="root/+", ops="sort;nosuchop=1").json()
    with pytest.raises(OpError) as raised_op:
        treestore.open(demo_store).plan("root/+", None, "sort;nosuchop=1")
    assert bad_ops["error"] == str(raised_op.value) and bad_ops["field"] == "ops"
    assert _get(server, store="demo", path="root", format="xml").json()["field"] == "format"
    assert _get(server, store="demo", path="root", limit="many").status_code == 400


@pytest.mark.parametrize(
    "store", ["../demo", "/etc", "file:///etc", "s3://bucket/demo", "demo/..", "%2e%2e"]
)
def test_a_store_name_is_never_a_path(serve_server: object, store: str) -> None:
    answer = _get(_server(serve_server), store=store, path="root")
    assert answer.status_code == 404 and answer.json()["field"] == "store"


def test_too_long_is_a_413(serve_server: object) -> None:
    server = _server(serve_server)
    assert _get(server, store="demo", path="a" * 20_000).status_code == 413
    body = json.dumps({"store": "demo", "path": "root", "pad": "x" * 100_000})
    too_big = httpx.post(server.url + "/query", content=body, timeout=60)
    assert too_big.status_code == 413


def test_limit_stops_the_rows(serve_server: object) -> None:
    server = _server(serve_server)
    for fmt in ("json", "arrow"):
        answer = _get(server, store="demo", path="+/+/+/+", format=fmt, limit=3)
        if fmt == "json":
            assert len(answer.json()["rows"]) == 3
        else:
            assert ipc.open_stream(answer.content).read_all().num_rows == 3


def _spark_jobs(server: ServeProcess) -> float:
    text = httpx.get(server.url + "/metrics", timeout=30).text
    line = next(x for x in text.splitlines() if x.startswith("treestore_spark_jobs_running"))
    return float(line.split()[-1])


def _until(check: Any, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def test_a_query_past_its_timeout_is_a_504_and_cancelled(serve_server: object) -> None:
    server = _server(serve_server)
    server.wait_for_spark()
    answer = _get(server, store="demo", path="+/+/+/+", rops="sleep=3000", timeout="0.5")
    assert answer.status_code == 504
    assert "timeout" in answer.json()["error"]
    assert _until(lambda: _spark_jobs(server) == 0)


def test_a_client_gone_mid_stream_cancels_the_spark_job(serve_server: object) -> None:
    server = _server(serve_server)
    server.wait_for_spark()
    params = {"store": "demo", "path": "+/+/+/+", "rops": "sleep=500", "format": "jsonl"}
    with httpx.stream("GET", server.url + "/query", params=params, timeout=120) as answer:
        assert answer.status_code == 200
        lines = answer.iter_lines()
        assert json.loads(next(lines))["columns"]  # the header: the first row is here
        assert _spark_jobs(server) >= 1
    assert _until(lambda: _spark_jobs(server) == 0)


def test_the_first_chunk_holds_the_head_and_the_first_row(serve_server: object) -> None:
    """Rows a shard at a time, half a second a row: the answer's first chunk leaves with
    the first rows in it (not only the head), and the rest come later."""
    server = _server(serve_server)
    server.wait_for_spark()
    params = {"store": "demo", "path": "+/+/+/+", "rops": "sleep=500", "format": "jsonl"}
    with httpx.stream("GET", server.url + "/query", params=params, timeout=120) as answer:
        first = next(answer.iter_raw())
    lines = [json.loads(line) for line in first.decode().splitlines()]
    assert lines[0]["columns"] and len(lines) >= 2  # the head, then rows
    assert all(isinstance(line, list) for line in lines[1:])  # not yet the ending


def test_a_client_gone_before_the_first_row_cancels_the_spark_job(serve_server: object) -> None:
    server = _server(serve_server)
    server.wait_for_spark()
    params = {"store": "demo", "path": "+/+/+/+", "rops": "sleep=600000"}  # ten minutes a row
    with pytest.raises(httpx.ReadTimeout):  # the client gives up before any row
        httpx.get(server.url + "/query", params=params, timeout=httpx.Timeout(30, read=3))
    assert _until(lambda: _spark_jobs(server) == 0)  # long before the sleep could end


def test_the_next_query_reads_a_new_version(serve_server: object, spark: object) -> None:
    from loaders import load_job, run_load

    server = _server(serve_server)
    first = _get(server, store="growing", path="root/+")
    assert first.headers["x-treestore-version"] == "1"
    assert ["99999"] not in first.json()["rows"]
    store = server.stores["growing"]
    (store.parent / "attributes" / "attributes-0002.tsv").write_text(
        "TIME\tUID\tATTRIBUTE_IDS\n1419441690000\t99999\t7\n"
    )
    run_load(spark, load_job(store.parent / "job.json"), store)  # type: ignore[arg-type]
    second = _get(server, store="growing", path="root/+")
    assert second.headers["x-treestore-version"] == "2"
    assert ["99999"] in second.json()["rows"]
    assert second.headers["etag"] != first.headers["etag"]


def test_a_repeated_query_is_not_modified_or_cached(serve_server: object) -> None:
    server = _server(serve_server)
    first = _get(server, store="demo", path="root/+:+hits", format="csv")
    etag = first.headers["etag"]
    again = httpx.get(
        server.url + "/query",
        params={"store": "demo", "path": "root/+:+hits", "format": "csv"},
        headers={"If-None-Match": etag},
    )
    assert again.status_code == 304
    cached = _get(server, store="demo", path="root/+:+hits", format="csv")
    assert cached.text == first.text
    metrics = httpx.get(server.url + "/metrics").text
    assert 'treestore_queries_total{outcome="cached"}' in metrics


def test_health_says_spark_and_openapi_lists_the_query(serve_server: object) -> None:
    server = _server(serve_server)
    health = server.get_json("/health")
    assert health["spark"] in ("starting", "up")  # type: ignore[index]
    document = server.get_json("/openapi.json")
    assert {"get", "post"} <= set(document["paths"]["/query"])  # type: ignore[index]
