"""The README's and the docs' snippets, read and run as the pages show them.

A page's fenced blocks, by their language (the word after the fence):

- ``console``: a transcript. A line ``$ COMMAND`` (a trailing ``\\`` goes on on the
  next line) is typed as a user types it after ``make demo`` with ``.venv/bin`` on
  PATH; the lines after it, to the next ``$`` line, are what it prints (stdout and
  stderr as a terminal shows them, in order). ``# exit N`` after a command is its exit
  status (else 0). ``treestore ...`` (or ``.venv/bin/treestore ...``, after ``NAME=value``
  settings, or fed by ``... |``) runs in this process through :func:`shell.cli.main`, on
  the run's one SparkSession; ``treestore serve ... &`` starts the service in a process
  of its own on a free port (the page's ``127.0.0.1:8040`` is rewritten to it, and
  back in what it prints); any other command runs in ``sh``. The page's folder shows
  as ``/home/you/tour`` where a program prints it.
- ``pycon``: ``>>>`` examples, run in order in one namespace per page; each one's
  output is compared with the lines under it.
- ``python``: run in that namespace too; it must print nothing (a result worth
  showing goes in a ``pycon`` block).
- ``sh``, ``bash``, ``shell``: commands that are not run here; such a block must carry
  ``<!-- not run: REASON -->``.
- anything else (``json``, ``toml``, ``text``, ...) is text, not run; with
  ``<!-- file: PATH -->`` before it, it is written to PATH in the page's folder first.

An HTML comment on the line before a fence says more: ``<!-- not run: REASON -->``
(any block), ``<!-- file: PATH -->``, ``<!-- one command -->`` (a console block whose
first ``$`` line is its only command: the rest is its output, ``$`` lines included, as
the demo prints them).

Comparisons mask what changes from run to run (:func:`mask`), ignore the lines a
command prints while it starts Spark (the test's session is already running) and
Spark's stage lines, and take a line ``...`` as any number of lines.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import doctest
import io
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

from tests.support.serve_server import ROOT, ServeProcess, free_port

__all__ = [
    "Block",
    "PageRun",
    "blocks_of",
    "mask",
    "matches",
    "parse_transcript",
]

RUN_LANGUAGES = {"console", "pycon", "python"}
NOT_RUN_LANGUAGES = {"sh", "bash", "shell", "zsh"}
_DIRECTIVE = re.compile(r"<!--\s*(not run|file|one command)\s*(?::\s*(.*?))?\s*-->\s*$")
_FENCE = re.compile(r"^(```+)\s*([\w+-]*)\s*$")
_EXIT = re.compile(r"\s+#\s*exit(?: status)? (\d+)\s*$")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SPARK_START = re.compile(r"^(starting Spark…( \d+ s)?|Spark started in [\d.]+ s)$")
_STAGE = re.compile(r"^spark stage \d+ done\b")
DOC_PORT = 8040
"""The port the pages show for ``treestore serve``."""
SHOWN_FOLDER = "/home/you/tour"
"""How the pages show the folder their examples run in, where a program prints it."""


@dataclasses.dataclass
class Block:
    """One fenced block of a page: its language, text, place (0-based line numbers of
    its first text line and of its closing fence) and the directives before it."""

    language: str
    text: str
    start: int
    end: int
    not_run: str | None = None
    file: str | None = None
    one_command: bool = False

    @property
    def runs(self) -> bool:
        """Whether the test runs it (or writes it, for a file)."""
        return self.not_run is None and (self.language in RUN_LANGUAGES or self.file is not None)


def blocks_of(text: str) -> list[Block]:
    """The fenced blocks of a page, with their directives.

    >>> [b.language for b in blocks_of("<!-- not run: no S3 -->\\n```sh\\nls\\n```\\n")]
    ['sh']
    >>> blocks_of("```console\\n$ treestore --version\\n```\\n")[0].text
    '$ treestore --version\\n'
    """
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        close = next(
            (i for i in range(index + 1, len(lines)) if lines[i].rstrip() == fence[1]),
            None,
        )
        if close is None:
            raise ValueError(f"line {index + 1}: a fence that never closes")
        block = Block(
            fence[2], "".join(f"{x}\n" for x in lines[index + 1 : close]), index + 1, close
        )
        above = index - 1
        while above >= 0 and (directive := _DIRECTIVE.match(lines[above].strip())):
            kind, value = directive[1], (directive[2] or "").strip()
            if kind == "not run":
                block.not_run = value
            elif kind == "file":
                block.file = value
            else:
                block.one_command = True
            above -= 1
        blocks.append(block)
        index = close + 1
    return blocks


@dataclasses.dataclass
class Step:
    """A transcript's command, what it prints and its exit status."""

    command: str
    output: list[str]
    status: int
    first: int  # the block line of its output's first line
    last: int  # one past its output's last line


def parse_transcript(block: Block) -> list[Step]:
    """The commands of a ``console`` block.

    >>> block = Block("console", "$ a \\\\\\n    b  # exit 2\\nout\\n\\n$ c\\n", 0, 5)
    >>> [(s.command, s.output, s.status) for s in parse_transcript(block)]
    [('a b', ['out'], 2), ('c', [], 0)]
    """
    lines = block.text.splitlines()
    steps: list[Step] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("$ "):
            raise ValueError(f"a console block starts with a '$ ' line, not {line!r}")
        command = line[2:]
        while command.endswith("\\") and index + 1 < len(lines):
            index += 1
            command = command[:-1].rstrip() + " " + lines[index].strip()
        status = 0
        if found := _EXIT.search(command):
            status = int(found[1])
            command = command[: found.start()]
        index += 1
        first = index
        if block.one_command:
            index = len(lines)
        while index < len(lines) and not lines[index].startswith("$ "):
            index += 1
        output = lines[first:index]
        while output and output[-1] == "":
            output.pop()
        steps.append(Step(command.strip(), output, status, first, first + len(output)))
    return steps


_MASKS = (
    (re.compile(r"\d{8}T\d{6}(-[0-9a-f]{6,})?"), "LOAD"),
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?"), "TIME"),
    (re.compile(r"\b\d+(\.\d+)? ?(s|ms|us)\b"), "N s"),
    (re.compile(r"\bspark stage \d+"), "spark stage N"),
    (re.compile(r"\bpid \d+"), "pid N"),
)


def mask(text: str, host: str | None = None) -> str:
    """``text`` with what moves between runs masked: times (``12.3 s`` is ``N s``),
    timestamps, load ids, Spark's stage numbers, pids and the host's name.

    >>> mask("published version 1 in 5.176 s (27.1 s in all); spark stage 12 done")
    'published version 1 in N s (N s in all); spark stage N done'
    >>> mask("5 shards, 2 task(s), lag 5.0 s")
    '5 shards, 2 task(s), lag N s'
    """
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    if host:
        text = text.replace(host, "HOST")
    return text


def matches(expected: list[str], actual: list[str], host: str | None = None) -> bool:
    """Whether ``actual`` reads as ``expected`` once masked; a line ``...`` in
    ``expected`` stands for any number of lines. Left out: the lines a command prints
    while it starts Spark, and Spark's stage lines (their number and order follow Spark's
    plan and its threads' timing).

    >>> matches(["a 1.5 s", "...", "z"], ["a 0.2 s", "b", "c", "z"])
    True
    >>> matches(["starting Spark…", "Spark started in 4.1 s", "x"], ["x"])
    True
    >>> matches(["spark stage 3 done: 1 task(s)", "x"], ["x", "spark stage 9 done: 2 task(s)"])
    True
    >>> matches(["a"], ["b"])
    False
    """
    wanted = [
        line
        for line in expected
        if not (_SPARK_START.match(line.strip()) or _STAGE.match(line.strip()))
    ]
    actual = [line for line in actual if not _STAGE.match(line.strip())]
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line.strip() == "..." else re.escape(mask(line, host).rstrip()) + r"\n"
        for line in wanted
    )
    got = "".join(mask(line, host).rstrip() + "\n" for line in actual)
    return re.fullmatch(pattern, got) is not None


class _Tee(io.StringIO):
    """One buffer for stdout and stderr, as a terminal shows them (not a terminal)."""

    def isatty(self) -> bool:
        return False


@dataclasses.dataclass
class Mismatch:
    """A snippet whose output differs from the page, or that failed."""

    where: str
    expected: list[str]
    actual: list[str]
    # the block's lines [first, last) to replace with ``actual`` when regenerating
    block: Block | None = None
    first: int = 0
    last: int = 0

    def report(self) -> str:
        diff = difflib.unified_diff(self.expected, self.actual, "page", "program", lineterm="", n=2)
        return f"{self.where}:\n" + "\n".join(diff)


class PageRun:
    """Runs a page's blocks in order in one folder, one namespace, one environment."""

    def __init__(self, page: Path, folder: Path, venv_bin: Path) -> None:
        self.page = page
        self.folder = folder
        self.venv_bin = venv_bin
        self.namespace: dict[str, object] = {"__name__": "__docs__"}
        self.mismatches: list[Mismatch] = []
        self.ran: list[Block] = []
        self.skipped: list[Block] = []
        self.port: int | None = None
        self.servers: list[ServeProcess] = []
        self.host = socket.gethostname()

    # where ---------------------------------------------------------------------------
    def _where(self, block: Block, line: int = 0) -> str:
        return f"{self.page.name} line {block.start + line + 1}"

    def _to_real(self, text: str) -> str:
        if self.port is None:
            return text
        return text.replace(f"127.0.0.1:{DOC_PORT}", f"127.0.0.1:{self.port}")

    def _to_page(self, text: str) -> str:
        text = text.replace(str(self.folder), SHOWN_FOLDER)
        if self.port is not None:
            text = text.replace(f"127.0.0.1:{self.port}", f"127.0.0.1:{DOC_PORT}")
            text = text.replace(f":{self.port}/", f":{DOC_PORT}/")
        return text

    # the page ------------------------------------------------------------------------
    def run(self, blocks: list[Block]) -> None:
        """Run every block (in the page's folder); stop the servers it started."""
        try:
            for block in blocks:
                if block.not_run is not None:
                    self.skipped.append(block)
                elif block.file is not None:
                    target = self.folder / block.file
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(block.text)
                    self.ran.append(block)
                elif block.language == "console":
                    self.ran.append(block)
                    self._console(block)
                elif block.language == "pycon":
                    self.ran.append(block)
                    self._pycon(block)
                elif block.language == "python":
                    self.ran.append(block)
                    self._python(block)
        finally:
            for server in self.servers:
                server.stop()

    def _console(self, block: Block) -> None:
        for step in parse_transcript(block):
            status, printed = self.command(step.command)
            actual = self._to_page(printed).rstrip("\n").split("\n") if printed else []
            where = f"{self._where(block, step.first - 1)}: $ {step.command}"
            if status != step.status:
                actual = [*actual, f"(exit status {status}, the page says {step.status})"]
            if status != step.status or not matches(step.output, actual, self.host):
                self.mismatches.append(
                    Mismatch(where, step.output, actual, block, step.first, step.last)
                )

    def _pycon(self, block: Block) -> None:
        examples = doctest.DocTestParser().get_examples(block.text)
        for number, example in enumerate(examples):
            got = self._execute(example.source, "single", self._where(block, example.lineno))
            expected = example.want.replace("<BLANKLINE>", "").rstrip("\n")
            expected_lines = expected.split("\n") if expected else []
            actual = self._to_page(got).rstrip("\n")
            actual_lines = actual.split("\n") if actual else []
            if not matches(expected_lines, actual_lines, self.host):
                first = example.lineno + example.source.count("\n")
                following = (
                    examples[number + 1].lineno
                    if number + 1 < len(examples)
                    else len(block.text.splitlines())
                )
                self.mismatches.append(
                    Mismatch(
                        f"{self._where(block, example.lineno)}: >>> {example.source.strip()}",
                        expected_lines,
                        actual_lines,
                        block,
                        first,
                        min(first + len(expected_lines), following),
                    )
                )

    def _python(self, block: Block) -> None:
        printed = self._execute(block.text, "exec", self._where(block))
        if printed:
            self.mismatches.append(
                Mismatch(f"{self._where(block)}: a python block printed", [], printed.splitlines())
            )

    def _execute(self, source: str, mode: str, where: str) -> str:
        """Run Python source in the page's namespace; what it printed (or its error, as
        doctest shows one)."""
        buffer = _Tee()
        with self._inside(), contextlib.redirect_stdout(buffer):
            try:
                code = compile(self._to_real(source), where, mode)
                exec(code, self.namespace)
            except Exception as exc:
                lines = traceback.format_exception_only(type(exc), exc)
                buffer.write("Traceback (most recent call last):\n  ...\n" + "".join(lines))
        return buffer.getvalue()

    @contextlib.contextmanager
    def _inside(self, env: dict[str, str] | None = None) -> Iterator[None]:
        """In the page's folder, with ``.venv/bin`` first on PATH and ``env`` set."""
        saved_env = dict(os.environ)
        saved_cwd = Path.cwd()
        saved_argv = sys.argv
        os.environ["PATH"] = f"{self.venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"
        os.environ.update(env or {})
        os.chdir(self.folder)
        # the command as a user runs it, so that it echoes commands as they would type them
        sys.argv = [str(self.venv_bin / "treestore")]
        try:
            yield
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            sys.argv = saved_argv

    # commands ------------------------------------------------------------------------
    def command(self, command: str) -> tuple[int, str]:
        """Run one transcript command; its exit status and what it printed."""
        command = self._to_real(command)
        feed = None
        piped = re.fullmatch(r"(.+?)\s+\|\s+((?:\.venv/bin/)?treestore\s.*)", command)
        if piped:
            status, fed = self._sh(piped[1], capture_stderr=False)
            if status != 0:
                return status, fed
            feed, command = fed, piped[2]
        words = shlex.split(command, comments=True)
        env = {}
        while words and _ASSIGNMENT.match(words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        if words and words[0] in ("treestore", ".venv/bin/treestore"):
            if words[-1] == "&" and words[1:2] == ["serve"]:
                return self._serve(words[1:-1], env)
            return self._cli(words[1:], env, feed)
        if any(w == "treestore" or w.endswith("/treestore") for w in words):
            raise AssertionError(f"a command that would start treestore in a shell: {command}")
        return self._sh(command)

    def _cli(self, argv: list[str], env: dict[str, str], feed: str | None) -> tuple[int, str]:
        from shell.cli import main

        buffer = _Tee()
        stdin = _Tee(feed or "")
        with (
            self._inside(env),
            contextlib.redirect_stdout(buffer),
            contextlib.redirect_stderr(buffer),
        ):
            saved_stdin, sys.stdin = sys.stdin, stdin
            try:
                status = main(argv)
            except SystemExit as exc:  # --help, and argparse's usage errors
                status = exc.code if isinstance(exc.code, int) else 1
            finally:
                sys.stdin = saved_stdin
        return status, buffer.getvalue()

    def _sh(self, command: str, capture_stderr: bool = True) -> tuple[int, str]:
        with self._inside():
            done = subprocess.run(
                ["sh", "-c", command],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if capture_stderr else None,
                text=True,
                timeout=120,
                check=False,
            )
        return done.returncode, done.stdout

    def _serve(self, argv: list[str], env: dict[str, str]) -> tuple[int, str]:
        """``treestore serve ... &``: its own process (serving stops the process's
        session at the end), on a free port; returns once it answers ``/health``."""
        port = free_port()
        log = self.folder / f".serve-{port}.log"
        pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        with self._inside({**env, "PYTHONPATH": pythonpath}), log.open("wb") as output:
            server = subprocess.Popen(
                [sys.executable, "-m", "treestore", *argv, "--port", str(port)],
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        served = ServeProcess(f"http://127.0.0.1:{port}", server, log, "", {})
        self.servers.append(served)
        self.port = port
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if server.poll() is not None:
                break
            with contextlib.suppress(OSError):
                served.get_json("/health")
                return 0, ""
            time.sleep(0.1)
        return 1, served.output()

    # regenerating ----------------------------------------------------------------------
    def rewrite(self) -> int:
        """Write the program's outputs into the page where they differ; how many."""
        lines = self.page.read_text().splitlines()
        changes = sorted(
            (m for m in self.mismatches if m.block is not None),
            key=lambda m: (m.block.start + m.first) if m.block else 0,
            reverse=True,
        )
        for change in changes:
            assert change.block is not None
            start = change.block.start + change.first
            actual = [line for line in change.actual if not line.startswith("(exit status ")]
            lines[start : change.block.start + change.last] = actual
        self.page.write_text("".join(f"{x}\n" for x in lines))
        return len(changes)


def venv_bin() -> Path:
    """The folder of this Python, where ``make`` installed the ``treestore`` command."""
    return Path(sys.executable).parent


def has_command(name: str) -> bool:
    """Whether ``name`` is on PATH (``curl`` for the service's examples)."""
    return shutil.which(name) is not None
