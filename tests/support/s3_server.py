"""A real S3-compatible server on loopback: moto's server, from the dev extra.

:func:`start_s3_server` starts ``moto_server`` on a free port and waits until it
answers; :meth:`S3Server.stop` kills it by pid. :meth:`S3Server.new_bucket` makes a
bucket of its own for a test.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["S3Server", "start_s3_server"]

STARTUP_SECONDS = 30


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class S3Server:
    """A running S3 endpoint and the settings that reach it."""

    endpoint: str
    process: subprocess.Popen[bytes]

    @property
    def env(self) -> dict[str, str]:
        """The AWS settings a client of this server needs."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def new_bucket(self) -> str:
        """Create a new bucket; its name."""
        import boto3

        name = f"treestore-{uuid.uuid4().hex[:12]}"
        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        """Kill the server by pid (its process group) and wait for it."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


def start_s3_server(folder: Path, checks_credentials: bool = False) -> S3Server:
    """Start moto's S3 server on a free loopback port; return once it answers.

    ``checks_credentials``: the server refuses every request whose keys it does not know
    (moto's ``INITIAL_NO_AUTH_ACTION_COUNT=0``), as a real S3 refuses wrong keys.
    """
    port = _free_port()
    env = {**os.environ, **({"INITIAL_NO_AUTH_ACTION_COUNT": "0"} if checks_credentials else {})}
    program = Path(sys.executable).with_name("moto_server")
    log = folder / "moto.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(program), "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    server = S3Server(f"http://127.0.0.1:{port}", process)
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return server
        if process.poll() is not None:
            break
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(
        f"The S3 server (moto_server) did not answer on port {port} within "
        f"{STARTUP_SECONDS} s. Its log:\n{log.read_text(errors='replace')[-2000:]}"
    )
