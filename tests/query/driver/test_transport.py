"""Pieces of rows: encoded with their types, and sent over the channel to the driver, read
shard by shard as soon as they arrive."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from query.driver.channel import RowChannel, TaskSender
from query.driver.transport import ERROR, decode_piece, encode_error, encode_piece
from treestore.errors import (
    CorruptPageError,
    LoadError,
    OpError,
    QuerySyntaxError,
    StoreError,
    TreestoreError,
)


def _columns(values: list[str]) -> tuple[int, list[pa.Array]]:
    return len(values), [pa.array(values, pa.string()), pa.array(range(len(values)), pa.int64())]


def test_pieces_round_trip_with_their_types() -> None:
    batch = decode_piece(*encode_piece(_columns(["a", "b"])))
    assert isinstance(batch, pa.RecordBatch)
    assert batch.schema.types == [pa.string(), pa.int64()]
    assert decode_piece(*encode_piece([("x", 1, None)])) == [("x", 1, None)]
    assert decode_piece(*encode_piece((3, []))) == [(), (), ()]
    with pytest.raises(OpError, match="bad"):
        decode_piece(ERROR, encode_error(OpError("bad", "merge=q", 1, 7)))


@pytest.mark.parametrize(
    "error",
    [
        CorruptPageError("Page 3 of shard 1 is damaged (checksum) in trees/x.pages."),
        StoreError("The store is gone."),
        LoadError("A load failed."),
        QuerySyntaxError("Unexpected 'x'", "root/x", 1, 6, expected=(), hint="Try +."),
        OpError("bad letter", "merge=kq", 2, 8, source="ops", hint="Use k, i, s."),
    ],
)
def test_an_error_reaches_the_driver_as_its_own_class(error: TreestoreError) -> None:
    with pytest.raises(type(error)) as caught:
        decode_piece(ERROR, encode_error(error))
    assert type(caught.value) is type(error)
    assert str(caught.value) == str(error)


class _Job:
    """A stand-in for the Spark job: running until told otherwise."""

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self.alive = True

    def running(self) -> bool:
        return self.alive


def test_the_first_piece_is_read_before_the_last_shard_is_sent() -> None:
    channel = RowChannel("127.0.0.1")
    release = threading.Event()

    def task(shards: tuple[int, ...]) -> None:
        sender = TaskSender(channel.address, channel.token)
        for shard in shards:
            if shard == 1:
                release.wait(10)
            sender.send(shard, *encode_piece([(f"s{shard}-a",)]))
            sender.send(shard, *encode_piece([(f"s{shard}-b",)]))
            sender.finish(shard)
        sender.close()

    job = _Job()
    senders = [threading.Thread(target=task, args=(s,)) for s in [(2,), (0, 1)]]
    for sender in senders:
        sender.start()
    pieces = channel.pieces([0, 1, 2], job)
    first = next(pieces)
    assert first == [("s0-a",)] and not release.is_set()  # shard 1 has not been sent yet
    release.set()
    rest = list(pieces)
    for sender in senders:
        sender.join()
    channel.close()
    assert [row for piece in rest for row in piece] == [
        ("s0-b",),
        ("s1-a",),
        ("s1-b",),
        ("s2-a",),
        ("s2-b",),
    ]


def test_a_retried_task_repeats_nothing_and_a_stranger_is_not_heard() -> None:
    channel = RowChannel("127.0.0.1")
    stranger = TaskSender(channel.address, b"x" * 16)
    stranger.send(0, *encode_piece([("intruder",)]))
    stranger.close()
    first_try = TaskSender(channel.address, channel.token)
    first_try.send(0, *encode_piece([("a",)]))
    first_try.close()  # died after one piece
    second_try = TaskSender(channel.address, channel.token)
    second_try.send(0, *encode_piece([("a",)]))
    second_try.send(0, *encode_piece([("b",)]))
    second_try.finish(0)
    second_try.close()
    job = _Job()
    assert list(channel.pieces([0], job)) == [[("a",)], [("b",)]]
    channel.close()


def test_waiting_pieces_beyond_the_budget_go_to_a_file_and_come_back() -> None:
    channel = RowChannel("127.0.0.1", budget=100)
    sender = TaskSender(channel.address, channel.token)
    big = [("x" * 60,)]
    for shard in (1, 0):  # shard 1 waits while shard 0 is read
        sender.send(shard, *encode_piece(big))
        sender.send(shard, *encode_piece(big))
        sender.finish(shard)
    sender.close()
    assert list(channel.pieces([0, 1], _Job())) == [big] * 4
    channel.close()


def test_a_shard_error_is_raised_and_a_failed_job_stops_the_reading() -> None:
    channel = RowChannel("127.0.0.1")
    sender = TaskSender(channel.address, channel.token)
    sender.send(0, *encode_piece([("ok",)]))
    sender.send(0, ERROR, encode_error(StoreError("shard 0 is damaged")))
    sender.finish(0)
    sender.close()
    job = _Job()
    pieces = channel.pieces([0, 1], job)
    assert next(pieces) == [("ok",)]
    with pytest.raises(StoreError, match="damaged"):
        next(pieces)
    # a job that failed without shard 1's rows: the reading stops, the caller raises
    job.alive, job.error = False, RuntimeError("task lost")
    assert list(channel.pieces([1], job)) == []
    channel.close()


def test_a_task_that_cannot_reach_the_driver_says_so() -> None:
    channel = RowChannel("127.0.0.1")
    address = channel.address
    channel.close()
    with pytest.raises(StoreError, match="cannot reach the driver"):
        TaskSender(address, channel.token)


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("tls", [False, True])
def test_a_big_piece_stays_in_its_arrow_buffer_and_arrives_whole(compress: bool, tls: bool) -> None:
    """A column chunk is written once into a buffer of its size and sent after its header
    (not copied into bytes, nor behind the header); small and big pieces, over plain and
    TLS connections, arrive in order and whole."""
    values = [f"name-{n}" for n in range(40_000)]  # about 700 KB of columns
    kind, payload = encode_piece(_columns(values), compress=compress)
    assert isinstance(payload, pa.Buffer) and len(payload) > 1 << 16
    channel = RowChannel("127.0.0.1", tls=tls)
    sender = TaskSender(channel.address, channel.token, channel.certificate)
    sender.send(0, *encode_piece([("small",)]))
    sender.send(0, kind, payload)
    sender.send(0, *encode_piece(_columns(["after"]), compress=compress))
    sender.finish(0)
    pieces = list(channel.pieces([0], _Job()))
    sender.close()
    channel.close()
    assert pieces[0] == [("small",)]
    assert pieces[1].column(0).to_pylist() == values
    assert pieces[1].column(1).to_pylist() == list(range(len(values)))
    assert pieces[2].column(0).to_pylist() == ["after"]
