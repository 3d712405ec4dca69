"""What the service answers when it does not answer rows: an error as JSON with its
status, for every error a client can cause (never a 500 for those).

A bad path or ops string is a 400 carrying the same text as the command line prints,
with its line, column, caret and the tokens expected, and the parts a client needs to
raise the same error again (``reason``, ``text``, ``kind``).
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.responses import JSONResponse

from treestore.errors import (
    OpError,
    PositionedError,
    QuerySyntaxError,
    SparkSetupError,
    StoreError,
    TreestoreError,
)

__all__ = [
    "RequestError",
    "error_document",
    "error_response",
    "json_bytes",
    "status_of",
]


class RequestError(TreestoreError):
    """A request the service refuses: its status, text, and the field at fault."""

    def __init__(self, status: int, text: str, field: str | None = None, **extra: Any) -> None:
        super().__init__(text)
        self.status = status
        self.field = field
        self.extra = extra


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as ``None`` (JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def json_bytes(data: Any) -> bytes:
    """``data`` as compact UTF-8 JSON (NaN and infinities as ``null``)."""
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:
        text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"))
    return text.encode()


def error_document(exc: BaseException, field: str | None = None) -> dict[str, Any]:
    """An error as the API's JSON object: ``{"error": TEXT, "kind": CLASS, ...}``; a
    positioned one adds ``field``, ``line``, ``column``, ``caret``, ``reason``, ``text``
    (and ``expected`` for a path)."""
    document: dict[str, Any] = {"error": str(exc), "kind": type(exc).__name__}
    if isinstance(exc, RequestError):
        document["kind"] = "RequestError"
        field = exc.field
        document.update(exc.extra)
    if field is not None:
        document["field"] = field
    if isinstance(exc, PositionedError):
        document.update(
            line=exc.line,
            column=exc.column,
            caret=exc.snippet,
            reason=exc.reason,
            text=exc.text,
            hint=exc.hint,
        )
        document["expected"] = list(getattr(exc, "expected", ()))
    return document


def status_of(exc: BaseException) -> int:
    """The HTTP status of an error raised while answering a request."""
    if isinstance(exc, RequestError):
        return exc.status
    if isinstance(exc, QuerySyntaxError | OpError):
        return 400
    if isinstance(exc, SparkSetupError):
        return 503
    if isinstance(exc, StoreError | TreestoreError):
        return 500 if not isinstance(exc, ValueError) else 400
    return 500


def error_response(
    exc: BaseException, field: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """The JSON response for ``exc`` with its status (see :func:`status_of`)."""
    return JSONResponse(error_document(exc, field), status_of(exc), headers=headers)
