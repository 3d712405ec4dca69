"""``GET /query`` and ``POST /query``: the fields read and checked, the answer from the
cache or a conditional request when it can be, else the query run and streamed.

Blocking work (reading ``CURRENT``, planning, the rows) runs in threads; the event loop
only moves chunks. A query holds one of ``--max-concurrent`` slots from its start to its
last byte; a bounded number wait for one, past them a 503 with ``Retry-After``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from query.driver.plan import QueryPlan, QueryRequest
from shell.serve.answers import RequestError, error_response, status_of
from shell.serve.encoders import FORMATS, MEDIA_TYPES, Encoding, encode_rows
from shell.serve.running import Kind, QueryRun, Started, stop_error
from treestore.errors import PositionedError

if TYPE_CHECKING:
    from shell.serve.stores import Service

__all__ = ["QueryFields", "query_endpoint", "read_fields"]

STOP_GRACE_SECONDS = 5.0
"""How long a stopped query's thread may take to end its body before the answer is cut."""
_UNWATCHED_SECONDS = 0.05
"""How long a query's first item is awaited before a client gone is watched for too."""
_OUTCOMES = {
    400: "bad_request", 404: "not_found", 413: "too_large", 499: "cancelled", 503: "busy",
    504: "timeout",
}  # fmt: skip


@dataclass(frozen=True)
class QueryFields:
    """A ``/query`` request's fields, checked."""

    store: str
    path: str
    rops: str | None
    ops: str | None
    format: str
    limit: int | None
    timeout: float

    def key(self, version: int) -> tuple[object, ...]:
        """The result cache's key at ``version``."""
        return (self.store, version, self.path, self.rops, self.ops, self.format, self.limit)

    def etag(self, version: int) -> str:
        """The answer's entity tag at ``version`` (store, version, query and format)."""
        digest = hashlib.sha256(json.dumps(self.key(version)).encode()).hexdigest()[:32]
        return f'"{digest}"'


async def read_fields(request: Request, max_body: int) -> Mapping[str, Any]:
    """The request's fields: the query string's (GET) or the JSON body's (POST)."""
    if request.method != "POST":
        return request.query_params
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_body:
        raise RequestError(413, f"The request body is over {max_body} bytes.")
    body = b""
    async for part in request.stream():
        body += part
        if len(body) > max_body:
            raise RequestError(413, f"The request body is over {max_body} bytes.")
    try:
        fields = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(400, f"The body is not JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise RequestError(400, "The body must be a JSON object of the query's fields.")
    return fields


def _text(fields: Mapping[str, Any], names: tuple[str, ...], max_chars: int) -> str | None:
    for name in names:
        value = fields.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise RequestError(400, f"{name} must be text.", names[0])
        if len(value) > max_chars:
            raise RequestError(413, f"{name} is over {max_chars} characters.", names[0])
        return value
    return None


def _number(fields: Mapping[str, Any], name: str, whole: bool) -> float | None:
    value = fields.get(name)
    if value is None or value == "":
        return None
    kind = "a whole number" if whole else "a number"
    try:
        if whole and isinstance(value, float) and not value.is_integer():
            raise ValueError(value)  # a JSON body's 1.5: not silently 1
        number = int(value) if whole else float(value)
    except (TypeError, ValueError, OverflowError):
        raise RequestError(400, f"{name} must be {kind}, not {value!r}.", name) from None
    if isinstance(value, bool) or not number >= 0 or number == float("inf"):
        raise RequestError(400, f"{name} must be a number at least 0, not {value!r}.", name)
    if number > sys.maxsize:
        raise RequestError(400, f"{name} must be at most {sys.maxsize}, not {value!r}.", name)
    return number


def parse_fields(fields: Mapping[str, Any], service: Service) -> QueryFields:
    """The checked fields of a ``/query`` request (Hydra's ``q`` and ``job`` accepted)."""
    options = service.options
    most = options.max_field_chars
    store = _text(fields, ("store", "job"), most)
    if store is None:
        if len(service.stores) != 1:
            raise RequestError(
                400, f"Name the store: one of {', '.join(sorted(service.stores))}.", "store"
            )
        store = next(iter(service.stores))
    if store not in service.stores:
        raise RequestError(
            404, f"No store named {store!r} is served (served: {', '.join(service.stores)}).",
            "store",
        )  # fmt: skip
    path = _text(fields, ("path", "q"), most)
    if path is None:
        raise RequestError(400, "The query has no path.", "path")
    fmt = _text(fields, ("format",), most) or "json"
    if fmt not in FORMATS:
        raise RequestError(400, f"Unknown format {fmt!r}: one of {', '.join(FORMATS)}.", "format")
    limit = _number(fields, "limit", whole=True)
    timeout = _number(fields, "timeout", whole=False)
    if timeout == 0:
        raise RequestError(400, "timeout must be above 0.", "timeout")
    return QueryFields(
        store=store,
        path=path,
        rops=_text(fields, ("rops",), most) or None,
        ops=_text(fields, ("ops",), most) or None,
        format=fmt,
        limit=None if limit is None else int(limit),
        timeout=min(timeout or options.default_timeout, options.max_timeout),
    )


def _field_of(exc: PositionedError, fields: QueryFields) -> str:
    """Which field a syntax or op error is about (its text tells)."""
    for name in ("path", "rops", "ops"):
        if exc.text and exc.text == getattr(fields, name):
            return name
    return "path" if type(exc).__name__ == "QuerySyntaxError" else "ops"


async def query_endpoint(request: Request) -> Response:
    """``/query``: the rows of a path query, streamed in the asked format."""
    service: Service = request.app.state.service
    started = time.monotonic()
    fields: QueryFields | None = None
    try:
        raw = await read_fields(request, service.options.max_body_bytes)
        fields = parse_fields(raw, service)
        return await _answer(request, service, fields, started)
    except Exception as exc:
        status = status_of(exc)
        service.metrics.queries.labels(_OUTCOMES.get(status, "failed")).inc()
        field = _field_of(exc, fields) if isinstance(exc, PositionedError) and fields else None
        headers = {"Retry-After": "1"} if status == 503 else None
        return error_response(exc, field, headers)


async def _answer(
    request: Request, service: Service, fields: QueryFields, started: float
) -> Response:
    served = service.stores[fields.store]
    handle = await anyio.to_thread.run_sync(served.newest, service.starter)
    version = handle.version
    etag = fields.etag(version)
    headers = {
        "X-Treestore-Version": str(version),
        "ETag": etag,
        "Cache-Control": "no-cache",
    }
    asked = request.headers.get("if-none-match", "")
    if etag in [tag.strip() for tag in asked.split(",")] or asked.strip() == "*":
        service.metrics.queries.labels("not_modified").inc()
        return Response(status_code=304, headers=headers)
    key = fields.key(version)
    cached = service.cache.get(key)
    if cached is not None:
        service.metrics.queries.labels("cached").inc()
        service.metrics.cache_hits.inc()
        service.metrics.bytes_sent.inc(len(cached.body))
        service.metrics.rows_sent.inc(cached.rows)
        headers["X-Treestore-Where"] = cached.where
        return Response(cached.body, 200, headers, MEDIA_TYPES[fields.format])
    await _take_slot(request, service, started + fields.timeout, fields.timeout)
    handed_over = False
    try:
        if service.stopping:  # it waited for its slot while the service began to stop
            raise stop_error("shutdown")
        request_ = QueryRequest(fields.path, fields.rops, fields.ops)
        made: list[tuple[QueryPlan, Encoding]] = []

        def prepare(run: QueryRun) -> Started:  # in the query's thread
            plan = handle.plan_request(request_)
            encoding = Encoding(handle.run(plan), version, fields.limit, run.stopped, run.reported)
            made.append((plan, encoding))
            chunks = encode_rows(encoding, fields.format)
            return Started(encoding.rows, chunks, gather=plan.where == "driver")

        run = QueryRun(prepare, service.options.buffer_chunks, fields.timeout)
        service.runs.add(run)
        run.start()
        try:
            kind, item = await _first_item(
                request, run, started + fields.timeout - time.monotonic()
            )
        except TimeoutError:
            run.stop("timeout")
            service.runs.discard(run)
            raise RequestError(
                504, f"The query ran past its timeout of {fields.timeout:g} s: cancelled."
            ) from None
        if kind not in ("chunk", "whole"):
            service.runs.discard(run)
            if isinstance(item, BaseException):
                raise item
            raise RequestError(500, "The query ended without an answer.")
        assert isinstance(item, bytes)
        plan, encoding = made[0]
        headers["X-Treestore-Where"] = plan.where

        def done(outcome: str, sent: int) -> None:
            service.slots.release()
            service.runs.discard(run)
            metrics = service.metrics
            metrics.queries.labels(outcome).inc()
            metrics.latency.observe(time.monotonic() - started)
            metrics.rows_sent.inc(encoding.sent_rows)
            metrics.bytes_sent.inc(sent)

        def keep(body: bytes) -> None:
            service.cache.put(key, body, encoding.sent_rows, plan.where)

        handed_over = True
        if kind == "whole":  # a small answer, all here: no stream
            done("ok" if encoding.complete else "failed", len(item))
            if encoding.complete and service.cache.enabled:
                keep(item)
            return Response(item, 200, headers, MEDIA_TYPES[fields.format])
        return QueryStream(
            item, run, encoding, started + fields.timeout, headers, MEDIA_TYPES[fields.format],
            done, keep if service.cache.enabled else None, service.cache.max_entry_bytes,
        )  # fmt: skip
    finally:
        if not handed_over:
            service.slots.release()


async def _take_slot(request: Request, service: Service, deadline: float, timeout: float) -> None:
    """Take a query slot, waiting in the bounded queue when none is free: a full queue is
    a 503, the query's timeout passing while it waits a 504, and a client that goes away
    gives up its place (no query is started for it)."""
    slots = service.slots
    if not slots.must_wait():
        await slots.acquire()  # at once
        return
    acquired = gone = False

    async def watch() -> None:
        nonlocal gone
        while (await request.receive())["type"] != "http.disconnect":
            pass
        gone = True
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        with anyio.move_on_after(max(deadline - time.monotonic(), 0.0)):
            await slots.wait()
            acquired = True
        group.cancel_scope.cancel()
    if acquired and gone:
        slots.release()
    if not acquired or gone:
        raise stop_error("disconnect" if gone else "timeout", timeout)


async def _first_item(
    request: Request, run: QueryRun, wait: float
) -> tuple[Kind, bytes | BaseException | None]:
    """The query's first item, or its stop if the client goes away first (a query whose
    first row takes long, a slow Spark job, is cancelled as soon as its client leaves)."""

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        run.stop("disconnect")

    with contextlib.suppress(TimeoutError):  # most answers come at once: no watch needed
        return await run.next(min(wait, _UNWATCHED_SECONDS))
    wait -= _UNWATCHED_SECONDS
    first: tuple[Kind, bytes | BaseException | None] | None = None
    async with anyio.create_task_group() as group:  # raised in here: an ExceptionGroup
        group.start_soon(watch)
        with contextlib.suppress(TimeoutError):
            first = await run.next(wait)
        group.cancel_scope.cancel()
    if first is None:
        raise TimeoutError
    return first


class QueryStream(Response):
    """A query's answer as its chunks come: stops the query when the client goes away or
    its timeout passes, and hands a complete answer to the cache (``keep``, when the
    answer is at most ``keep_bytes``)."""

    def __init__(
        self,
        first: bytes,
        run: QueryRun,
        encoding: Encoding,
        deadline: float,
        headers: dict[str, str],
        media_type: str,
        done: Callable[[str, int], None],
        keep: Callable[[bytes], None] | None,
        keep_bytes: int = 0,
    ) -> None:
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.init_headers(headers)
        self._run, self._encoding, self._deadline = run, encoding, deadline
        self._done, self._keep, self._keep_bytes = done, keep, keep_bytes
        self._first = first
        self._sent = 0
        self._kept: list[bytes] | None = [] if keep is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the chunks; a client gone or the timeout stops the query."""
        run, outcome = self._run, "cancelled"
        try:
            async with anyio.create_task_group() as group:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    run.stop("disconnect")
                    group.cancel_scope.cancel()

                group.start_soon(watch)
                start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
                await send(start)
                await self._send(send, self._first)
                outcome = await self._rest(send)
                if outcome == "ok" and self._kept is not None and self._keep is not None:
                    self._keep(b"".join(self._kept))
                group.cancel_scope.cancel()
        except OSError:  # the client went away while a chunk was being sent
            pass
        finally:
            if outcome != "ok":
                run.stop("disconnect")
            self._done(outcome, self._sent)

    async def _send(self, send: Send, chunk: bytes) -> None:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        self._sent += len(chunk)
        if self._kept is not None:
            self._kept.append(chunk)
            if self._sent > self._keep_bytes:
                self._kept = None  # too big to cache

    async def _rest(self, send: Send) -> str:
        """Send the chunks after the first; the outcome (``ok``, ``timeout``, ``failed``)."""
        run = self._run
        while True:
            stopping = run.stop_reason is not None
            wait = STOP_GRACE_SECONDS if stopping else self._deadline - time.monotonic()
            try:
                kind, item = await run.next(wait)
            except TimeoutError:
                if run.stop_reason is None:
                    run.stop("timeout")
                    continue
                return "timeout" if run.stop_reason == "timeout" else "failed"
            if kind == "chunk":
                assert isinstance(item, bytes)
                await self._send(send, item)
                continue
            if kind == "error":  # csv, tsv: cut short (the client sees it incomplete)
                return "timeout" if run.stop_reason == "timeout" else "failed"
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            if run.stop_reason == "timeout":
                return "timeout"
            return "ok" if self._encoding.complete else "failed"
