"""Fuzzing the three parsers: inputs (hypothesis strategies), what one input gives, a tally.

Each parser is tried the way a user reaches it:

- ``path``: :func:`query.parse_path`; a parse must print back to a text that parses to
  the same path (the canonical form).
- ``ops``: :func:`query.compile_ops`, then the pipeline over two small row sets (rows of
  awkward values, and one of the ops fixtures' inputs, chosen by the text), at most
  :data:`MOST_ROWS_READ` rows read from each; ``sleep`` does not wait.
- ``job``: the text written to a job file (``.json``, or ``.toml`` for TOML texts) and
  :func:`loaders.job.model.load_job`.

Whatever the text, the outcome is a parse or a :class:`~treestore.errors.PositionedError`
whose line and column lie within the text (lines counted as lark counts them, at
``"\\n"`` only); anything else is a crash. Inputs are random text and token soup rich
in awkward characters (``\\r``, ``\\x0b``, ``\\x1c``, ``\\u2028``, ``\\x85``, lone
surrogates, NUL, huge digit runs) and mutations of a corpus of valid inputs: the
project's test vectors and the demo's job, so that the fuzz reaches deep into each
grammar.
"""

from __future__ import annotations

import json
import re
import tempfile
import traceback
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from itertools import islice
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from loaders.filters.kinds import BUNDLE_FILTERS, VALUE_FILTERS
from loaders.job.model import load_job
from query import compile_ops, parse_path
from query.ops import REGISTRY, row_ops
from treestore.errors import PositionedError

PARSERS = ("path", "ops", "job")
MOST_ROWS_READ = 200
"""Rows read from a compiled pipeline per row set (``trans`` of a wide row is long)."""

FIXTURES = Path(__file__).resolve().parents[2]

NASTY_CHARACTERS = (
    "\r",
    "\n",
    "\r\n",
    "\t",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x1d",
    "\x1e",
    "\x1f",
    "\x85",
    "\u2028",
    "\u2029",
    "\ud800",
    "\udc80",
    "\udfff",
    "\x00",
    "\ufeff",
    "\u00b2",  # a digit to str.isdigit, not to int()
    "\u0663",  # an Arabic-Indic digit: int() reads it
    "\U0001f600",
    "\\",
    '"',
    "'",
    " ",
)
"""Characters that have broken parsers: line ends other than \\n, surrogates, odd digits."""

NASTY_WORDS = (
    "9" * 5000,
    "9" * 25,
    "9" * 19,
    "9223372036854775808",
    "-9223372036854775809",
    "0" * 40 + "1",
    "999999",
    "1000000",
    "99999999999",
    "-1",
    "1e400",
    "-1e400",
    "1e-400",
    "nan",
    "inf",
    "Infinity",
    "NaN",
    "0.5",
    "\\u0000",
    "\\ud800",
    "\\udfff",
    "\\ud83d\\ude00",
    '\\"',
    "\\\\",
    "\\;",
    "//",
    "/*",
    "[" * 300,
    "{" * 150,
    "(" * 300,
)
"""Words that have broken parsers: numbers past every limit, escapes, deep nesting."""


# ---------------------------------------------------------------- the corpora


def _fixture_lines(relative: str) -> list[str]:
    path = FIXTURES / relative
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@cache
def path_corpus() -> tuple[str, ...]:
    """Valid (and some refused) paths: the syntax and walk test vectors."""
    found: list[str] = []
    for line in _fixture_lines("query/syntax/fixtures/path_identity.txt"):
        if line and not line.startswith("#"):
            found.append(line)
    for line in _fixture_lines("query/syntax/fixtures/path_errors.txt"):
        if line and not line.startswith("#"):
            found.append(line.split("\t")[0])
    for relative in (
        "query/syntax/fixtures/hydra/parse.txt",
        "query/walk/fixtures/hydra/paths.txt",
    ):
        found += [line[6:] for line in _fixture_lines(relative) if line.startswith("path: ")]
    rows = _fixture_lines("query/walk/fixtures/path_rows.txt")
    found += [line for line in rows if line and not line.startswith(("#", "["))]
    return tuple(dict.fromkeys(found)) or ("root/+:nodes>1/+/+",)


@cache
def ops_corpus() -> tuple[str, ...]:
    """Valid op strings: the golden op rows and Hydra's op tests."""
    found: list[str] = []
    golden = [
        line
        for line in _fixture_lines("query/ops/fixtures/ops_rows.txt")
        if not line.startswith("#")
    ]
    found += golden[0::3]
    for path in sorted((FIXTURES / "query/ops/fixtures/hydra").glob("*.txt")):
        found += [line[4:] for line in path.read_text().splitlines() if line.startswith("ops ")]
    return tuple(dict.fromkeys(op for op in found if op)) or ("merge=kij",)


AWKWARD_ROWS: tuple[tuple[Any, ...], ...] = (
    ("a", 1, "x"),
    ("a", "2", None),
    ("b", "-3", "1.5"),
    ("b", "nan", "inf"),
    ("c", "1e400", "-1e400"),
    ("c", "9" * 30, "-" + "9" * 30),
    ("", 9223372036854775807, -9223372036854775808),
    (None, 0.0, float("inf")),
    ("\u00b2", "\u0663", "\U0001f600"),
    (),
)
"""Rows of values that have broken ops: non-finite reals, numbers past a long, odd digits."""


@cache
def row_sets() -> tuple[tuple[tuple[Any, ...], ...], ...]:
    """Small tables to run pipelines over: the ops fixtures' inputs, a few rows, none."""
    found: list[tuple[tuple[Any, ...], ...]] = [AWKWARD_ROWS[:3], ()]
    texts = [
        line for line in _fixture_lines("query/ops/fixtures/ops_rows.txt") if line.startswith("[")
    ][0::2]
    for path in sorted((FIXTURES / "query/ops/fixtures/hydra").glob("*.txt")):
        texts += [line[3:] for line in path.read_text().splitlines() if line.startswith("in ")]
    for text in texts:
        try:
            rows = json.loads(text)
        except ValueError:
            continue
        if isinstance(rows, list) and len(rows) <= 20 and all(isinstance(r, list) for r in rows):
            found.append(tuple(tuple(r) for r in rows))
    return tuple(dict.fromkeys(found))


def _toml_value(value: Any) -> str:
    """``value`` as a TOML inline value (enough for job files)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


def _as_toml(job: dict[str, Any]) -> str:
    return "".join(f"{key} = {_toml_value(value)}\n" for key, value in job.items())


@cache
def job_corpus() -> tuple[tuple[str, str], ...]:
    """Valid job files as (suffix, text): the demo's job, and with each filter of the filter
    tests in its map and on a tree element; a few as TOML."""
    from shell.demo import DEMO_JOB
    from tests.support.filter_cases import BUNDLE_CASES, VALUE_CASES

    base = json.loads(json.dumps(DEMO_JOB))
    jobs: list[dict[str, Any]] = [base]
    for spec, *_ in BUNDLE_CASES:
        job = json.loads(json.dumps(base))
        job["map"]["filter_in"] = spec
        jobs.append(job)
    for spec, *_ in VALUE_CASES:
        job = json.loads(json.dumps(base))
        element = {"type": "value", "key": "UID", "filter": {"op": "field", "from": "A"}}
        element["filter"]["filter"] = spec  # type: ignore[index]
        job["tree"]["root"].append(element)
        jobs.append(job)
    pending = json.loads(json.dumps(base))
    pending["tree"]["root"][1]["list"][1][0]["pending"] = {"loads": 3, "time": "T", "delay": 5}
    pending["tree"]["root"][0]["data"] = {"top": {"type": "key.top", "key": "UID", "size": 5}}
    jobs.append(pending)
    texts = [(".json", json.dumps(job, indent=1)) for job in jobs]
    texts[0] = (".json", texts[0][1].replace('"shards": 8,', '"shards": 8, // as in Hydra', 1))
    texts += [(".toml", _as_toml(job)) for job in jobs[:: max(1, len(jobs) // 6)]]
    return tuple(texts)


# ---------------------------------------------------------------- the strategies


def _words(kind: str) -> tuple[str, ...]:
    """The grammar's words for ``kind``, for token soup and mutations."""
    if kind == "path":
        return (
            *"+*/|!@%$?=~;,:><()[]{}-.",
            "..",
            "+..",
            "@@",
            "hits",
            "nodes",
            "count",
            "root",
            "a",
            '"a b"',
            '"\\u00e9"',
            "12",
            "0",
            "(1-3)",
            ":+hits>1",
            "+[d|3]",
            "{lbl}",
            "%top=a",
            "$+f=k",
        )
    if kind == "ops":
        return (
            *sorted(REGISTRY),
            *"=;,:{}'\"",
            "::",
            "\\;",
            "k",
            "i",
            "s",
            "u",
            "t",
            "c0",
            "c1",
            "c2",
            "n1",
            "v2",
            "vx",
            "set",
            "cat",
            "range",
            "split",
            "eq",
            "add",
            "mult",
            "dup",
            "out",
            "gt",
            "yyMMdd",
            "unixmillis",
            '{"a":"b"}',
            "{a:'x'}",
            "0",
            "1",
            "2",
            "-1",
        )
    return (
        *"{}[],:",
        '"shards"',
        '"source"',
        '"map"',
        '"tree"',
        '"root"',
        '"type"',
        '"op"',
        '"filter"',
        '"list"',
        '"value"',
        '"key"',
        '"data"',
        '"pending"',
        *(json.dumps(name) for name in sorted(BUNDLE_FILTERS) + sorted(VALUE_FILTERS)),
        '"const"',
        '"branch"',
        '"tsv"',
        "true",
        "false",
        "null",
        "1",
        "0",
        "-1",
        "1.5",
        "// c\n",
        "=",
        "[[source]]\n",
        "\n",
    )


def _words_strategy(kind: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(_words(kind)),
        st.sampled_from(NASTY_CHARACTERS),
        st.sampled_from(NASTY_WORDS),
        st.text(max_size=3),
    )


@st.composite
def _mutated(draw: st.DrawFn, corpus: tuple[str, ...], kind: str) -> str:
    """A corpus text with a few edits: insert a word, drop or repeat a slice, swap a digit
    run for a huge one; now and then, an op string chained to itself a thousand times and
    more (past the interpreter's recursion limit, which 2,000 ops once hit)."""
    text = draw(st.sampled_from(corpus))
    # a middle value: Hypothesis draws the bounds of a range far more often than 1 in 250
    if kind == "ops" and draw(st.integers(0, 249)) == 124:
        text = ";".join([text] * draw(st.integers(1_000, 1_100)))
    for _ in range(draw(st.integers(0, 3))):  # 0: the corpus text itself
        at = draw(st.integers(0, len(text)))
        end = draw(st.integers(at, min(len(text), at + 8)))
        edit = draw(st.sampled_from(("insert", "delete", "repeat", "replace", "digits")))
        if edit == "insert":
            text = text[:at] + draw(_words_strategy(kind)) + text[at:]
        elif edit == "delete":
            text = text[:at] + text[end:]
        elif edit == "repeat":
            text = text[:end] + text[at:end] * draw(st.integers(1, 3)) + text[end:]
        elif edit == "replace":
            text = text[:at] + draw(_words_strategy(kind)) + text[end:]
        else:
            runs = [m.span() for m in re.finditer(r"[0-9]+", text)]
            if runs:
                start, stop = draw(st.sampled_from(runs))
                text = text[:start] + draw(st.sampled_from(NASTY_WORDS)) + text[stop:]
    return text


def inputs(kind: str) -> st.SearchStrategy[str]:
    """Texts for parser ``kind``: random text, token soup, mutations of the corpus."""
    corpus = {"path": path_corpus, "ops": ops_corpus}.get(kind)
    texts = corpus() if corpus else tuple(text for _, text in job_corpus())
    single = [c for c in NASTY_CHARACTERS if len(c) == 1]
    any_character = st.one_of(st.characters(), st.sampled_from(single))
    return st.one_of(
        st.text(any_character, max_size=40),
        st.lists(_words_strategy(kind), max_size=30).map("".join),
        _mutated(texts, kind),
        _mutated(texts, kind),
    )


def job_inputs() -> st.SearchStrategy[tuple[str, str]]:
    """(suffix, text) for job files: JSON mostly, TOML mutations of the TOML texts."""
    toml = tuple(text for suffix, text in job_corpus() if suffix == ".toml")
    return st.one_of(
        inputs("job").map(lambda text: (".json", text)),
        _mutated(toml, "job").map(lambda text: (".toml", text)),
    )


# ---------------------------------------------------------------- one input


class Crash(AssertionError):
    """An input gave something other than a parse or a positioned error of ours."""


def check_position(error: PositionedError, text: str) -> None:
    """The error's line and column lie within ``text`` (lark's lines), and it renders."""
    lines = text.split("\n")
    if not 1 <= error.line <= len(lines):
        raise Crash(f"line {error.line} is outside the text's {len(lines)} lines")
    if not 1 <= error.column <= len(lines[error.line - 1]) + 1:
        raise Crash(f"column {error.column} is outside line {error.line}")
    str(error)


def try_path(text: str) -> str:
    """``parsed`` or ``refused``; a :class:`Crash` (or any other exception) otherwise."""
    try:
        path = parse_path(text)
    except PositionedError as error:
        check_position(error, text)
        return "refused"
    canonical = str(path)
    if parse_path(canonical) != path:
        raise Crash(f"{canonical!r} parses to another path")
    return "parsed"


@contextmanager
def _no_waiting() -> Iterator[None]:
    real = row_ops.time
    row_ops.time = _NoSleep()  # type: ignore[assignment]
    try:
        yield
    finally:
        row_ops.time = real


class _NoSleep:
    @staticmethod
    def sleep(_seconds: float) -> None:
        """Wait no time."""


def try_ops(text: str) -> str:
    """``parsed`` (compiled and ran over every row set) or ``refused``."""
    try:
        pipeline = compile_ops(text)
    except PositionedError as error:
        check_position(error, text)
        return "refused"
    fixtures = row_sets()
    chosen = fixtures[zlib.crc32(text.encode("utf-8", "surrogatepass")) % len(fixtures)]
    with _no_waiting():
        for rows in (AWKWARD_ROWS, chosen):
            try:
                for row in islice(pipeline.run([list(r) for r in rows]), MOST_ROWS_READ):
                    for value in row:  # what the output formats do with a cell
                        str(value).encode("utf-8")
            except PositionedError as error:  # an op refusing a row, at its argument
                check_position(error, text)
    for warning in pipeline.warnings():
        check_position(warning, text)
    return "parsed"


def try_job(suffix: str, text: str, folder: Path) -> str:
    """``parsed`` or ``refused``; the text is written to ``folder/job<suffix>`` first."""
    file = folder / f"job{suffix}"
    file.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_job(file)
    except PositionedError as error:
        if error.source != str(file):
            raise Crash(f"the error names {error.source!r}, not the job file") from None
        check_position(error, error.text)
        # the file's text as read: bytes that are not UTF-8 (a lone surrogate) replaced
        read = file.read_bytes().decode("utf-8", errors="replace")
        if error.text and error.text != read.replace("\r\n", "\n").replace("\r", "\n"):
            raise Crash("the error's text is not the job file's") from None
        return "refused"
    return "parsed"


# ---------------------------------------------------------------- a tally


@dataclass
class Tally:
    """What a round of one parser gave."""

    parser: str
    tried: int = 0
    parsed: int = 0
    refused: int = 0
    crashes: list[tuple[str, str]] = field(default_factory=list)
    """(the input's repr, the exception's last lines), for each crash."""

    def record(self, attempt: Callable[[], str], shown: str) -> None:
        """Run one attempt and count its outcome; a crash keeps its repro."""
        self.tried += 1
        try:
            outcome = attempt()
        except Exception as exc:
            lines = traceback.format_exception_only(type(exc), exc)
            self.crashes.append((shown, "".join(lines).strip()[-300:]))
            return
        if outcome == "parsed":
            self.parsed += 1
        else:
            self.refused += 1

    def line(self) -> str:
        """One line of figures."""
        return (
            f"{self.parser:5}  tried {self.tried:7}  parsed {self.parsed:7}  "
            f"refused with our error {self.refused:7}  crashes {len(self.crashes)}"
        )


@contextmanager
def job_folder() -> Iterator[Path]:
    """A temporary folder for the fuzzed job files."""
    with tempfile.TemporaryDirectory(prefix="treestore-fuzz-") as folder:
        yield Path(folder)
