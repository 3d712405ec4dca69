"""A real Spark Connect server on loopback, started from the pyspark install itself.

:func:`start_connect_server` runs the server class ``sbin/start-connect-server.sh``
runs (``SparkConnectServer``, through ``bin/spark-submit``) in the foreground of a
process group of its own, on a free loopback port, with ``local[2]`` executors whose
Python is this one and whose ``PYTHONPATH`` starts with this checkout (so its tasks run
this code). It returns once the server listens; :meth:`ConnectServer.stop` kills the
process group by pid.

A Connect client and a classic session cannot share one Python process: the first
Connect session sets ``SPARK_CONNECT_MODE_ENABLED``, and from then on PySpark's column
functions build Connect columns for every session. Tests therefore talk to the server
from a process of their own (:mod:`tests.support.connect_scenario`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.serve_server import free_port

__all__ = ["ConnectServer", "start_connect_server"]

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 120
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@dataclass
class ConnectServer:
    """A running Spark Connect server: its ``sc://`` URL, its process and its log."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def client_env(self) -> dict[str, str]:
        """The environment of a client process: this checkout first on ``PYTHONPATH``,
        and ``TREESTORE_SPARK_MASTER`` set to the server's URL."""
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        return {**os.environ, "PYTHONPATH": path, "TREESTORE_SPARK_MASTER": self.url}

    def stop(self) -> None:
        """Kill the server's process group and wait for it."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def start_connect_server(folder: Path, cores: int = 2) -> ConnectServer:
    """Start a Spark Connect server (``local[cores]``) logging under ``folder``; return
    once it accepts connections, or raise ``RuntimeError`` with its log's end."""
    import pyspark

    home = Path(pyspark.__file__).parent
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tmp").mkdir(exist_ok=True)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": path,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env.pop("SPARK_REMOTE", None)
    command = [
        str(home / "bin" / "spark-submit"),
        "--class", SERVER_CLASS,
        "--master", f"local[{cores}]",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", "spark.ui.enabled=false",
        # stages report progress every 100 ms (default 2 s): a test load's stages take less
        "--conf", "spark.connect.progress.reportInterval=100ms",
        "--conf", "spark.sql.session.timeZone=UTC",
        "--conf", "spark.sql.shuffle.partitions=8",
        "--conf", f"spark.local.dir={folder / 'tmp'}",
        "--conf", "spark.driver.memory=1g",
        "spark-internal",
    ]  # fmt: skip
    log = folder / "connect-server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    server = ConnectServer(f"sc://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        if _listening(port):
            return server
        time.sleep(0.3)
    server.stop()
    raise RuntimeError(
        f"The Spark Connect server did not come up in {STARTUP_SECONDS} s. Its log ends:\n"
        + log.read_text(errors="replace")[-3000:]
    )
