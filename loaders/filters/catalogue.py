"""Every filter, registered: what the job model and the load import.

Importing this module loads each family module (so their filters are in
:data:`~loaders.filters.kinds.VALUE_FILTERS` and
:data:`~loaders.filters.kinds.BUNDLE_FILTERS`) and gives the names the rest of the
project uses.
"""

from __future__ import annotations

from loaders.filters import values_lists, values_numbers, values_text
from loaders.filters.bundles import (
    ChainFilter,
    ConcatFilter,
    ConstFilter,
    ContainsFilter,
    EqualsFilter,
    FieldFilter,
    NotFilter,
)
from loaders.filters.kinds import (
    BUNDLE_FILTERS,
    VALUE_FILTERS,
    BundleKind,
    FieldMapping,
    FilterCompiler,
    NoArrowForm,
    SymbolicRecord,
    ValueFilter,
    parse_bundle_filter,
    parse_fields,
    parse_value_filter,
)

__all__ = [
    "BUNDLE_FILTERS",
    "FAMILIES",
    "VALUE_FILTERS",
    "BundleFilter",
    "ChainFilter",
    "ConcatFilter",
    "ConstFilter",
    "ContainsFilter",
    "EqualsFilter",
    "FieldFilter",
    "FieldMapping",
    "FilterCompiler",
    "NoArrowForm",
    "NotFilter",
    "SymbolicRecord",
    "ValueFilter",
    "fields_named",
    "parse_bundle_filter",
    "parse_fields",
    "parse_value_filter",
]

FAMILIES = (values_lists, values_numbers, values_text)
"""The modules of value filters (the bundle filters are in ``bundles``)."""

BundleFilter = BundleKind
"""A validated bundle filter (any registered kind)."""


def fields_named(spec: BundleKind | ValueFilter | None) -> set[str]:
    """Every record field a filter reads or writes (to know which input fields to read)."""
    if spec is None or isinstance(spec, ValueFilter):
        return set()
    return spec.fields()
