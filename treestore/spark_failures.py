"""A failed Spark job's cause in one line: what :func:`spark_errors` raises instead of
py4j's or PySpark's exceptions and their JVM stack traces.

Classic sessions hand over the Java exception (py4j), whose chain of causes is asked of
the JVM; Spark Connect sessions raise ``pyspark.errors.exceptions.connect`` exceptions
whose text carries the server's Python traceback (a task's own error) and whose server
stack trace names the chain of causes (``Caused by: CLASS: MESSAGE`` lines). Both give
the same line for the same failure. A call to a Spark Connect server that fails before
any job (the server does not answer as one) is one line too: :func:`rpc_failure_line`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextlib import contextmanager

from treestore.errors import TreestoreError

__all__ = ["failure_line", "rpc_failure_line", "spark_errors"]

_PYTHON_EXCEPTION = "org.apache.spark.api.python.PythonException"
_OURS = re.compile(r"^treestore\.errors\.\w+: ")
_READING_FILE = re.compile(r"while reading file (\S+?)\.?(?:\s|$)")


_CAUSED_BY = re.compile(r"^Caused by: ([\w.$]+): ?(.*)$")


def _connect_chain(exc: BaseException) -> list[tuple[str, str]]:
    """The Java exceptions behind a Spark Connect error, outermost first, as (class,
    message): the server's stack trace names its causes (``Caused by: CLASS: MESSAGE``,
    each message's first line), after the root's class on its first line."""
    get_trace = getattr(exc, "getStackTrace", None)
    trace = get_trace() if callable(get_trace) else None
    if not trace:
        return []
    lines = str(trace).splitlines()
    message = getattr(exc, "getMessage", None)
    chain = [(lines[0].strip(), str(message() if callable(message) else exc))]
    for line in lines[1:]:
        found = _CAUSED_BY.match(line)
        if found:
            chain.append((found.group(1), found.group(2)))
    return chain


def _is_connect_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("pyspark.errors.exceptions.connect")


def _java_chain(exc: BaseException) -> list[tuple[str, str]]:
    """The Java exceptions behind ``exc``, outermost first, as (class, message): a py4j
    error's Java exception and its causes (``getCause``) to the root, or those a Spark
    Connect error's server stack trace names; empty when there is none or the JVM cannot
    be asked."""
    if _is_connect_error(exc):
        return _connect_chain(exc)
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
    trace (a Spark Connect session: ``pyspark.errors.exceptions.connect`` ones, with the
    server's Python traceback or stack trace); users get one line instead, the same for
    both kinds of session.
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


def rpc_failure_line(exc: BaseException) -> str:
    """A failed call to a Spark Connect server in one line (gRPC's own errors say it in
    their details)."""
    said = ""
    for cause in (exc, exc.__cause__, exc.__context__):
        details = getattr(cause, "details", None)
        if callable(details) and not said:
            with contextlib.suppress(Exception):
                said = str(details() or "")
    said = said or str(exc)
    return next((line.strip() for line in said.splitlines() if line.strip()), type(exc).__name__)
