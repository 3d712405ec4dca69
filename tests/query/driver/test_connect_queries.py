"""Queries through a Spark Connect session (a real server on loopback, the client in a
process of its own) give exactly the answers of a classic session: rows, Arrow and
pandas, walked on the client or through Spark's result channel, the store as a
DataFrame, early stops and cancels, and the same error for a damaged store."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import treestore
from tests.support.cluster_scenario import QUERIES
from tests.support.connect_queries import damaged_error, query_answers
from tests.support.connect_server import ConnectServer


def _damaged_copy(store: Path, folder: Path) -> Path:
    copy = folder / "damaged"
    shutil.copytree(store, copy)
    run = max(copy.glob("trees/*/*.pages"), key=lambda p: p.stat().st_size)
    data = bytearray(run.read_bytes())
    data[len(data) // 2] ^= 0xFF
    run.write_bytes(bytes(data))
    return copy


def test_queries_on_a_connect_session_answer_as_on_a_classic_one(
    spark: Any, connect_server: ConnectServer, demo_store: Path, tmp_path: Path
) -> None:
    damaged = _damaged_copy(demo_store, tmp_path)
    out = tmp_path / "connect.json"
    command = [
        sys.executable, "-m", "tests.support.connect_queries",
        connect_server.url, str(demo_store), str(out), str(damaged),
    ]  # fmt: skip
    done = subprocess.run(
        command, env=connect_server.client_env(), capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    answers = json.loads(out.read_text())
    handle = treestore.open(demo_store, spark=spark)
    classic = query_answers(handle)
    assert answers["walked"] == {path: {"rows": found["rows"]} for path, found in classic.items()}
    assert answers["spark"] == classic
    assert answers["runs"] == "spark"  # the last query ran as a Spark job on the server
    assert len(classic["answer"]["rows"]) == 3  # the seed's answer, PUID -> attribute ids
    for path, _ in QUERIES:  # the DataFrames: the classic rows, sorted
        found, frame = classic[path], answers["frames"][path]
        assert frame["equal"] and frame["rows"] == sorted(found["rows"], key=repr)
    assert len(answers["frames"]["join"]) == 4
    assert answers["read_schema"] == "struct<name:string,name2:string,hits:bigint>"
    expected = sorted((list(r) for r in handle.query("root/+/+:+hits").to_list()), key=repr)
    assert answers["read"] == expected
    stopped = answers["stopped"]
    full = [list(r) for r in handle.query("root/+/+/+").to_list()]
    assert stopped["first"] == full[0] and stopped["after_close"] == full
    assert stopped["after_cancel"] == full
    assert stopped["cancelled"] == "StoreError"
    assert answers["damaged"] == damaged_error(spark, str(damaged))
    assert "fails its checksum" in answers["damaged"]
