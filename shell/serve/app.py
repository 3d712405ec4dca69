"""The service's ASGI application: its routes, the bearer token check, CORS, the page's
files, ``/health``, ``/metrics`` and ``/openapi.json``; :class:`Service` holds what the
routes share (the options, the stores, Spark's start, the metrics, the cache, the slots).

Every answer that is not rows is JSON, errors included; nothing a client sends is
answered with a 500.
"""

from __future__ import annotations

import hmac
import mimetypes
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from shell.serve.answers import error_document
from shell.serve.catalog_routes import CATALOG_ROUTES
from shell.serve.openapi import openapi_document
from shell.serve.query_route import query_endpoint
from shell.serve.stores import Service

__all__ = ["PAGE_FOLDER", "PUBLIC_PATHS", "build_app"]

PAGE_FOLDER = Path(__file__).with_name("page")
"""The page's files (``/`` is its ``index.html``, ``/static/NAME`` the others)."""
# The page's scripts are ES modules: a browser runs one only when it comes as JavaScript, and
# what ``.js`` maps to otherwise depends on the host (a Windows registry may say text/plain).
mimetypes.add_type("text/javascript", ".js")
PUBLIC_PATHS = ("/", "/health", "/favicon.ico")
"""Paths answered without a token (and everything under ``/static/``)."""


class BearerToken:
    """ASGI middleware: API calls must carry ``Authorization: Bearer TOKEN`` (compared in
    constant time); the page, its files and ``/health`` need none."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the call on, or answer 401."""
        if scope["type"] != "http" or self._public(scope) or self._carries_token(scope):
            await self.app(scope, receive, send)
            return
        response = JSONResponse(
            {"error": "This call needs the service's token: Authorization: Bearer TOKEN.",
             "kind": "RequestError"},
            401,
            headers={"WWW-Authenticate": "Bearer"},
        )  # fmt: skip
        await response(scope, receive, send)

    @staticmethod
    def _public(scope: Scope) -> bool:
        path = scope.get("path", "")
        return path in PUBLIC_PATHS or path.startswith("/static/") or scope["method"] == "OPTIONS"

    def _carries_token(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, given = value.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(
                    given.strip(), self.token
                )
        return False


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


async def health(request: Request) -> JSONResponse:
    """``/health``: whether the service answers, and whether Spark is up."""
    service = _service(request)
    return JSONResponse(
        {
            "status": "ok",
            "spark": service.starter.state,
            "stores": list(service.stores),
            "queries_running": len(service.runs),
            "queries_waiting": service.slots.waiting,
            "cache_bytes": service.cache.size,
        }
    )


async def metrics(request: Request) -> Response:
    """``/metrics``: Prometheus' text."""
    from prometheus_client import CONTENT_TYPE_LATEST

    return Response(_service(request).metrics.text(), media_type=CONTENT_TYPE_LATEST)


async def openapi(request: Request) -> JSONResponse:
    """``/openapi.json``: this API as an OpenAPI 3.1 document."""
    return JSONResponse(openapi_document(request.app.routes))


async def page(request: Request) -> Response:
    """``/``: the page."""
    return FileResponse(PAGE_FOLDER / "index.html", headers={"Cache-Control": "no-cache"})


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no such route, method not allowed) as JSON."""
    assert isinstance(exc, HTTPException)
    document = {"error": exc.detail, "kind": "RequestError"}
    return JSONResponse(document, exc.status_code, headers=exc.headers)


async def _unexpected(request: Request, exc: Exception) -> Response:
    """A bug: said as JSON (still a 500: no client should be able to reach it)."""
    return JSONResponse(error_document(exc), 500)


def routes() -> list[BaseRoute]:
    """Every route of the service."""
    return [
        Route("/", page, methods=["GET"], name="page"),
        Route("/query", query_endpoint, methods=["GET", "POST"], name="query"),
        *CATALOG_ROUTES,
        Route("/health", health, methods=["GET"], name="health"),
        Route("/metrics", metrics, methods=["GET"], name="metrics"),
        Route("/openapi.json", openapi, methods=["GET"], name="openapi"),
        Mount("/static", StaticFiles(directory=PAGE_FOLDER), name="static"),
    ]


def build_app(service: Service) -> Starlette:
    """The ASGI application of ``service``."""
    middleware: list[Middleware] = []
    options = service.options
    if options.cors:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=[options.cors],
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type", "If-None-Match"],
                expose_headers=["X-Treestore-Version", "X-Treestore-Where", "ETag"],
            )
        )
    if options.token is not None:
        middleware.append(Middleware(BearerToken, token=options.token))
    handlers: dict[Any, Any] = {HTTPException: _http_error, Exception: _unexpected}
    app = Starlette(routes=routes(), middleware=middleware, exception_handlers=handlers)
    app.state.service = service
    return app
