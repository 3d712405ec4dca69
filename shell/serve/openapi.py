"""``/openapi.json``: the service's API as an OpenAPI 3.1 document, built from the app's
routes (so no route is left out) and the descriptions here (``docs/serve.md`` says the
same in prose)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Mount, Route

__all__ = ["openapi_document"]

_ERROR = {"$ref": "#/components/schemas/Error"}
_JSON_ERROR = {"content": {"application/json": {"schema": _ERROR}}}


def _text(name: str, description: str, required: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": {"type": "string"},
    }


def _in_path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _number(name: str, description: str, kind: str = "integer") -> dict[str, Any]:
    return {"name": name, "in": "query", "description": description, "schema": {"type": kind}}


QUERY_PARAMETERS = [
    _text("store", "a served store's name (Hydra's `job` too); optional with one store"),
    _text("path", "the path, as for `treestore query` (Hydra's `q` too)", required=False),
    _text("rops", "ops run on each shard"),
    _text("ops", "ops run on the driver over every shard's rows"),
    {
        "name": "format",
        "in": "query",
        "description": "the body's format",
        "schema": {"type": "string", "enum": ["json", "jsonl", "csv", "tsv", "arrow"]},
    },
    _number("limit", "at most this many rows; the query stops when met"),
    _number("timeout", "seconds (default 300, capped by --max-timeout)", "number"),
]
ROWS = {
    "description": "the rows, streamed as they arrive",
    "headers": {
        "X-Treestore-Version": {"schema": {"type": "integer"}},
        "X-Treestore-Where": {"schema": {"type": "string", "enum": ["driver", "spark"]}},
        "ETag": {"schema": {"type": "string"}},
    },
    "content": {
        media: {"schema": {"type": "string"}}
        for media in (
            "application/x-ndjson",
            "text/csv",
            "text/tab-separated-values",
            "application/vnd.apache.arrow.stream",
        )
    }
    | {"application/json": {"schema": {"$ref": "#/components/schemas/Rows"}}},
}
QUERY_ANSWERS = {
    "200": ROWS,
    "304": {"description": "not modified: the same store version, query and format"},
    "400": {"description": "a bad path, ops string or field", **_JSON_ERROR},
    "401": {"description": "no or a wrong token", **_JSON_ERROR},
    "404": {"description": "a store that is not served", **_JSON_ERROR},
    "413": {"description": "a request or field too long", **_JSON_ERROR},
    "503": {"description": "too many queries at once (see Retry-After)", **_JSON_ERROR},
    "504": {"description": "the query ran past its timeout", **_JSON_ERROR},
}


def _json(description: str, *errors: str) -> dict[str, Any]:
    answers: dict[str, Any] = {
        "200": {"description": description, "content": {"application/json": {}}}
    }
    for status in errors:
        answers[status] = {"description": "see the error's text", **_JSON_ERROR}
    return answers


DESCRIBED: dict[tuple[str, str], dict[str, Any]] = {
    ("/", "get"): {
        "summary": "the page: browse trees, run queries",
        "security": [],
        "responses": {"200": {"description": "HTML", "content": {"text/html": {}}}},
    },
    ("/query", "get"): {
        "summary": "run a path query; the rows streamed",
        "parameters": QUERY_PARAMETERS,
        "responses": QUERY_ANSWERS,
    },
    ("/query", "post"): {
        "summary": "run a path query (the fields as a JSON object); the rows streamed",
        "requestBody": {
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Query"}}}
        },
        "responses": QUERY_ANSWERS,
    },
    ("/stores", "get"): {
        "summary": "the served stores: name, location, version, shards",
        "responses": _json("the stores"),
    },
    ("/stores/{name}", "get"): {
        "summary": "what `treestore info` says of a store, as JSON",
        "parameters": [_in_path("name")],
        "responses": _json("the store's info", "404"),
    },
    ("/stores/{name}/children", "get"): {
        "summary": "one node's children, in name order across the shards, paged",
        "parameters": [
            _in_path("name"),
            _text("path", "the node's names joined by '/', each percent-encoded (empty: top)"),
            _text("after", "the page starts after this name"),
            _number("limit", "children per page (default 100)"),
        ],
        "responses": _json("the children", "400", "404"),
    },
    ("/complete", "get"): {
        "summary": "what the shell's Tab offers at the cursor",
        "parameters": [
            _text("store", "a served store's name (node names come from it)"),
            _text("text", "the line"),
            _number("cursor", "the cursor's place in the text (default: its end)"),
        ],
        "responses": _json("the completions", "400", "404"),
    },
    ("/ops", "get"): {"summary": "the op catalogue", "responses": _json("the ops")},
    ("/ops/{name}", "get"): {
        "summary": "one op's help",
        "parameters": [_in_path("name")],
        "responses": _json("the op's help", "404"),
    },
    ("/health", "get"): {
        "summary": "whether the service answers and Spark is up (no token needed)",
        "security": [],
        "responses": _json("{status, spark: starting|up|failed, ...}"),
    },
    ("/metrics", "get"): {
        "summary": "Prometheus metrics",
        "responses": {"200": {"description": "Prometheus text", "content": {"text/plain": {}}}},
    },
    ("/openapi.json", "get"): {
        "summary": "this document",
        "responses": _json("OpenAPI 3.1"),
    },
    ("/static/{file}", "get"): {
        "summary": "the page's files (no token needed)",
        "security": [],
        "parameters": [_in_path("file")],
        "responses": {"200": {"description": "the file"}, "404": {"description": "no such file"}},
    },
}

COMPONENTS = {
    "schemas": {
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {
                "error": {"type": "string"},
                "kind": {"type": "string"},
                "field": {"type": "string"},
                "line": {"type": "integer"},
                "column": {"type": "integer"},
                "caret": {"type": "string"},
                "expected": {"type": "array", "items": {"type": "string"}},
                "reason": {"type": "string"},
                "text": {"type": "string"},
            },
        },
        "Rows": {
            "type": "object",
            "properties": {
                "columns": {"type": "array", "items": {"type": "string"}},
                "version": {"type": "integer"},
                "rows": {"type": "array", "items": {"type": "array"}},
                "complete": {"type": "boolean"},
                "error": _ERROR,
            },
        },
        "Query": {
            "type": "object",
            "properties": {p["name"]: p["schema"] for p in QUERY_PARAMETERS},
        },
    },
    "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
}


def route_operations(routes: Sequence[BaseRoute]) -> list[tuple[str, str]]:
    """Every (path, method) the routes answer, as OpenAPI names them."""
    found = []
    for route in routes:
        if isinstance(route, Route):
            for method in sorted(route.methods or ()):
                if method != "HEAD":
                    found.append((route.path, method.lower()))
        elif isinstance(route, Mount):
            found.append((route.path + "/{file}", "get"))
    return found


def openapi_document(routes: Sequence[BaseRoute]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``routes`` (a route without a description here is
    still listed, with its name)."""
    paths: dict[str, dict[str, Any]] = {}
    for path, method in route_operations(routes):
        operation = DESCRIBED.get((path, method), {"summary": path, "responses": {}})
        paths.setdefault(path, {})[method] = operation
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "treestore serve",
            "version": "1",
            "description": "Path queries over keyed-tree stores (see docs/serve.md).",
        },
        "paths": paths,
        "components": COMPONENTS,
        "security": [{"bearer": []}],
    }
