"""The browse and help calls over HTTP: ``/stores``, ``/stores/NAME``,
``/stores/NAME/children``, ``/complete``, ``/ops``, ``/ops/NAME``.

The documents are :mod:`shell.serve.catalog`'s (pure functions); here only the fields are
read and checked, the store found (a name, never a path: 404 otherwise), the blocking
reads run in a thread, and errors mapped to their status.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shell.serve.answers import RequestError, error_response
from treestore.errors import NodeNotFoundError, OpError

if TYPE_CHECKING:
    from query.driver.runner import QueryStore
    from shell.serve.stores import Service

__all__ = ["CATALOG_ROUTES", "DEFAULT_CHILDREN", "MAX_CHILDREN"]

DEFAULT_CHILDREN = 100
"""Children a ``/stores/NAME/children`` page holds unless ``limit`` says."""
MAX_CHILDREN = 10_000
"""The most children one page may ask for."""


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


async def _newest(request: Request, name: str) -> QueryStore:
    service = _service(request)
    served = service.stores.get(name)
    if served is None:
        raise RequestError(404, f"No store named {name!r} is served.", "store")
    return await anyio.to_thread.run_sync(served.newest, service.starter)


def _whole(request: Request, name: str, default: int, most: int) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    if not text.isdigit() or not 1 <= int(text) <= most:
        raise RequestError(400, f"{name} must be a whole number from 1 to {most}.", name)
    return int(text)


async def _answered(work: Callable[[], Any]) -> Response:
    """The JSON of ``await work()``'s document, or its error with its status."""
    try:
        return JSONResponse(await work())
    except RequestError as exc:
        return error_response(exc)
    except OpError as exc:  # an unknown op
        return error_response(RequestError(404, str(exc), "name"))
    except NodeNotFoundError as exc:  # a node no shard has
        return error_response(RequestError(404, str(exc), "path"))
    except ValueError as exc:
        return error_response(RequestError(400, str(exc)))


async def stores(request: Request) -> Response:
    """``/stores``: the served stores, their versions and shards."""
    from shell.serve.catalog import store_summary

    async def work() -> dict[str, Any]:
        found = [(name, await _newest(request, name)) for name in _service(request).stores]
        return {"stores": [store_summary(name, store) for name, store in found]}

    return await _answered(work)


async def store(request: Request) -> Response:
    """``/stores/NAME``: what ``treestore info`` says, as JSON."""
    from shell.serve.catalog import store_document

    name = request.path_params["name"]

    async def work() -> dict[str, Any]:
        handle = await _newest(request, name)
        return await anyio.to_thread.run_sync(store_document, name, handle)

    return await _answered(work)


async def children(request: Request) -> Response:
    """``/stores/NAME/children?path=A/B&after=NAME&limit=N``: one node's children."""
    from shell.serve.catalog import children_document

    name = request.path_params["name"]

    async def work() -> dict[str, Any]:
        handle = await _newest(request, name)
        text = request.query_params.get("path", "")
        path = [unquote(part) for part in text.split("/")] if text else []
        after = request.query_params.get("after") or None
        limit = _whole(request, "limit", DEFAULT_CHILDREN, MAX_CHILDREN)
        return await anyio.to_thread.run_sync(children_document, name, handle, path, after, limit)

    return await _answered(work)


async def complete(request: Request) -> Response:
    """``/complete?store=NAME&text=TEXT&cursor=N``: what the shell's Tab offers there."""
    from shell.serve.catalog import completions_document

    async def work() -> dict[str, Any]:
        name = request.query_params.get("store")
        handle = None if not name else await _newest(request, name)
        text = request.query_params.get("text", "")
        max_chars = _service(request).options.max_field_chars
        if len(text) > max_chars:
            raise RequestError(413, f"text is over {max_chars} characters.", "text")
        cursor_text = request.query_params.get("cursor")
        if cursor_text in (None, ""):
            cursor = len(text)
        elif cursor_text.isdigit():
            cursor = int(cursor_text)
        else:
            raise RequestError(400, "cursor must be a whole number.", "cursor")
        return await anyio.to_thread.run_sync(completions_document, handle, text, cursor)

    return await _answered(work)


async def ops(request: Request) -> Response:
    """``/ops``: the op catalogue."""
    from shell.serve.catalog import ops_document

    async def work() -> dict[str, Any]:
        return ops_document()

    return await _answered(work)


async def op(request: Request) -> Response:
    """``/ops/NAME``: one op's help."""
    from shell.serve.catalog import op_document

    async def work() -> dict[str, Any]:
        return op_document(request.path_params["name"])

    return await _answered(work)


CATALOG_ROUTES = [
    Route("/stores", stores, methods=["GET"], name="stores"),
    Route("/stores/{name}", store, methods=["GET"], name="store"),
    Route("/stores/{name}/children", children, methods=["GET"], name="children"),
    Route("/complete", complete, methods=["GET"], name="complete"),
    Route("/ops", ops, methods=["GET"], name="ops"),
    Route("/ops/{name}", op, methods=["GET"], name="op"),
]
"""The catalog's routes, in the order the OpenAPI document lists them."""
