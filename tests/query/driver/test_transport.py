"""The file channel: pieces read shard by shard, as soon as they are written."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest

from query.driver.transport import (
    ERROR,
    ShardFiles,
    decode_piece,
    encode_error,
    encode_piece,
    read_shard_files,
)
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


def test_the_first_piece_is_read_before_the_last_shard_is_written(tmp_path: Path) -> None:
    release = threading.Event()

    def tasks() -> None:
        for shard in (2, 0, 1):  # shards finish out of order
            files = ShardFiles(str(tmp_path), shard)
            if shard == 1:
                release.wait(10)
            files.write(*encode_piece([(f"s{shard}-a",)]))
            files.write(*encode_piece([(f"s{shard}-b",)]))
            files.finish()

    writer = threading.Thread(target=tasks)
    writer.start()
    pieces = read_shard_files(str(tmp_path), [0, 1, 2], writer.is_alive)
    first = next(pieces)
    assert first == [("s0-a",)] and not release.is_set()  # shard 1 has not been written yet
    release.set()
    rest = list(pieces)
    writer.join()
    assert [row for piece in rest for row in piece] == [
        ("s0-b",),
        ("s1-a",),
        ("s1-b",),
        ("s2-a",),
        ("s2-b",),
    ]
    # every piece file was removed once read
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{s:06d}.done" for s in (0, 1, 2)]


def test_a_shard_error_is_raised_and_a_dead_job_stops_the_reading(tmp_path: Path) -> None:
    files = ShardFiles(str(tmp_path), 0)
    files.write(*encode_piece([("ok",)]))
    files.write(ERROR, encode_error(StoreError("shard 0 is damaged")))
    files.finish()
    pieces = read_shard_files(str(tmp_path), [0], lambda: True)
    assert next(pieces) == [("ok",)]
    with pytest.raises(StoreError, match="damaged"):
        next(pieces)
    # a job that ended without shard 1's files: the reading stops, the caller raises
    assert list(read_shard_files(str(tmp_path), [1], lambda: False)) == []
