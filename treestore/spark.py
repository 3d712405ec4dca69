"""Creating the SparkSession, for entry points only.

Library code takes a SparkSession as an argument; only the command line, the
public ``treestore.open`` facade and test fixtures call :func:`get_session`.
"""

from __future__ import annotations

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from treestore.errors import SparkSetupError, TreestoreError
from treestore.settings import worker_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_MASTER",
    "check_executors_python",
    "check_java",
    "check_master",
    "failure_line",
    "get_session",
    "is_connect",
    "note_interrupts",
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


def get_session(master: str | None = None, *, app_name: str = "treestore") -> SparkSession:
    """Return the process's SparkSession, creating it with treestore's settings.

    ``master`` defaults to ``$TREESTORE_SPARK_MASTER``, then ``local[*]``.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    interrupts = len(_INTERRUPTS)
    check_java()
    if _interrupted_since(interrupts):
        raise KeyboardInterrupt
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


_EXECUTORS_CHECKED: dict[str, str | None] = {}


def check_executors_python(spark: SparkSession | None) -> None:
    """Raise :class:`SparkSetupError` up front if the session's executors run a Python that
    cannot import treestore's packages (a user's session started without
    ``PYSPARK_PYTHON``: its workers run ``python3``, which lacks pyarrow), saying what to
    set. Cheap when the workers' Python is this one; otherwise one tiny job, once per
    session (the answer is kept)."""
    if spark is None:
        return
    try:
        context = spark.sparkContext
    except Exception:  # a Spark Connect session has no context to ask
        return
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


def _what_to_set() -> str:
    return (
        f"set PYSPARK_PYTHON={sys.executable} (the Python treestore runs in) before the "
        "SparkSession is created, install treestore on every node, or ship the project's "
        "environment to the executors (README: Running on a cluster)."
    )


_PYTHON_EXCEPTION = "org.apache.spark.api.python.PythonException"
_OURS = re.compile(r"^treestore\.errors\.\w+: ")
_READING_FILE = re.compile(r"while reading file (\S+?)\.?(?:\s|$)")


def _java_chain(exc: BaseException) -> list[tuple[str, str]]:
    """The Java exceptions behind ``exc``, outermost first, as (class, message): a py4j
    error's Java exception and its causes (``getCause``) to the root; empty when there is
    none or the JVM cannot be asked."""
    throwable = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    chain: list[tuple[str, str]] = []
    try:
        while throwable is not None and len(chain) < 50:
            chain.append((str(throwable.getClass().getName()), str(throwable.getMessage() or "")))
            cause = throwable.getCause()
            throwable = None if cause is None or cause.equals(throwable) else cause
    except Exception:  # the JVM is gone or the object is not a Throwable: use the text
        return chain
    return chain


def _last_python_exception(text: str) -> str | None:
    """The final exception line of the last Python traceback in ``text`` (a task's error
    as the JVM passes it on): the first unindented line after the traceback's frames."""
    lines = text.splitlines()
    starts = [
        i for i, line in enumerate(lines) if line.endswith("Traceback (most recent call last):")
    ]
    if not starts:
        return None
    for line in lines[starts[-1] + 1 :]:
        if line.strip() and not line[:1].isspace():
            return line.strip()
    return None


def _java_line(name: str, message: str) -> str:
    """A Java exception in one line: Spark's own say what they are in their message; other
    classes say it in their name (``java.io.IOException: File too large``)."""
    said = _first_line(message)
    if said and name.startswith("org.apache.spark."):
        return said
    return f"{name}: {said}" if said else name


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _said(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # str() of a py4j error asks the JVM, which may be gone
        return type(exc).__name__


def failure_line(exc: BaseException) -> str:
    """A failed Spark job's cause in one line.

    A Python task's own exception (the final line of its traceback: ``UnicodeDecodeError:
    ...``; treestore's errors without their class, as they name the input file), a Java
    failure's root cause (``java.io.IOException: File too large``, from the chain of
    ``getCause``, with the file Spark was reading when it says so), a dead Python worker,
    or executors that cannot import treestore; else the first line of the error.
    """
    chain = _java_chain(exc)
    text = "\n".join([_said(exc), *(message for _, message in chain)])
    missing = re.search(r"No module named '([\w.]+)'", text)
    if missing:
        return (
            f"the executors' Python cannot import {missing.group(1)!r}: install treestore "
            "on every node, or ship the project's environment to the executors (README: "
            "Running on a cluster)"
        )
    python_texts = [message for name, message in chain if name == _PYTHON_EXCEPTION]
    raised = _last_python_exception(python_texts[-1] if python_texts else text)
    if raised is None and "Python worker exited unexpectedly" in text:
        return "a Python worker died (it crashed or was killed); nothing was published"
    if raised is None and chain:
        raised = _java_line(*chain[-1])
        reading = [found.group(1) for _, m in chain if (found := _READING_FILE.search(m))]
        if reading and reading[0] not in raised:
            raised += f" (reading {reading[0]})"
    if raised is None:
        raised = _first_line(text) or type(exc).__name__
    return _OURS.sub("", raised)[:500]


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
