"""Creating the SparkSession, for entry points only.

Library code takes a SparkSession as an argument; only the command line, the
public ``treestore.open`` facade and test fixtures call :func:`get_session`.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from treestore.errors import SparkSetupError, TreestoreError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_MASTER",
    "check_java",
    "check_master",
    "failure_line",
    "get_session",
    "spark_errors",
]

DEFAULT_MASTER = "local[*]"
MASTER_ENV = "TREESTORE_SPARK_MASTER"
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


def check_java() -> int:
    """Return the major version of ``java`` on PATH; raise if it is missing or below 17."""
    java = shutil.which("java")
    if java is None:
        raise SparkSetupError(
            "treestore needs Java 17 or newer for Spark, and no 'java' is on PATH: "
            "install OpenJDK 17+ and try again."
        )
    try:
        shown = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SparkSetupError(f"'{java} -version' could not run ({exc}).") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', shown)
    if not match:
        raise SparkSetupError(f"Cannot tell the version of {java}: install OpenJDK 17+.")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0" style
        major = int(match.group(2))
    if major < 17:
        raise SparkSetupError(
            f"treestore needs Java 17 or newer for Spark, but {java} is Java {major}: "
            "install OpenJDK 17+ and put it first on PATH."
        )
    return major


def check_master(master: str, seconds: float = 5.0) -> None:
    """Raise :class:`SparkSetupError` at once if a standalone master (``spark://host:port``,
    or several, comma-separated) does not answer: Spark itself would retry for a minute."""
    if not master.startswith("spark://"):
        return
    reasons = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise SparkSetupError(
                f"The Spark master {master!r} is not a valid URL: write spark://HOST:PORT."
            )
        try:
            with socket.create_connection((host, int(port)), timeout=seconds):
                return
        except OSError as exc:
            reasons.append(f"{address}: {exc.strerror or exc}")
    raise SparkSetupError(
        f"Cannot reach the Spark master {master} ({'; '.join(reasons)}): check the URL "
        "(--master or TREESTORE_SPARK_MASTER) and that the master runs."
    )


def get_session(master: str | None = None, *, app_name: str = "treestore") -> SparkSession:
    """Return the process's SparkSession, creating it with treestore's settings.

    ``master`` defaults to ``$TREESTORE_SPARK_MASTER``, then ``local[*]``.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    check_java()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    chosen = master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER
    check_master(chosen)
    log_option = f"-Dlog4j2.configurationFile=file:{_LOG_CONFIG}"
    builder = (
        SparkSession.builder.master(chosen)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "65536")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("TREESTORE_DRIVER_MEMORY", "2g"))
        .config("spark.driver.extraJavaOptions", log_option)
        .config("spark.executor.extraJavaOptions", log_option)
        .config("spark.sql.catalogImplementation", "in-memory")
    )
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # py4j and the JVM raise many kinds; say it in one sentence
        raise SparkSetupError(f"Spark could not start with master {chosen!r}: {exc}") from exc
    session.sparkContext.setLogLevel("FATAL")
    # PySpark logs every failed DataFrame call as a JSON line on stderr before
    # raising; treestore turns those errors into its own messages instead.
    logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)
    return session


def failure_line(exc: BaseException) -> str:
    """A failed Spark job's cause in one line: treestore's own error if a task raised one,
    a dead Python worker, else the first exception line, else the first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("treestore.errors.")]
    if ours:
        return ours[-1][:500]
    missing = [m for line in lines if (m := re.search(r"No module named '([\w.]+)'", line))]
    if missing:
        return (
            f"the executors' Python cannot import {missing[0].group(1)!r}: install treestore "
            "on every node, or ship the project's environment to the executors (README: "
            "Running on a cluster)"
        )
    if any("Python worker exited unexpectedly" in line for line in lines):
        return "a Python worker died (it crashed or was killed); nothing was published"
    raised = [line for line in lines if re.match(r"^[\w.$]+(Error|Exception): ", line)]
    chosen = raised[0] if raised else (lines[0] if lines else type(exc).__name__)
    return chosen[:500]


@contextmanager
def spark_errors(error: type[TreestoreError], doing: str) -> Iterator[None]:
    """Turn a failed Spark job inside the block into ``error("<doing> failed: <why>")``.

    Spark reports failures as py4j or PySpark exceptions carrying a JVM stack
    trace; users get one line instead.
    """
    try:
        yield
    except TreestoreError:
        raise
    except Exception as exc:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        if not isinstance(exc, PySparkException | Py4JError):
            raise
        raise error(f"{doing} failed: {failure_line(exc)}") from exc
