"""A long fuzz round of the three parsers, with its figures: ``python -m tests.reliability.fuzz``.

For each parser (``path``, ``ops``, ``job``; see :mod:`tests.support.reliability.parser_fuzz`)
it tries ``--examples`` inputs drawn by hypothesis (generation only: a crash is counted
and kept, not shrunk) and prints, per parser, the inputs tried, parsed, refused with our
error and the crashes (any other exception, or an input taking more than ``--hang``
seconds), with the first few repros. Exits 1 when anything crashed.
"""

from __future__ import annotations

import argparse
import resource
import signal
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from tests.support.reliability.parser_fuzz import (
    PARSERS,
    Tally,
    inputs,
    job_folder,
    job_inputs,
    try_job,
    try_ops,
    try_path,
)

SHOWN_CRASHES = 5


class Hang(Exception):
    """One input ran past the hang limit."""


def _on_alarm(_signal: int, _frame: FrameType | None) -> None:
    raise Hang("no answer within the hang limit")


def _attempt(parser: str, value: Any, folder: Path) -> Callable[[], str]:
    if parser == "path":
        return lambda: try_path(value)
    if parser == "ops":
        return lambda: try_ops(value)
    return lambda: try_job(value[0], value[1], folder)


def run_round(parser: str, examples: int, hang: int, round_seed: int) -> Tally:
    """Try ``examples`` inputs on ``parser``; every outcome is counted, nothing raised."""
    tally = Tally(parser)
    strategy: st.SearchStrategy[Any] = job_inputs() if parser == "job" else inputs(parser)
    with job_folder() as folder:

        @seed(round_seed)
        @settings(
            max_examples=examples,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(strategy)
        def one(value: Any) -> None:
            signal.alarm(hang)
            try:
                tally.record(_attempt(parser, value, folder), ascii(value)[:400])
            finally:
                signal.alarm(0)

        one()
    return tally


def main(argv: list[str] | None = None) -> int:
    """Run the round and print its figures."""
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--examples", type=int, default=10_000, help="inputs per parser")
    options.add_argument("--parsers", nargs="*", choices=PARSERS, default=list(PARSERS))
    options.add_argument("--seed", type=int, default=0)
    options.add_argument("--hang", type=int, default=20, help="seconds before an input hangs")
    options.add_argument("--memory-gb", type=float, default=4, help="address space limit")
    args = options.parse_args(argv)
    limit = int(args.memory_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))  # a runaway allocation fails fast
    signal.signal(signal.SIGALRM, _on_alarm)
    warnings.simplefilter("error")  # as the test run has it: a warning is a crash
    print(f"fuzzing the parsers: {args.examples} inputs each, seed {args.seed}")
    crashed = False
    for parser in args.parsers:
        started = time.monotonic()
        tally = run_round(parser, args.examples, args.hang, args.seed)
        print(f"{tally.line()}  ({time.monotonic() - started:.0f} s)", flush=True)
        for shown, error in tally.crashes[:SHOWN_CRASHES]:
            print(f"    crash: {shown}\n      -> {error}")
        crashed = crashed or bool(tally.crashes)
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
