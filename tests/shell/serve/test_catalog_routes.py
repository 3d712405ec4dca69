"""The browse and help calls over HTTP against the real service: their documents, and
their errors' statuses (a store not served, a node no shard has, an unknown op: 404)."""

from __future__ import annotations

import httpx

from tests.support.serve_server import ServeProcess


def _get(serve_server: object, route: str, **params: str) -> httpx.Response:
    assert isinstance(serve_server, ServeProcess)
    return httpx.get(serve_server.url + route, params=params, timeout=60)


def test_the_stores_and_one_stores_info(serve_server: object) -> None:
    stores = _get(serve_server, "/stores").json()["stores"]
    assert [s["name"] for s in stores] == ["demo", "growing"]
    assert _get(serve_server, "/stores/demo").json()["name"] == "demo"
    assert _get(serve_server, "/stores/nothere").status_code == 404


def test_children_paged_and_a_missing_node(serve_server: object) -> None:
    top = _get(serve_server, "/stores/demo/children").json()
    assert [c["name"] for c in top["children"]] == ["root"]
    first = _get(serve_server, "/stores/demo/children", path="root", limit="2").json()
    assert len(first["children"]) == 2 and first["next"]
    rest = _get(serve_server, "/stores/demo/children", path="root", after=first["next"])
    assert first["next"] not in [c["name"] for c in rest.json()["children"]]
    assert _get(serve_server, "/stores/demo/children", path="root/nope").status_code == 404
    assert _get(serve_server, "/stores/demo/children", limit="0").status_code == 400


def test_completions_and_ops(serve_server: object) -> None:
    offered = _get(serve_server, "/complete", store="demo", text="root/1").json()
    assert any(c["text"].startswith("1") for c in offered["completions"])
    assert _get(serve_server, "/ops").json()["ops"]
    assert _get(serve_server, "/ops/sort").json()["help"]
    assert _get(serve_server, "/ops/nosuchop").status_code == 404
    assert _get(serve_server, "/complete", cursor="x").status_code == 400
