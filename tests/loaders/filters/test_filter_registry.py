"""The filter registry: every filter declares its job-file model and its Spark form."""

from __future__ import annotations

import json

import pytest

from loaders.filters.catalogue import (
    BUNDLE_FILTERS,
    VALUE_FILTERS,
    parse_bundle_filter,
    parse_value_filter,
)
from loaders.filters.kinds import BundleKind, ValueKind
from loaders.job.text import JobText
from treestore.errors import JobConfigError

HYDRA_VALUE_FILTERS = {
    "split", "empty", "case", "default", "hash", "mod", "pad", "slice", "regex",
    "replace", "join", "require", "exclude", "chain",
}  # fmt: skip
HYDRA_BUNDLE_FILTERS = {"field", "chain", "not", "equals", "contains", "value", "concat"}


def _job(doc: object) -> JobText:
    return JobText("job.json", json.dumps(doc), doc)


def test_the_registries_hold_every_filter_the_readme_lists() -> None:
    assert set(VALUE_FILTERS) == HYDRA_VALUE_FILTERS
    assert set(BUNDLE_FILTERS) == HYDRA_BUNDLE_FILTERS


@pytest.mark.parametrize("name", sorted(VALUE_FILTERS))
def test_every_value_filter_has_a_model_and_a_spark_form(name: str) -> None:
    kind = VALUE_FILTERS[name]
    assert kind.name == name and kind.__doc__
    assert kind.read is not ValueKind.read  # its settings, validated
    if kind.whole:
        assert kind.spark_whole is not ValueKind.spark_whole
    else:
        assert kind.spark is not ValueKind.spark


@pytest.mark.parametrize("name", sorted(BUNDLE_FILTERS))
def test_every_bundle_filter_has_a_model_and_a_spark_form(name: str) -> None:
    kind = BUNDLE_FILTERS[name]
    assert kind.name == name and kind.__doc__
    for part in ("read", "fields", "spark"):
        assert getattr(kind, part) is not getattr(BundleKind, part), (name, part)


@pytest.mark.parametrize(
    ("parse", "what", "names"),
    [
        (parse_value_filter, "value", VALUE_FILTERS),
        (parse_bundle_filter, "bundle", BUNDLE_FILTERS),
    ],
)
def test_an_unknown_filter_names_the_registered_ones(parse, what, names) -> None:  # type: ignore[no-untyped-def]
    doc = {"op": "frobnicate"}
    with pytest.raises(JobConfigError) as caught:
        parse(doc, ("map", "filter_out"), _job(doc))
    assert f"unknown {what} filter 'frobnicate'" in str(caught.value)
    assert all(name in str(caught.value) for name in names)


def test_an_op_that_is_not_a_name_is_an_unknown_filter() -> None:
    doc = {"op": ["split"]}
    with pytest.raises(JobConfigError, match="unknown value filter"):
        parse_value_filter(doc, ("f",), _job(doc))
