"""The three parsers (paths, ops, job files) give a parse or our positioned error for any text.

Property-based: random text, token soup and mutations of the test vectors (see
:mod:`tests.support.reliability.parser_fuzz`). Each parser tries five times the
Hypothesis profile's examples (500 in ``dev``: about 3 s in all); ``python -m
tests.reliability.fuzz`` runs a long round and prints the figures.
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings

from tests.support.reliability.parser_fuzz import (
    inputs,
    job_folder,
    job_inputs,
    try_job,
    try_ops,
    try_path,
)

# Five times the profile's examples: an input costs about 2 ms, and each parser takes any
# text, so breadth is cheap here.
FUZZ = settings(
    max_examples=5 * settings().max_examples,
    deadline=timedelta(seconds=20),  # a hang guard, not a timing assertion
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@FUZZ
@given(inputs("path"))
def test_any_path_text_parses_or_is_refused_at_a_place(text: str) -> None:
    assert try_path(text) in ("parsed", "refused")


@FUZZ
@given(inputs("ops"))
def test_any_op_string_compiles_and_runs_or_is_refused_at_a_place(text: str) -> None:
    assert try_ops(text) in ("parsed", "refused")


@FUZZ
@given(job_inputs())
def test_any_job_file_loads_or_is_refused_at_a_place(job: tuple[str, str]) -> None:
    with job_folder() as folder:
        assert try_job(*job, folder) in ("parsed", "refused")
