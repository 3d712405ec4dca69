"""A real Spark standalone cluster on loopback, started from the pyspark install itself.

One master and two workers (1 core and 1 GB each), on free ports, each worker with its
own work folder and TMPDIR and the project's Python. :func:`start_cluster` waits until
both workers have registered, or fails saying what it saw; :meth:`Cluster.stop` kills
every process it started, by pid.

A ``secured`` cluster runs with Spark's authentication and network encryption on
(``spark.authenticate``, a random shared secret, ``spark.network.crypto.enabled``): its
settings are a ``spark-defaults.conf`` in :attr:`Cluster.conf_dir`, which the master,
the workers and every driver of the cluster read (``SPARK_CONF_DIR``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from treestore.filesystems import DRIVER_ONLY_ENV

__all__ = ["Cluster", "start_cluster"]

STARTUP_SECONDS = 90


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class Cluster:
    """A running standalone cluster: its master URL and the processes to stop."""

    url: str
    folder: Path
    driver_only: Path
    """A folder the executors are told only the driver has (a task opening a path under it
    fails): drivers keep their job files, current folder and temporary files there."""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    conf_dir: Path | None = None
    """The folder of a secured cluster's ``spark-defaults.conf`` (its drivers need
    ``SPARK_CONF_DIR`` set to it); ``None`` for a cluster without security."""

    def driver_env(self) -> dict[str, str]:
        """What a driver of this cluster adds to its environment (the shared settings)."""
        return {} if self.conf_dir is None else {"SPARK_CONF_DIR": str(self.conf_dir)}

    def stop(self) -> None:
        """Kill every process the cluster started (its process groups), and wait for them."""
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def _start(command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def _secured_conf(folder: Path) -> Path:
    """A ``spark-defaults.conf`` with authentication and network encryption on."""
    conf_dir = folder / "conf"
    conf_dir.mkdir(parents=True)
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.authenticate true\n"
        f"spark.authenticate.secret {secrets.token_hex(16)}\n"
        "spark.network.crypto.enabled true\n"
    )
    return conf_dir


def start_cluster(folder: Path, workers: int = 2, secured: bool = False) -> Cluster:
    """Start a master and ``workers`` workers under ``folder``; return once all registered.
    ``secured``: with Spark's authentication and network encryption on."""
    home = _spark_home()
    spark_class = str(home / "bin" / "spark-class")
    port = _free_port()
    env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable}
    env.pop("SPARK_LOCAL_DIRS", None)
    # The master, the workers and the executors they start take the run's Java options
    # (the executors' notice of them goes to their logs).
    env.setdefault("JAVA_TOOL_OPTIONS", os.environ.get("SPARK_SUBMIT_OPTS", ""))
    for name in [n for n in env if n.startswith("AWS_")]:
        env.pop(name)  # executors reach an object store only with the settings tasks carry
    driver_only = folder / "driver-only"
    driver_only.mkdir(parents=True)
    cluster = Cluster(f"spark://127.0.0.1:{port}", folder, driver_only)
    if secured:
        cluster.conf_dir = _secured_conf(folder)
        env.update(cluster.driver_env())
    master_log = folder / "master.log"
    master = [
        spark_class, "org.apache.spark.deploy.master.Master",
        "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(_free_port()),
    ]  # fmt: skip
    cluster.processes.append(_start(master, master_log, env))
    for number in range(workers):
        work = folder / f"worker-{number}"
        (work / "tmp").mkdir(parents=True)
        worker_env = {
            **env,
            "TMPDIR": str(work / "tmp"),
            "SPARK_WORKER_DIR": str(work),
            DRIVER_ONLY_ENV: str(driver_only),
        }
        worker = [
            spark_class, "org.apache.spark.deploy.worker.Worker",
            "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
            "--work-dir", str(work), "--webui-port", str(_free_port()), cluster.url,
        ]  # fmt: skip
        cluster.processes.append(_start(worker, folder / f"worker-{number}.log", worker_env))
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        text = master_log.read_text(errors="replace") if master_log.exists() else ""
        if text.count("Registering worker") >= workers:
            return cluster
        if any(p.poll() is not None for p in cluster.processes):
            break
        time.sleep(0.5)
    cluster.stop()
    logs = "\n".join(
        f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}"
        for log in sorted(folder.glob("*.log"))
    )
    raise RuntimeError(
        f"The Spark standalone cluster did not come up in {STARTUP_SECONDS} s "
        f"({workers} workers expected). Its logs:\n{logs}"
    )
