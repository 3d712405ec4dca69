"""List fields travel from Spark to the load's tasks as JSON text and come back as the
same lists: any text (quotes, backslashes, newlines, tabs, non-ASCII), null elements,
and a null or empty list both as no value."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaders.load.protocol import list_as_text, lists_from_text

pytestmark = pytest.mark.spark

_TEXT = st.text(alphabet=st.sampled_from(['"', "\\", "\n", "\t", "é", "\U0001f600", "a", ",", "{"]))
_LISTS = st.lists(st.none() | st.lists(st.none() | _TEXT, max_size=4), min_size=1, max_size=12)


# 25 examples, not the profile's count: each is a Spark job (a tenth of a second or more).
@settings(max_examples=25)
@given(rows=_LISTS)
def test_lists_come_back_as_they_went(spark, rows: list[list[str | None] | None]) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(i, v) for i, v in enumerate(rows)], "i int, v array<string>")
    sent = frame.select("i", list_as_text(F.col("v")).alias("v"), F.lit(1).alias("w"))
    table = sent.toArrow().sort_by("i")
    assert table.schema.field("v").type == pa.string()
    back = lists_from_text(table.combine_chunks().to_batches()[0], ["v", "absent"])
    assert back.column("v").to_pylist() == [v or None for v in rows]
    assert back.column("w").to_pylist() == [1] * len(rows)
