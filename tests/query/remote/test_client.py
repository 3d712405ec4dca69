"""``treestore.connect`` against a real ``treestore serve`` (the session's
``serve_server``): the same rows, Arrow table and column names as ``treestore.open``'s,
and the service's errors raised as the exception tree, with the same text."""

from __future__ import annotations

from pathlib import Path

import pytest

import treestore
from query.remote.client import error_of
from tests.support.serve_server import ServeProcess
from treestore.errors import OpError, QuerySyntaxError, ServiceError, StoreError

SEED_IN_SPARK = ("+/+:nodes>1/+/+", "cross=1,2,3,M,A,list", "gather=kJ;sort")


def _url(serve_server: object) -> str:
    assert isinstance(serve_server, ServeProcess)
    return serve_server.url


@pytest.mark.parametrize(
    "query", [("root/+:nodes>1/+/+", "cross=0,1,2,M,A,list", "gather=kJ;sort"), SEED_IN_SPARK]
)
def test_connect_gives_the_rows_open_gives(
    serve_server: object, spark: object, demo_store: Path, query: tuple[str, str, str]
) -> None:
    local = treestore.open(demo_store, spark)  # type: ignore[arg-type]
    remote = treestore.connect(_url(serve_server), store="demo")
    assert remote.query(*query).to_list() == local.query(*query).to_list()
    assert remote.query(*query).to_arrow().equals(local.query(*query).to_arrow())
    rows = remote.query(*query)
    assert rows.column_names() == local.query(*query).column_names(2)
    assert sum(b.num_rows for b in rows.batches()) == 3
    assert rows.warnings() == []
    assert list(remote.query(*query).to_pandas().columns) == ["M", "A"]


def test_errors_are_the_exception_tree_with_the_same_text(
    serve_server: object, demo_store: Path
) -> None:
    remote = treestore.connect(_url(serve_server), store="demo")
    with pytest.raises(QuerySyntaxError) as raised:
        remote.query("root/12345/(/+").to_list()
    with pytest.raises(QuerySyntaxError) as local:
        treestore.open(demo_store).plan("root/12345/(/+")
    assert str(raised.value) == str(local.value)
    assert (raised.value.line, raised.value.column) == (1, 13)
    with pytest.raises(OpError):
        remote.query("root/+", ops="nosuchop").to_list()
    with pytest.raises(StoreError):
        treestore.connect(_url(serve_server), store="../demo").query("root").to_list()
    with pytest.raises(ServiceError):  # two stores served: which one?
        treestore.connect(_url(serve_server)).query("root").to_list()


def test_an_unreachable_service_is_a_service_error() -> None:
    from tests.support.serve_server import free_port

    with pytest.raises(ServiceError, match="could not be reached"):
        treestore.connect(f"http://127.0.0.1:{free_port()}").query("root").to_list()


def test_error_documents_map_to_the_tree() -> None:
    assert isinstance(error_of(404, {"error": "x"}), StoreError)
    assert isinstance(error_of(401, {"error": "token"}), ServiceError)
    assert error_of(503, {"error": "busy"}).status == 503  # type: ignore[attr-defined]
