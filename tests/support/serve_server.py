"""A real ``treestore serve`` in a process of its own, on a free loopback port.

:func:`start_serve` starts ``python -m treestore serve`` (this checkout's code: the
source root goes first on ``PYTHONPATH``) with the given stores, waits for its one line
and its ``/health``, and returns a :class:`ServeProcess`; :meth:`ServeProcess.stop` ends
it by pid (SIGTERM, then SIGKILL to its process group if it lingers). The server runs
its own JVM, started in the background.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ROOT", "ServeProcess", "free_port", "start_serve"]

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 60


def free_port() -> int:
    """A loopback port free now."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class ServeProcess:
    """A running service: its address, its process and the file its output goes to."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path
    first_line: str
    stores: dict[str, Path]

    def get_json(self, path: str, token: str | None = None) -> object:
        """``GET url+path`` as JSON (raises for a status other than 200)."""
        request = urllib.request.Request(self.url + path)
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read())

    def wait_for_spark(self, seconds: float = 180) -> None:
        """Wait until ``/health`` says Spark is up (raises if it failed or took too long)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            state = self.get_json("/health")["spark"]  # type: ignore[index]
            if state == "up":
                return
            if state == "failed":
                raise RuntimeError(f"Spark failed to start in the service: {self.output()}")
            time.sleep(0.2)
        raise RuntimeError("Spark did not start in the service in time")

    def output(self) -> str:
        """What the process printed so far."""
        return self.log.read_text(errors="replace")

    def stop(self, seconds: float = 30) -> int | None:
        """SIGTERM, then (after ``seconds``) SIGKILL to its process group; its status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
        return self.process.wait(timeout=30)


def start_serve(
    stores: dict[str, Path],
    extra_args: Sequence[str] = (),
    folder: Path | None = None,
    env: dict[str, str] | None = None,
) -> ServeProcess:
    """Start ``treestore serve NAME=STORE...`` on a free loopback port (``extra_args``
    after them); return once it printed its line and answers ``/health``."""
    port = free_port()
    log_folder = folder or Path(os.environ.get("TMPDIR", "/tmp"))
    log = log_folder / f"serve-{port}.log"
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    command = [
        sys.executable, "-m", "treestore", "serve",
        *(f"{name}={path}" for name, path in stores.items()),
        "--port", str(port), "--master", "local[2]", *extra_args,
    ]  # fmt: skip
    with log.open("wb") as output:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=log_folder,
            env={**os.environ, "PYTHONPATH": pythonpath, **(env or {})},
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    served = ServeProcess(url, process, log, "", dict(stores))
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"treestore serve exited ({process.returncode}): {served.output()}")
        lines = served.output().splitlines()
        if lines and lines[0].startswith("serving"):
            try:
                served.get_json("/health")
            except OSError:
                time.sleep(0.1)
                continue
            served.first_line = lines[0]
            return served
        time.sleep(0.1)
    served.stop()
    raise RuntimeError(f"treestore serve did not answer in time: {served.output()}")
