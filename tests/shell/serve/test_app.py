"""The app in process (starlette's TestClient; no store, no Spark): the token, the JSON
errors, the routes the OpenAPI document lists, CORS; and the command's refusals, each
one line with exit status 2, before anything starts."""

from __future__ import annotations

import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

with warnings.catch_warnings():  # starlette 1.x would have httpx2; httpx serves here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from shell.serve.app import build_app
from shell.serve.openapi import route_operations
from shell.serve.options import ServeOptions
from shell.serve.stores import Service, SparkStarter
from tests.support.serve_server import ROOT

TOKEN = "a-token-of-some-length-0123456789"


def _client(**options: object) -> TestClient:
    def no_spark() -> object:
        raise AssertionError("no Spark here")

    service = Service(ServeOptions(**options), {}, SparkStarter(no_spark))  # type: ignore[arg-type]
    return TestClient(build_app(service))


def test_every_route_is_in_the_openapi_document() -> None:
    client = _client()
    document = client.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    app_routes = route_operations(client.app.routes)  # type: ignore[attr-defined]
    for path, method in app_routes:
        assert method in document["paths"][path], (path, method)
        assert document["paths"][path][method]["responses"], (path, method)


def test_a_token_is_needed_for_the_api_but_not_the_page() -> None:
    client = _client(token=TOKEN)
    assert client.get("/query", params={"path": "root"}).status_code == 401
    wrong = client.get("/stores", headers={"Authorization": "Bearer wrong"})
    assert wrong.status_code == 401 and "token" in wrong.json()["error"]
    assert wrong.headers["www-authenticate"] == "Bearer"
    right = client.get("/query", headers={"Authorization": f"Bearer {TOKEN}"})
    assert right.status_code == 400  # past the token: no store is served, name one
    assert client.get("/health").status_code == 200
    assert client.get("/").status_code == 200
    assert client.get("/static/index.html").status_code == 200
    for module in sorted((ROOT / "shell/serve/page").glob("*.js")):  # ES modules: as JavaScript
        script = client.get(f"/static/{module.name}")
        assert script.status_code == 200, module.name
        assert script.headers["content-type"].startswith("text/javascript"), module.name


def test_errors_are_json_never_a_500() -> None:
    client = _client()
    assert client.get("/nowhere").json()["error"]
    assert client.get("/nowhere").status_code == 404
    assert client.delete("/query").status_code == 405
    assert client.get("/query", params={"store": "x", "path": "root"}).status_code == 404
    posted = client.post("/query", content=b"not json")
    assert posted.status_code == 400 and "JSON" in posted.json()["error"]
    assert client.post("/query", json=[1, 2]).status_code == 400


def test_cors_only_for_the_origin_given() -> None:
    plain = _client().get("/health", headers={"Origin": "http://elsewhere"})
    assert "access-control-allow-origin" not in plain.headers
    allowed = _client(cors="http://dash").get("/health", headers={"Origin": "http://dash"})
    assert allowed.headers["access-control-allow-origin"] == "http://dash"


def _serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "treestore", "serve", *args],
        capture_output=True, text=True, timeout=120, cwd=cwd,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["STORE", "--host", "0.0.0.0"], "without --token-file"),
        (["MISSING"], "does not exist"),
        (["a=STORE", "a=STORE"], "two stores are named 'a'"),
        (["STORE", "--token-file", "missing.txt"], "cannot read the token file"),
        (["STORE", "--token-file", "short.txt"], "at least 16 characters"),
    ],
)
def test_the_command_refuses_in_one_line(tmp_path: Path, args: list[str], said: str) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "store.json").write_text("{}")
    (tmp_path / "short.txt").write_text("short\n")
    given = [str(store) if a == "STORE" else a.replace("STORE", str(store)) for a in args]
    given = [str(tmp_path / a) if a == "MISSING" else a for a in given]
    done = _serve(*given, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("treestore serve:"), done.stderr
    assert said.lower() in lines[0].lower()


def test_the_listening_socket_sends_without_delay() -> None:
    """TCP_NODELAY on the service's sockets (accepted ones inherit it, and asyncio sets it
    on sockets that say TCP): without it a kept-alive client waits ~40 ms an answer."""
    from shell.serve.command import _bind

    sock = _bind(ServeOptions(port=0))
    try:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        sock.close()


@pytest.mark.parametrize(
    ("limit", "said"),
    [
        ("99999999999999999999", "limit must be at most"),  # found by the HTTP fuzz: was a 500
        (1.5, "limit must be a whole number"),
        ("-1", "limit must be a number at least 0"),
        ("ten", "limit must be a whole number"),
    ],
)
def test_a_limit_out_of_range_is_a_400(limit: object, said: str) -> None:
    from shell.serve.answers import RequestError
    from shell.serve.query_route import parse_fields

    service = Service(ServeOptions(), {"s": None}, SparkStarter(lambda: None))  # type: ignore[dict-item]
    with pytest.raises(RequestError, match=said) as raised:
        parse_fields({"store": "s", "path": "root", "limit": limit}, service)
    assert raised.value.status == 400
