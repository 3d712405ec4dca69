"""The service's limits and its stop, against a real ``treestore serve`` of its own (one
per module, ``--max-concurrent 2 --max-timeout 8``) over a bigger copy of the demo: the
queue past the slots and its 503, the timeout cap, a ``limit`` that ends the Spark job, a
slow client that holds only its own buffer, a query in flight that keeps its version
while a load publishes the next, and SIGTERM while queries run (the last test: it stops
the server, and a test after it would start another).

Queries that hold a slot are Spark queries with a ten-minute ``sleep`` rop (they end
only when cancelled) or driver queries whose answer is far larger than what the
service buffers, read by nobody (they wait for their client). Times are measured and
printed (``-s``), never asserted: only hang guards.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.serve_server import ServeProcess, start_serve

pytestmark = [pytest.mark.spark, pytest.mark.slow]

MAX_CONCURRENT = 2
MAX_TIMEOUT = 8
"""The server's ``--max-timeout``: above the time a load takes here, so that the query the
load publishes under is not cut by it."""
QUEUE = 4 * MAX_CONCURRENT
"""Queries that may wait for a slot (``QUEUE_PER_SLOT`` x ``--max-concurrent``)."""
BIG_UIDS = 2000
"""UIDs added to the demo's: 3 attribute rows each under ``root/UID/A``."""
FAT = "pad=s" + "x" * 10_000 + ":4"
"""A row op that adds a fourth column of 10 000 characters (one text, the same in every
row): ~10 KB a row, ~60 MB for the store's ``root/+/+/+``, far more than the service's
own buffer and the sockets hold, while the rows it has made cost next to nothing."""
HOLD = ("+/+/+/+", "sleep=600000")
"""A Spark query whose first row takes ten minutes: it holds its slot until cancelled."""
SEED = ("root/+:nodes>1/+/+", "cross=0,1,2,M,A,list", "gather=kJ;sort")
HANG_GUARD = 60.0


@dataclass
class Limited:
    """The module's server, started again if a test stopped it."""

    stores: dict[str, Path]
    folder: Path
    started: list[ServeProcess] = field(default_factory=list)

    def get(self) -> ServeProcess:
        """The running server (a new one if the last was stopped), Spark up."""
        if not self.started or self.started[-1].process.poll() is not None:
            args = ["--max-concurrent", str(MAX_CONCURRENT), "--max-timeout", str(MAX_TIMEOUT)]
            self.started.append(start_serve(self.stores, args, folder=self.folder))
        server = self.started[-1]
        server.wait_for_spark()
        return server


@pytest.fixture(scope="module")
def limited(spark: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Limited]:
    """The demo with :data:`BIG_UIDS` more UIDs (named ``big``, its folder beside its job:
    a test loads more into it) served with two slots and an 8 s timeout cap."""
    from loaders import load_job, run_load
    from shell.demo import write_demo_inputs

    folder = tmp_path_factory.mktemp("big-store")
    write_demo_inputs(folder)
    lines = [f"1419441690000\t{100000 + n}\t1,2,3" for n in range(BIG_UIDS)]
    text = "TIME\tUID\tATTRIBUTE_IDS\n" + "\n".join(lines) + "\n"
    (folder / "attributes" / "attributes-0002.tsv").write_text(text)
    run_load(spark, load_job(folder / "job.json"), folder / "store")  # type: ignore[arg-type]
    servers = Limited({"big": folder / "store"}, tmp_path_factory.mktemp("serve-limited"))
    try:
        yield servers
    finally:
        for server in servers.started:
            status = server.stop()
            assert status == 0, f"treestore serve ended with {status}: {server.output()}"


def _params(path: str, rops: str | None = None, ops: str | None = None, **more: Any) -> Any:
    fields = {"store": "big", "path": path, "rops": rops, "ops": ops, **more}
    return {k: str(v) for k, v in fields.items() if v is not None}


def _metric(server: ServeProcess, name: str) -> float:
    text = httpx.get(server.url + "/metrics", timeout=30).text
    return float(next(x for x in text.splitlines() if x.startswith(name + " ")).split()[-1])


def _outcomes(server: ServeProcess) -> dict[str, float]:
    text = httpx.get(server.url + "/metrics", timeout=30).text
    prefix = 'treestore_queries_total{outcome="'
    return {
        line[len(prefix) :].split('"')[0]: float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(prefix)
    }


def _health(server: ServeProcess) -> dict[str, Any]:
    health = server.get_json("/health")
    assert isinstance(health, dict)
    return health


def _until(check: Any, seconds: float = HANG_GUARD) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


class RawQuery:
    """A ``GET /query`` on a socket of its own: sent now, read only when asked (a client
    that reads nothing, or one that goes away by closing)."""

    def __init__(self, server: ServeProcess, params: dict[str, str]) -> None:
        port = int(server.url.rsplit(":", 1)[1])
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        query = httpx.QueryParams(params)
        self.sock.sendall(f"GET /query?{query} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
        self.data = bytearray()

    def read_until(self, marker: bytes) -> bytes:
        """Read until ``marker`` is in what was read (or the server closed)."""
        searched = 0
        while self.data.find(marker, searched) < 0:
            searched = max(0, len(self.data) - len(marker))
            part = self.sock.recv(1 << 20)
            if not part:
                break
            self.data += part
        return bytes(self.data)

    def read_all(self) -> bytes:
        """Read to the end of a chunked answer (or until the server closes)."""
        return self.read_until(b"\r\n0\r\n\r\n")

    def status(self) -> int:
        """The answer's status (reads its status line)."""
        return int(self.read_until(b"\r\n").split(b" ", 2)[1])

    def close(self) -> None:
        """Go away."""
        self.sock.close()


def _body_lines(raw: bytes) -> list[bytes]:
    """The lines of a chunked HTTP answer's body."""
    at = raw.index(b"\r\n\r\n") + 4
    parts = []
    while at < len(raw):
        line_end = raw.index(b"\r\n", at)
        size = int(raw[at:line_end], 16)
        if size == 0:
            break
        parts.append(raw[line_end + 2 : line_end + 2 + size])
        at = line_end + 2 + size + 2
    return b"".join(parts).splitlines()


def test_past_the_slots_and_the_queue_is_a_503_then_the_slots_come_back(
    limited: Limited,
) -> None:
    server = limited.get()
    holders = [RawQuery(server, _params(*HOLD)) for _ in range(MAX_CONCURRENT)]
    assert _until(lambda: _health(server)["queries_running"] == MAX_CONCURRENT)
    waiting = [RawQuery(server, _params(*HOLD)) for _ in range(QUEUE)]
    assert _until(lambda: _health(server)["queries_waiting"] == QUEUE)
    refused = httpx.get(server.url + "/query", params=_params(*HOLD), timeout=HANG_GUARD)
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"].isdigit() and "Too many" in refused.json()["error"]
    assert _health(server)["queries_running"] == MAX_CONCURRENT  # the holders hold
    started = time.monotonic()
    outcomes = _outcomes(server)
    for query in holders + waiting:  # every client goes away: each query is cancelled
        query.close()
    assert _until(lambda: _health(server)["queries_waiting"] == 0)
    assert _until(lambda: _health(server)["queries_running"] == 0)
    freed = time.monotonic() - started
    assert _until(lambda: _metric(server, "treestore_spark_jobs_running") == 0)
    answered = httpx.get(server.url + "/query", params=_params(*SEED), timeout=HANG_GUARD)
    assert answered.status_code == 200 and answered.json()["complete"] is True
    print(f"\nslots and queue freed {freed:.2f} s after the clients left")
    print(f"outcomes before {outcomes}, after {_outcomes(server)}")


def test_a_queued_query_gets_its_504_in_the_queue(limited: Limited) -> None:
    """A query waiting for a slot past its own timeout is a 504 then, not once a slot
    frees (the holders' timeouts are the cap's, far later)."""
    server = limited.get()
    holders = [RawQuery(server, _params(*HOLD)) for _ in range(MAX_CONCURRENT)]
    try:
        assert _until(lambda: _health(server)["queries_running"] == MAX_CONCURRENT)
        started = time.monotonic()
        queued = httpx.get(
            server.url + "/query", params=_params(*HOLD, timeout=1), timeout=HANG_GUARD
        )
        took = time.monotonic() - started
        assert queued.status_code == 504, queued.text
        assert _health(server)["queries_running"] == MAX_CONCURRENT  # still held
        print(f"\na queued query's 504 after {took:.2f} s (its timeout: 1 s)")
    finally:
        for query in holders:
            query.close()
    assert _until(lambda: _metric(server, "treestore_spark_jobs_running") == 0)


def test_max_timeout_caps_the_clients_timeout(limited: Limited) -> None:
    server = limited.get()
    started = time.monotonic()
    answer = httpx.get(
        server.url + "/query", params=_params(*HOLD, timeout=10_000), timeout=HANG_GUARD
    )
    took = time.monotonic() - started
    assert answer.status_code == 504, answer.text
    assert f"timeout of {MAX_TIMEOUT} s" in answer.json()["error"]
    assert _until(lambda: _metric(server, "treestore_spark_jobs_running") == 0)
    print(f"\n504 after {took:.2f} s (asked 10000 s, --max-timeout {MAX_TIMEOUT})")


def test_a_limit_met_cancels_the_spark_job(limited: Limited) -> None:
    server = limited.get()
    params = _params("+/+/+/+", "sleep=20", limit=2, format="jsonl")  # 6000 rows: a minute
    started = time.monotonic()
    answer = httpx.get(server.url + "/query", params=params, timeout=HANG_GUARD)
    lines = [json.loads(line) for line in answer.text.splitlines()]
    assert len(lines) == 4 and lines[-1] == {"complete": True, "rows": 2}
    assert answer.headers["x-treestore-where"] == "spark"
    # a guard well under the job's minute, so that a job left to run fails it
    assert _until(lambda: _metric(server, "treestore_spark_jobs_running") == 0, 30)
    print(f"\nlimit met and the job gone {time.monotonic() - started:.2f} s after the start")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_slow_client_holds_only_its_own_buffer(limited: Limited, spark: object) -> None:
    import treestore

    server = limited.get()
    store = limited.stores["big"]
    before = _rss_mib(server.process.pid)
    slow = RawQuery(server, _params("root/+/+/+", FAT, format="jsonl"))
    try:
        assert slow.status() == 200
        assert _until(lambda: _health(server)["queries_running"] == 1)
        samples = []
        for _ in range(10):  # the query waits for its client; what does the service hold?
            samples.append(_rss_mib(server.process.pid))
            time.sleep(0.1)
        answer = httpx.get(server.url + "/query", params=_params(*SEED), timeout=HANG_GUARD)
        assert answer.status_code == 200, answer.text
        expected = [list(r) for r in treestore.open(store, spark).query(*SEED)]  # type: ignore[arg-type]
        assert answer.json()["rows"] == expected
        assert _health(server)["queries_running"] == 1  # the slow one still waits
        grown = max(samples) - before
        print(f"\nRSS {before:.0f} MiB before, at most {max(samples):.0f} MiB while it waits")
        assert grown < 30, f"the service grew {grown:.0f} MiB for a client that reads nothing"
    finally:
        slow.close()
    assert _until(lambda: _health(server)["queries_running"] == 0)


def test_a_query_in_flight_keeps_its_version(limited: Limited, spark: object) -> None:
    """A driver query whose client reads only its header: the walk waits for the client
    (its answer is far larger than what is buffered), a load publishes the next version
    meanwhile, and the rest of the walk still reads its own version's pages."""
    import treestore
    from loaders import load_job, run_load

    server = limited.get()
    store = limited.stores["big"]
    local = treestore.open(store, spark)
    expected = [list(r) for r in local.query("root/+/+/+")]  # type: ignore[arg-type]
    reader = RawQuery(server, _params("root/+/+/+", FAT, format="jsonl"))
    try:
        head = reader.read_until(b"\n{")
        version = int(head.split(b"x-treestore-version: ")[1].split(b"\r\n")[0])
        assert version == local.version
        new = "TIME\tUID\tATTRIBUTE_IDS\n1419441690000\t99999\t7\n"
        (store.parent / "attributes" / f"attributes-v{version + 1}.tsv").write_text(new)
        started = time.monotonic()
        run_load(spark, load_job(store.parent / "job.json"), store)  # type: ignore[arg-type]
        loaded = time.monotonic() - started
        assert _health(server)["queries_running"] == 1  # still in flight: nobody read it
        lines = [json.loads(line) for line in _body_lines(reader.read_all())]
    finally:
        reader.close()
    assert lines[0]["version"] == version and lines[-1]["complete"] is True, lines[-1]
    width = len(expected[0])
    assert [row[:width] for row in lines[1:-1]] == expected  # version N's rows, all of them
    assert not any("99999" in row for row in expected)
    after = httpx.get(server.url + "/query", params=_params("root/+/+/+"), timeout=HANG_GUARD)
    assert after.headers["x-treestore-version"] == str(version + 1)
    assert ["99999", "A", "7"] in after.json()["rows"]
    print(f"\nthe load took {loaded:.2f} s while the query was in flight")


def test_sigterm_cancels_the_queries_and_exits_0(limited: Limited) -> None:
    """Last: it stops the module's server. Two queries run (one before its first row in
    Spark, one mid-stream on the driver), one waits for a slot."""
    server = limited.get()
    before_first_row = RawQuery(server, _params(*HOLD, format="jsonl"))
    mid_stream = RawQuery(server, _params("root/+/+/+", FAT, format="jsonl"))
    try:
        assert mid_stream.status() == 200
        assert _until(lambda: _metric(server, "treestore_spark_jobs_running") >= 1)
        queued = RawQuery(server, _params(*SEED, format="jsonl"))
        assert _until(lambda: _health(server)["queries_waiting"] == 1)
        started = time.monotonic()
        server.process.terminate()
        ends: dict[str, bytes] = {}
        readers = [
            threading.Thread(target=lambda q=q, n=n: ends.__setitem__(n, q.read_all()))
            for n, q in (("first", before_first_row), ("mid", mid_stream), ("queued", queued))
        ]
        for reader in readers:
            reader.start()
        status = server.process.wait(timeout=HANG_GUARD)
        exited = time.monotonic() - started
        for reader in readers:
            reader.join(HANG_GUARD)
    finally:
        for query in (before_first_row, mid_stream):
            query.close()
    assert status == 0, server.output()
    print(f"\nexited {status} {exited:.2f} s after SIGTERM")
    first = ends["first"]
    assert first.startswith(b"HTTP/1.1 503"), first[:200]
    assert b"stopping" in first
    trailer = json.loads(_body_lines(ends["mid"])[-1])
    assert trailer["complete"] is False and "stopping" in trailer["error"]["error"]
    queued_end = ends["queued"]  # it got its slot once the service was stopping: refused
    assert queued_end.startswith(b"HTTP/1.1 503") and b"stopping" in queued_end, queued_end
