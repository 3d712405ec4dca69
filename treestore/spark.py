"""Creating the SparkSession, for entry points only, and asking a session what it is.

Library code takes a SparkSession as an argument; only the command line, the
public ``treestore.open`` facade and test fixtures call :func:`get_session`.

A master ``sc://HOST:PORT`` is a Spark Connect server: :func:`connect_session` checks
that it answers (its port first, in a few seconds, as :func:`check_master` does for
``spark://``: the Connect client itself retries for minutes) and opens a session on it;
a Connect client needs no Java (the JVM is the server's). A Connect session has no
``sparkContext``, RDDs, accumulators, broadcast variables or py4j gateway, and its
executors run on the server and cannot reach this process: :func:`is_connect` tells
the code that must go another way, and :func:`default_parallelism` and
:func:`check_executors_python` ask such a session with a tiny job instead. A failed
Spark job's cause in one line is :mod:`treestore.spark_failures` (``spark_errors``,
``failure_line``, both also here).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from treestore.errors import SparkSetupError
from treestore.settings import worker_settings
from treestore.spark_failures import failure_line, rpc_failure_line, spark_errors

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_MASTER",
    "check_connect_server",
    "check_executors_python",
    "check_java",
    "check_master",
    "connect_session",
    "default_parallelism",
    "failure_line",
    "get_session",
    "is_connect",
    "note_interrupts",
    "session_key",
    "spark_errors",
    "verbose",
    "was_interrupted",
]

DEFAULT_MASTER = "local[*]"
MASTER_ENV = "TREESTORE_SPARK_MASTER"
VERBOSE_ENV = "TREESTORE_VERBOSE"
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


def is_connect(spark: object) -> bool:
    """Whether ``spark`` is a Spark Connect session (``SparkSession.builder.remote(...)``):
    it has no ``sparkContext``, no RDDs and no JVM gateway in this process, and its
    executors may not reach this process."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


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


CONNECT_SCHEME = "sc://"

CONNECT_SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
}
"""The settings of treestore's classic sessions that a Spark Connect session may set for
itself (the server owns the rest: its memory, its shuffle partitions, its UI)."""


def is_connect_url(master: str) -> bool:
    """Whether ``master`` names a Spark Connect server (``sc://HOST:PORT``)."""
    return master.startswith(CONNECT_SCHEME)


def _address(url: str) -> tuple[str, int]:
    """The host and port of ``sc://HOST:PORT[/;params]`` (the port defaults to 15002)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or 15002
    except ValueError:
        host = None
    if not host:
        raise SparkSetupError(f"The Spark Connect URL {url!r} is not valid: write sc://HOST:PORT.")
    return host, port


def check_connect_server(url: str, seconds: float = 5.0) -> None:
    """Raise :class:`SparkSetupError` at once if nothing listens at the server's port."""
    host, port = _address(url)
    try:
        with socket.create_connection((host, port), timeout=seconds):
            return
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
    raise SparkSetupError(
        f"Cannot reach the Spark Connect server {url} ({host}:{port}: {reason}): check the "
        "URL (--master or TREESTORE_SPARK_MASTER) and that the server runs."
    )


def connect_session(url: str) -> SparkSession:
    """A Spark Connect session on the server at ``url``, with treestore's session settings;
    one line (:class:`SparkSetupError`) when the server does not answer.

    The first calls to the server (the settings) retry for a few seconds only: something
    else listening at its port would keep the client's own retries going for ten minutes.
    """
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    check_connect_server(url)
    session = SparkSession.builder.remote(url).getOrCreate()  # no call to the server yet
    client = session.client  # type: ignore[attr-defined]
    patient = client.get_retry_policies()
    client.set_retry_policies([DefaultPolicy(max_retries=4, max_backoff=2000)])
    with warnings.catch_warnings():  # the client's own warning when it gives up
        warnings.simplefilter("ignore")
        try:
            for name, value in CONNECT_SETTINGS.items():
                session.conf.set(name, value)
        except Exception as exc:  # gRPC and PySpark raise many kinds; say it in one sentence
            with contextlib.suppress(Exception):
                session.stop()  # not kept as the process's session
            raise SparkSetupError(
                f"The Spark Connect server {url} did not answer as one: {rpc_failure_line(exc)}"
            ) from exc
        finally:
            client.set_retry_policies(patient)
    return session


def get_session(master: str | None = None, *, app_name: str = "treestore") -> SparkSession:
    """Return the process's SparkSession, creating it with treestore's settings.

    ``master`` defaults to ``$TREESTORE_SPARK_MASTER``, then ``local[*]``. A master
    ``sc://HOST:PORT`` opens a Spark Connect session on that server (:func:`connect_session`:
    no Java needed here).
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    chosen = master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER
    if is_connect_url(chosen):
        session = connect_session(chosen)
        logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)
        return session
    interrupts = len(_INTERRUPTS)
    check_java()
    if _interrupted_since(interrupts):
        raise KeyboardInterrupt
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
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
        # PySpark's DataFrame debugging sends each column function's Python call site to
        # the JVM: about nine round trips a function (a sweep's plan made 560, 0.2 s)
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
    )
    for name, value in worker_settings().items():
        builder = builder.config(f"spark.executorEnv.{name}", value)
    if chosen.startswith("local"):
        # One machine: a broadcast's blocks never cross a network, so compressing them
        # only costs time (0.23 s -> 0.17 s, median, to broadcast a sweep's 48 MB index).
        builder = builder.config("spark.broadcast.compress", "false")
    try:
        with _STARTING, _quiet_jvm() as jvm_output:  # one start at a time patches the launch
            session = builder.getOrCreate()
            if _interrupted_since(interrupts):  # stopped, so that its JVM goes too
                session.stop()
                raise KeyboardInterrupt
    except Exception as exc:  # py4j and the JVM raise many kinds; say it in one sentence
        if _follows_ctrl_c(exc):  # py4j's cleanup after a Ctrl-C failed in its place
            raise KeyboardInterrupt from exc
        said = f" (the JVM said: {jvm_output[0]})" if jvm_output else ""
        raise SparkSetupError(f"Spark could not start with master {chosen!r}: {exc}{said}") from exc
    session.sparkContext.setLogLevel("WARN" if verbose() else "FATAL")
    if _NOTING.is_set():
        note_interrupts()  # PySpark put its own Ctrl-C handler in place of the noting one
    # PySpark logs every failed DataFrame call as a JSON line on stderr before
    # raising; treestore turns those errors into its own messages instead.
    logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)
    return session


_INTERRUPTS: list[int] = []
"""One entry per Ctrl-C noted in this process: :func:`was_interrupted` and a session's
start compare how many there are with how many there were."""
_COMMAND_FROM = [0]
"""How many there were when the current command started (``note_interrupts(fresh=True)``)."""


def _interrupted_since(count: int) -> bool:
    """Whether, in the main thread, a Ctrl-C was noted since there were ``count``: one that
    came while a process was being forked (the JVM, ``java -version``) is swallowed by
    Python's fork hooks, never raised, yet it is the user's."""
    return len(_INTERRUPTS) != count and threading.current_thread() is threading.main_thread()


def _unraisable_but_ctrl_c(previous: Callable[[Any], object]) -> Callable[[Any], object]:
    """``sys.unraisablehook`` that says nothing of a noted Ctrl-C (a fork hook swallowed it;
    :func:`get_session` raises it again), and the rest as before."""

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _INTERRUPTS:
            return
        previous(unraisable)

    hook.ignores_ctrl_c = True  # type: ignore[attr-defined]
    return hook


_STARTING = threading.Lock()
"""Held while a session starts: two threads starting at once (the shell's background
start and a first query) would each put their launch in place of the other's."""

_NOTING = threading.Event()  # set once note_interrupts was called


def note_interrupts(*, fresh: bool = False) -> None:
    """Record every Ctrl-C (SIGINT) for :func:`was_interrupted`, keeping what the current
    handler does (PySpark's cancels the running jobs). Main thread only; idempotent.
    ``fresh`` forgets earlier Ctrl-Cs (a command line starting)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if fresh:
        _COMMAND_FROM[0] = len(_INTERRUPTS)
    _NOTING.set()
    previous = signal.getsignal(signal.SIGINT)
    if getattr(previous, "notes_interrupts", False):
        return

    def noted(signum: int, frame: FrameType | None) -> None:
        _INTERRUPTS.append(signum)
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    noted.notes_interrupts = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGINT, noted)
    if not getattr(sys.unraisablehook, "ignores_ctrl_c", False):
        sys.unraisablehook = _unraisable_but_ctrl_c(sys.unraisablehook)


def was_interrupted() -> bool:
    """Whether Ctrl-C was pressed since :func:`note_interrupts` (an error that follows it,
    such as a Spark call cut short, is its consequence, not a failure to report)."""
    return len(_INTERRUPTS) > _COMMAND_FROM[0]


def verbose() -> bool:
    """Whether the JVM's and Spark's own output should reach the user
    (``--verbose`` on the command line, or ``TREESTORE_VERBOSE=1``)."""
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


@contextmanager
def _quiet_jvm() -> Iterator[list[str]]:
    """Start the JVM inside the block with its stderr in an unnamed temporary file, so its
    launcher's lines (``WARNING: Using incubator modules: ...``) never reach the user;
    unless :func:`verbose`. Yields a list that holds the JVM's last line if the block fails.

    A JVM started in the block is killed if the block fails (a Ctrl-C while Spark starts,
    say): left alone, it could outlive this process, still starting, or stuck in its
    shutdown while its SparkContext was being made.
    """
    from pyspark import java_gateway
    from pyspark.core import context

    said: list[str] = []
    launch, popen = context.launch_gateway, java_gateway.Popen
    log = None if verbose() else tempfile.TemporaryFile()  # noqa: SIM115 (the JVM's for life)
    started: list[subprocess.Popen[bytes]] = []

    def recorded(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        """PySpark's Popen of the JVM, with Ctrl-C held off until the JVM is recorded: one
        that lands inside Popen (after the fork, before exec) would leave the JVM unknown
        to anyone. The JVM itself starts with Ctrl-C let through again."""
        child_setup = kwargs.get("preexec_fn")

        def setup() -> None:
            if child_setup is not None:
                child_setup()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

        held = threading.current_thread() is threading.main_thread()
        if held:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            started.append(popen(*args, **{**kwargs, "preexec_fn": setup}))
        finally:
            if held:  # a Ctrl-C that came meanwhile is raised here, the JVM recorded
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        return started[-1]

    def launch_quietly(conf: object = None, popen_kwargs: dict | None = None) -> object:
        quiet = {} if log is None else {"stdout": log, "stderr": log}
        java_gateway.Popen = recorded  # type: ignore[misc, assignment]
        try:
            return launch(conf, {**(popen_kwargs or {}), **quiet})
        finally:
            java_gateway.Popen = popen  # type: ignore[misc]

    context.launch_gateway = launch_quietly  # type: ignore[assignment]
    try:
        yield said
    except BaseException:
        _kill(started)
        if log is not None:
            log.seek(0)
            lines = [line.strip() for line in log.read().decode(errors="replace").splitlines()]
            said.extend(line for line in reversed(lines) if line and "incubator" not in line)
            del said[1:]
        raise
    finally:
        context.launch_gateway = launch
        if log is not None:
            log.close()  # the JVM keeps its own copy of the file


def _follows_ctrl_c(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while a Ctrl-C (KeyboardInterrupt) was being handled."""
    seen: BaseException | None = exc
    for _ in range(16):  # a chain of causes is short; never loop on a cycle
        if seen is None:
            return False
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _kill(jvms: list[subprocess.Popen[bytes]]) -> None:
    """Kill JVMs whose SparkContext did not start, and forget their gateway: a next
    session starts a JVM of its own. (A context that started stops as usual.)"""
    from pyspark import SparkContext

    if not jvms or SparkContext._active_spark_context is not None:
        return
    for jvm in jvms:
        jvm.kill()
        jvm.wait()
    SparkContext._gateway = SparkContext._jvm = None


def session_key(spark: SparkSession) -> str:
    """What tells ``spark`` from other sessions for answers kept per session: its Spark
    application's id, or a Spark Connect session's id."""
    if is_connect(spark):
        return str(spark.session_id)  # type: ignore[attr-defined]
    return str(spark.sparkContext.applicationId)


_PARALLELISM: dict[str, int] = {}


def default_parallelism(spark: SparkSession) -> int:
    """How many tasks the session's executors run at once (``defaultParallelism``).

    A Spark Connect session has no ``SparkContext`` to ask: its ``spark.default.parallelism``
    when the server sets it, else what a tiny job finds once per session (about 0.3 s, no
    shuffle): ``spark.range`` without a partition count makes that many partitions, and its
    last row is in the last one.
    """
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    key = session_key(spark)
    if key not in _PARALLELISM:
        setting = spark.conf.get("spark.default.parallelism", None)
        if setting and setting.strip().isdigit() and int(setting) > 0:
            _PARALLELISM[key] = int(setting)
        else:
            from pyspark.sql import functions as F

            rows = 1 << 16
            last = spark.range(0, rows).where(F.col("id") == rows - 1)
            found = last.select(F.spark_partition_id().alias("partition")).collect()
            _PARALLELISM[key] = int(found[0][0] if found else 0) + 1
    return _PARALLELISM[key]


_EXECUTORS_CHECKED: dict[str, str | None] = {}


def check_executors_python(spark: SparkSession | None) -> None:
    """Raise :class:`SparkSetupError` up front if the session's executors run a Python that
    cannot import treestore's packages (a user's session started without
    ``PYSPARK_PYTHON``: its workers run ``python3``, which lacks pyarrow), saying what to
    set. Cheap when the workers' Python is this one; otherwise one tiny job, once per
    session (the answer is kept)."""
    if spark is None:
        return
    if is_connect(spark):  # the server's workers: no context tells their Python
        key = f"connect:{session_key(spark)}"
        if key not in _EXECUTORS_CHECKED:
            _EXECUTORS_CHECKED[key] = _probe_connect_executors(spark)
        problem = _EXECUTORS_CHECKED[key]
        if problem is not None:
            raise SparkSetupError(problem)
        return
    context = spark.sparkContext
    workers = str(context.pythonExec or "python3")
    found = shutil.which(workers)
    if found and _same_python(found, sys.executable):
        return
    key = str(context.applicationId)
    if key not in _EXECUTORS_CHECKED:
        _EXECUTORS_CHECKED[key] = _probe_executors(spark, workers)
    problem = _EXECUTORS_CHECKED[key]
    if problem is not None:
        raise SparkSetupError(problem)


def _same_python(one: str, other: str) -> bool:
    """Whether two Python paths run the same environment: the same binary in the same
    folder (a venv's ``python`` is a link to its base interpreter, which lacks the venv's
    packages, so the binary alone does not tell)."""
    return os.path.dirname(os.path.abspath(one)) == os.path.dirname(
        os.path.abspath(other)
    ) and os.path.realpath(one) == os.path.realpath(other)


def _probe_executors(spark: SparkSession, workers: str) -> str | None:
    """What the executors' Python lacks, as the message to show (None: nothing)."""

    def probe(_: object) -> Iterator[tuple[str, list[str]]]:  # pickled by value
        import importlib
        import sys as worker_sys

        missing = []
        for name in ("pyarrow", "numpy", "treestore", "query", "loaders"):
            try:
                importlib.import_module(name)
            except ImportError:
                missing.append(name)
        yield worker_sys.executable, missing

    try:
        answers = spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()
    except Exception as exc:  # the workers could not even start
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        if not isinstance(exc, PySparkException | Py4JError):
            raise
        return (
            f"The session's workers run {workers}, which cannot run treestore's tasks "
            f"({failure_line(exc)}): {_what_to_set()}"
        )
    lacking = sorted({name for _, missing in answers for name in missing})
    if not lacking:
        return None
    return (
        f"The session's workers run {answers[0][0] or workers}: the executors' Python cannot "
        f"import {', '.join(lacking)}: {_what_to_set()}"
    )


def _probe_connect_executors(spark: SparkSession) -> str | None:
    """What a Spark Connect server's workers lack, as the message to show (None: nothing).

    One single-row ``mapInArrow`` job: about 0.2 s on a server whose Python workers run,
    1 s when it must start one (which the session's first task would start anyway).
    """
    from pyspark.errors import PySparkException

    def probe(batches: Iterator[Any]) -> Iterator[Any]:  # pickled by value
        import importlib
        import sys as worker_sys

        import pyarrow as worker_arrow

        for _ in batches:
            pass
        missing = []
        for name in ("numpy", "treestore", "query", "loaders"):
            try:
                importlib.import_module(name)
            except ImportError:
                missing.append(name)
        yield worker_arrow.RecordBatch.from_pydict(
            {"python": [worker_sys.executable], "missing": [",".join(missing)]}
        )

    try:
        rows = spark.range(0, 1, 1, 1).mapInArrow(probe, "python string, missing string").collect()
    except PySparkException as exc:  # the workers could not even start
        return (
            f"The Spark Connect server's workers cannot run treestore's tasks "
            f"({failure_line(exc)}): {_what_to_set_on_server()}"
        )
    lacking = sorted({name for row in rows for name in str(row["missing"]).split(",") if name})
    if not lacking:
        return None
    return (
        f"The Spark Connect server's workers run {rows[0]['python']}, which cannot import "
        f"{', '.join(lacking)}: {_what_to_set_on_server()}"
    )


def _what_to_set_on_server() -> str:
    return (
        "start the server with PYSPARK_PYTHON set to a Python that has treestore installed "
        "(or treestore's folder on its PYTHONPATH), on every node of its cluster."
    )


def _what_to_set() -> str:
    return (
        f"set PYSPARK_PYTHON={sys.executable} (the Python treestore runs in) before the "
        "SparkSession is created, install treestore on every node, or ship the project's "
        "environment to the executors (README: Running on a cluster)."
    )
