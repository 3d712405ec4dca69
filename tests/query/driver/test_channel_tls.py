"""On a secured Spark session a query's rows travel over TLS, with a key made for the query:
nothing readable on the wire, and only that query's tasks are heard."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

import query.driver.runner
from query.driver.channel import RowChannel, TaskSender
from query.driver.channel_tls import FORCE_ENV, SECURITY_SETTINGS, tls_reason
from query.driver.runner import open_store
from query.driver.transport import encode_piece
from shell.demo import DEMO_PATH
from treestore.errors import StoreError

MARKER = "a-row-nobody-else-may-read"


class _Done:
    """The Spark job, as the channel sees it: finished, without an error."""

    error: BaseException | None = None

    def running(self) -> bool:
        return False


class _Recorder:
    """A TCP relay in front of the channel that keeps every byte the task sent."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.seen = bytearray()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = ("127.0.0.1", int(self.server.getsockname()[1]))
        threading.Thread(target=self._relay, daemon=True).start()

    def _relay(self) -> None:
        client, _ = self.server.accept()
        upstream = socket.create_connection(self.target)

        def back() -> None:
            with contextlib.suppress(OSError):
                while data := upstream.recv(65536):
                    client.sendall(data)

        threading.Thread(target=back, daemon=True).start()
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                self.seen += data
                upstream.sendall(data)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)


def _send_through(channel: RowChannel, certificate: bytes | None) -> bytes:
    relay = _Recorder(channel.address)
    sender = TaskSender(relay.address, channel.token, certificate)
    sender.send(0, *encode_piece([(MARKER,)]))
    sender.finish(0)
    sender.close()
    pieces = list(channel.pieces([0], _Done()))
    channel.close()
    assert pieces == [[(MARKER,)]]
    return bytes(relay.seen)


def test_rows_cross_the_wire_encrypted_only_on_a_tls_channel() -> None:
    clear = _send_through(RowChannel("127.0.0.1"), None)
    assert MARKER.encode() in clear  # the check can fail: without TLS the row is readable
    channel = RowChannel("127.0.0.1", tls=True)
    assert channel.certificate is not None
    secret = _send_through(channel, channel.certificate)
    assert MARKER.encode() not in secret and len(secret) > len(MARKER)


def test_a_tls_channel_hears_no_plain_client_and_no_other_querys_task() -> None:
    channel = RowChannel("127.0.0.1", tls=True)
    plain = TaskSender(channel.address, channel.token)  # no TLS: the driver drops it
    with contextlib.suppress(OSError):
        plain.send(0, *encode_piece([("intruder",)]))
        plain.finish(0)
    plain.close()
    other = RowChannel("127.0.0.1", tls=True)
    with pytest.raises(StoreError, match="could not set up TLS with the query's own"):
        TaskSender(channel.address, channel.token, other.certificate)
    other.close()
    sender = TaskSender(channel.address, channel.token, channel.certificate)
    sender.send(0, *encode_piece([("ours",)]))
    sender.finish(0)
    sender.close()
    assert list(channel.pieces([0], _Done())) == [[("ours",)]]
    channel.close()


def test_spark_security_settings_ask_for_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FORCE_ENV, raising=False)
    assert tls_reason({}) is None
    assert tls_reason({"spark.authenticate": "false"}) is None
    for name in SECURITY_SETTINGS:
        assert tls_reason({name: "true"}) == f"{name}=true"
    monkeypatch.setenv(FORCE_ENV, "1")
    assert tls_reason({}) == f"{FORCE_ENV}=1"


def test_a_query_in_spark_answers_the_same_over_tls(
    demo_store: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    channels: list[RowChannel] = []

    class Recorded(RowChannel):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            channels.append(self)

    monkeypatch.setattr(query.driver.runner, "RowChannel", Recorded)
    store = open_store(str(demo_store), spark)
    store.local_limit = -1
    rops = "str=c1,v=,cat,c2,cat,v2,set;merge=kij"
    clear = store.query(DEMO_PATH, rops=rops).to_list()
    monkeypatch.setenv(FORCE_ENV, "1")
    assert store.query(DEMO_PATH, rops=rops).to_list() == clear
    assert [c.certificate is not None for c in channels] == [False, True]
