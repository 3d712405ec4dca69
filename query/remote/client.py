"""``treestore.connect(URL)``: a running ``treestore serve``'s store, queried over HTTP.

Rows come from the service's Arrow stream (``format=arrow``) as it arrives: iterating
gives tuples, :meth:`RemoteRows.batches` Arrow batches, :meth:`RemoteRows.to_arrow` the
table ``Rows.to_arrow()`` gives on the service's side. Errors are the exception tree's:
a 400 for a bad path is the :class:`~treestore.errors.QuerySyntaxError` the service
raised (the same text and caret), a store not served a :class:`StoreError`, the rest a
:class:`~treestore.errors.ServiceError` with its status.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pyarrow as pa
import pyarrow.ipc as ipc

from treestore.errors import (
    OpError,
    QuerySyntaxError,
    ServiceError,
    SparkSetupError,
    StoreError,
    TreestoreError,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RemoteRows", "RemoteStore", "connect", "error_of"]

Value = Any
CONNECT_SECONDS = 10.0
"""How long connecting to the service may take."""


def error_of(status: int | None, document: dict[str, Any]) -> TreestoreError:
    """The exception an error answer of the service stands for (see the module's text)."""
    kind = document.get("kind")
    text = str(document.get("error", f"the service answered {status}"))
    if kind in ("QuerySyntaxError", "OpError") and "reason" in document:
        where = (
            str(document.get("reason", "")), str(document.get("text", "")),
            int(document.get("line", 1)), int(document.get("column", 1)),
        )  # fmt: skip
        hint = document.get("hint")
        if kind == "QuerySyntaxError":
            expected = tuple(document.get("expected") or ())
            return QuerySyntaxError(*where, expected=expected, hint=hint)
        return OpError(*where, hint=hint)
    if status == 404 or kind in ("StoreError", "CorruptPageError", "NodeNotFoundError"):
        return StoreError(text)
    if kind == "SparkSetupError":
        return SparkSetupError(text)
    return ServiceError(text, status, document)


def _raise_for(response: httpx.Response) -> None:
    if response.status_code == 200:
        return
    response.read()
    try:
        document = response.json()
    except ValueError:
        document = {"error": response.text[:500]}
    if not isinstance(document, dict):
        document = {"error": str(document)}
    raise error_of(response.status_code, document)


class _ResponseFile:
    """A streamed response's body as a file pyarrow reads from."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = bytearray()
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all of them with -1); fewer only at the end."""
        while size < 0 or len(self._buffer) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buffer += chunk
        if size < 0:
            size = len(self._buffer)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def readable(self) -> bool:
        """Always: a body is read, never written."""
        return True


class RemoteRows:
    """A query's rows from the service: read once, lazily (the request is sent when the
    rows are first asked for), with the interface of :class:`~query.driver.result.Rows`.
    :meth:`close` before the end (or leaving a ``with`` block) cancels the query there."""

    def __init__(self, client: httpx.Client, fields: dict[str, Any]) -> None:
        self._client = client
        self._fields = fields
        self._context: Any = None
        self._reader: ipc.RecordBatchStreamReader | None = None
        self._warnings: list[OpError] = []
        self._iterator: Iterator[tuple[Value, ...]] | None = None
        self._batches: Iterator[pa.RecordBatch] | None = None
        self.version: int | None = None
        """The store version the service read (known once the answer started)."""
        self.where: str | None = None
        """``driver`` or ``spark``: where the service ran the query."""

    def _open(self) -> ipc.RecordBatchStreamReader:
        if self._reader is None:
            self._context = self._client.stream("POST", "/query", json=self._fields)
            try:
                response = self._context.__enter__()
                _raise_for(response)
            except httpx.HTTPError as exc:
                self.close()
                raise ServiceError(f"The service could not be reached: {exc}") from None
            except BaseException:
                self.close()
                raise
            self.version = int(response.headers.get("x-treestore-version", "0")) or None
            self.where = response.headers.get("x-treestore-where")
            self._reader = ipc.open_stream(_ResponseFile(response.iter_bytes()))
        return self._reader

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of the rows (sends the request if it was not sent yet)."""
        return self._open().schema

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The remaining rows as Arrow record batches, as they arrive."""
        if self._batches is None:
            self._batches = self._read_batches()
        return self._batches

    def _read_batches(self) -> Iterator[pa.RecordBatch]:
        reader = self._open()
        try:
            while True:
                try:
                    batch, metadata = reader.read_next_batch_with_custom_metadata()
                except StopIteration:
                    raise ServiceError("The service's answer ended before its end.") from None
                except (OSError, pa.ArrowInvalid, httpx.HTTPError) as exc:
                    raise ServiceError(f"The service's answer was cut short: {exc}") from None
                if batch.num_rows:
                    yield batch
                    continue
                said = {k.decode(): v.decode() for k, v in (metadata or {}).items()}
                if "treestore.error" in said:
                    raise error_of(None, json.loads(said["treestore.error"]))
                if said.get("treestore.complete") == "true":
                    self._warnings = [
                        _warning(w) for w in json.loads(said.get("treestore.warnings", "[]"))
                    ]
                    return
        finally:
            self.close()

    def _rows(self) -> Iterator[tuple[Value, ...]]:
        if self._iterator is None:
            self._iterator = itertools.chain.from_iterable(
                zip(*(column.to_pylist() for column in batch.columns), strict=True)
                for batch in self.batches()
            )
        return self._iterator

    def __iter__(self) -> Iterator[tuple[Value, ...]]:
        return self._rows()

    def __next__(self) -> tuple[Value, ...]:
        return next(self._rows())

    def __enter__(self) -> RemoteRows:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop: the connection closes, and the service cancels the query."""
        context, self._context = self._context, None
        if context is not None:
            context.__exit__(None, None, None)

    def to_list(self) -> list[tuple[Value, ...]]:
        """Every remaining row, as a list of tuples."""
        return list(self)

    def to_arrow(self) -> pa.Table:
        """The rows as an Arrow table (the service's ``Rows.to_arrow()``)."""
        batches = list(self.batches())
        return pa.Table.from_batches(batches, schema=self.schema)

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame."""
        return self.to_arrow().to_pandas()

    def column_names(self, width: int | None = None) -> list[str]:
        """The names of the first ``width`` columns (default: all), ``cN`` past them."""
        names = list(self.schema.names)
        count = len(names) if width is None else width
        return [names[i] if i < len(names) else f"c{i}" for i in range(count)]

    def warnings(self) -> list[OpError]:
        """The ops' warnings, once every row was read (the service sends them last)."""
        return list(self._warnings)


def _warning(document: Any) -> OpError:
    if isinstance(document, dict):
        error = error_of(400, document)
        if isinstance(error, OpError):
            return error
    return OpError(str(document))


class RemoteStore:
    """A store served by a running ``treestore serve``."""

    def __init__(self, url: str, store: str | None = None, token: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        timeout = httpx.Timeout(CONNECT_SECONDS, read=None)
        self.url = url.rstrip("/")
        self.store = store
        self._client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def __repr__(self) -> str:
        """Which service and store, e.g. ``<RemoteStore 'store' at http://127.0.0.1:8040>``."""
        return f"<RemoteStore {self.store or '(the one served)'!r} at {self.url}>"

    def query(self, path: str, rops: str | None = None, ops: str | None = None) -> RemoteRows:
        """Run ``path`` (``rops`` on each shard, ``ops`` on the service's driver); the rows
        come lazily, as for :meth:`QueryStore.query <query.driver.runner.QueryStore.query>`."""
        fields: dict[str, Any] = {"path": path, "rops": rops, "ops": ops, "format": "arrow"}
        if self.store is not None:
            fields["store"] = self.store
        return RemoteRows(self._client, fields)

    def close(self) -> None:
        """Close the connections to the service."""
        self._client.close()

    def __enter__(self) -> RemoteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(url: str, store: str | None = None, token: str | None = None) -> RemoteStore:
    """A store served at ``url`` by ``treestore serve`` (``store=None``: the one it serves)."""
    return RemoteStore(url, store, token)
