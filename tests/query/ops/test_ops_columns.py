"""Ops that run on column chunks give exactly what they give row by row."""

from __future__ import annotations

import itertools

import pyarrow as pa
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from query.ops.columns import ARROW_TYPES, plain, rows_of, run_on_columns
from query.ops.compiler import compile_ops
from treestore.errors import OpError

_TEXT = st.none() | st.sampled_from(["a", "b", "", "x,y", "\u00e9", ",", ",a,,a", "10", "9"])
_INT = st.none() | st.integers(-3, 3)


@st.composite
def _table(draw):  # type: ignore[no-untyped-def]
    types = draw(st.lists(st.sampled_from(["str", "int", "null"]), min_size=1, max_size=3))
    size = draw(st.integers(0, 12))
    kinds = {"str": _TEXT, "int": _INT, "null": st.none()}
    rows = [[draw(kinds[t]) for t in types] for _ in range(size)]
    cuts = sorted(draw(st.lists(st.integers(0, size), max_size=3)))
    return types, rows, cuts


def _chunks(types: list[str], rows: list[list], cuts: list[int]):  # type: ignore[no-untyped-def, type-arg]
    bounds = [0, *cuts, len(rows)]
    for a, b in itertools.pairwise(bounds):
        part = rows[a:b]
        columns = [pa.array([r[i] for r in part], ARROW_TYPES[t]) for i, t in enumerate(types)]
        yield len(part), columns


_STR_WORD = st.sampled_from(
    ["c0", "c1", "c2", "c3", "vA", "v=", "v", "v1", "v3", "cat", "set", "eq", "neq"]
)
_MERGE = st.text(alphabet="kijluJcsmM", min_size=1, max_size=4)
_GATHER = st.text(alphabet="kijluJcsmM", min_size=1, max_size=4)
_SORT = st.tuples(
    st.lists(st.integers(0, 3), min_size=1, max_size=3),
    st.sampled_from(["s", "n", "i", "l", "sn", "ns"]),
    st.sampled_from(["a", "d", "ad"]),
).map(lambda t: f"sort={','.join(map(str, t[0]))}:{t[1]}:{t[2]}")
_CROSS = st.tuples(
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(0, 3),
    st.sampled_from(["a", "", "x,y", "-1"]),
    st.sampled_from(["", ",list"]),
).map(lambda t: f"cross={t[0]},{t[1]},{t[2]},{t[3]},b{t[4]}")


_OP = st.one_of(
    st.lists(_STR_WORD, min_size=1, max_size=7).map(lambda w: "str=" + ",".join(w)),
    _MERGE.map(lambda letters: "merge=" + letters),
    _GATHER.map(lambda letters: "gather=" + letters),
    _SORT,
    _CROSS,
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(_table(), _OP)
def test_column_ops_match_row_ops(table, text) -> None:  # type: ignore[no-untyped-def]
    types, rows, cuts = table
    try:
        pipeline = compile_ops(text)
    except OpError:
        assume(False)
    (op,) = pipeline.ops
    out_types = op.column_types(list(types))
    assume(out_types is not None)
    expected = list(pipeline.run([list(r) for r in rows]))
    chunks = list(op.run_columns(_chunks(types, rows, cuts)))
    assert [tuple(r) for r in rows_of(iter(chunks))] == expected
    for count, columns in chunks:
        assert [plain(c).type for c in columns] == [ARROW_TYPES[t] for t in out_types] or not count


# Most random chains are refused or keep a row op, and are filtered out by design; with
# few examples (make test-fast's profile) Hypothesis's small first draws are filtered more.
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(_table(), st.lists(_OP, min_size=2, max_size=3).map(";".join))
def test_chains_of_column_ops_match_row_ops(table, text) -> None:  # type: ignore[no-untyped-def]
    types, rows, cuts = table
    try:
        pipeline = compile_ops(text)
    except OpError:
        assume(False)
    prefix, rest = pipeline.column_prefix(list(types))
    assume(not rest)
    expected = list(pipeline.run([list(r) for r in rows]))
    chunks = run_on_columns(prefix, _chunks(types, rows, cuts))
    assert [tuple(r) for r in rows_of(chunks)] == expected


def test_gather_over_many_keys_keeps_them_apart() -> None:
    """Many key columns whose value counts multiply past 64 bits: no two keys merge."""
    width = 70
    rows = [["a"] * width + [1], [None] + ["a"] * (width - 1) + [1], ["a"] * width + [1]]
    pipeline = compile_ops("gather=" + "k" * width + "s")
    expected = list(pipeline.run([list(r) for r in rows]))
    assert [row[-1] for row in expected] == [2, 1]
    types = ["str"] * width + ["int"]
    (op,) = pipeline.ops
    chunks = list(op.run_columns(_chunks(types, rows, [1])))
    assert [tuple(r) for r in rows_of(iter(chunks))] == expected


def test_cross_says_what_its_arguments_must_be() -> None:
    for text in ("cross=0,1,2,M", "cross=0,1,x,M,A", "cross=0,1,2,M,A,B", "cross=0,1,2,M,A,list,x"):
        try:
            compile_ops(text)
        except OpError as exc:
            assert exc.column > 1 and "cross" in str(exc)
        else:
            raise AssertionError(f"{text} was accepted")


def test_ops_that_need_rows_say_so() -> None:
    assert compile_ops("merge=kj").ops[0].column_types(["str", "int"]) is None
    assert compile_ops("merge=ks").ops[0].column_types(["str", "str"]) is None
    assert compile_ops("merge=ka").ops[0].column_types(["str", "int"]) is None
    assert compile_ops("merge=kj2").ops[0].column_types(["str", "str"]) is None
    assert compile_ops("gather=kj").ops[0].column_types(["str", "int"]) is None
    assert compile_ops("gather=ks").ops[0].column_types(["str", "str"]) is None
    assert compile_ops("gather=ka").ops[0].column_types(["str", "int"]) is None
    assert compile_ops("top=2,kts").ops[0].column_types(["str", "int"]) is None
    assert compile_ops("sort=0:n").ops[0].column_types(["str"]) is None
    assert compile_ops("sort=0,1:sd").ops[0].column_types(["str", "int"]) is None
    assert compile_ops("str=c0,v0,v2,range").ops[0].column_types(["str"]) is None
    assert compile_ops("str=c0,c1,set").ops[0].column_types(["str", "str"]) is None
    prefix, rest = compile_ops("str=c1,v=,cat,c2,cat,v2,set;merge=kij;sort;reverse").column_prefix(
        ["str", "str", "str"]
    )
    assert [op.name for op in prefix] == ["str", "merge", "sort"]
    assert [op.name for op in rest.ops] == ["reverse"]


def test_a_run_over_many_chunks_is_put_together_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """merge and cross copy a long run's rows once, not again for every chunk."""
    copied = []
    concat = pa.concat_arrays

    def counting(arrays):  # type: ignore[no-untyped-def]
        copied.append(sum(len(a) for a in arrays))
        return concat(arrays)

    monkeypatch.setattr(pa, "concat_arrays", counting)
    rows = [["k", "A" if i % 2 else "M", str(i)] for i in range(1000)]
    for text in ("merge=kij", "cross=0,1,2,M,A"):
        copied.clear()
        (op,) = compile_ops(text).ops
        out = list(op.run_columns(_chunks(["str"] * 3, rows, list(range(10, 1000, 10)))))
        assert [tuple(r) for r in rows_of(iter(out))] == list(compile_ops(text).run(rows))
        assert sum(copied) <= 4 * len(rows)  # each row once per column, and 2 per boundary


_SIDE = st.sampled_from(["A", "M", "", None])
_VALUE = st.none() | st.sampled_from(["1", "2", "3,1", "", ",", "x", "10"])


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from(["u1", "u2", "u3"]), _SIDE, _VALUE).map(list), max_size=10
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from(["gather=kJ", "gather=kJu", "gather=Jk;sort", "gather=kJ;gather=kJ"]),
    st.sampled_from(["cross=0,1,2,M,A;gather=kJ", "cross=0,1,2,M,A,list", "cross=0,1,2,M,A"]),
    st.booleans(),
)
def test_coded_columns_cross_the_transport_as_rows_would(  # type: ignore[no-untyped-def]
    shards, driver_ops, shard_ops, plain_output
) -> None:
    """The seed's answer's shape: each shard pairs (cross, coded: pairs, or each left
    value with a list view of right values) and may gather its items (coded lists); the
    pieces travel as Arrow IPC; the driver gathers them (again), its last column op
    giving coded columns or, for a result's reader, plain ones (J's text read straight
    out of its fold). Every step gives what the row ops give."""
    from query.driver.transport import decode_piece, encode_piece

    rops, ops = compile_ops(shard_ops), compile_ops(driver_ops)
    shard_rows = [sorted(rows, key=lambda r: r[0]) for rows in shards]
    expected = list(ops.run(row for rows in shard_rows for row in rops.run(rows)))
    pieces = []
    for rows in shard_rows:
        prefix, rest = rops.column_prefix(["str"] * 3)
        assert not rest
        for count, columns in run_on_columns(prefix, _chunks(["str"] * 3, rows, [len(rows) // 2])):
            decoded = decode_piece(*encode_piece((count, columns)))
            pieces.append((decoded.num_rows, decoded.columns) if count else (0, []))
    prefix, rest = ops.column_prefix(["str", "str"])
    chunks = list(run_on_columns(prefix, iter(pieces), plain_output=plain_output))
    if plain_output:
        assert not any(pa.types.is_list(c.type) for _, columns in chunks for c in columns)
    out = rest.run(rows_of(iter(chunks)))
    assert list(out) == expected


@given(
    st.lists(st.tuples(st.integers(0, 6), _VALUE), max_size=30),
    st.lists(st.integers(0, 30), max_size=4),
    st.integers(1, 4),
    st.sampled_from(["marked", "sorted", "compiled"]),
    st.booleans(),
)
def test_items_split_over_threads_give_what_one_thread_gives(
    rows, cuts, threads, way, as_text
) -> None:  # type: ignore[no-untyped-def]
    """Big J work splits over threads (pairs made by ranges of parts, lists put together
    by ranges of groups, joined text by ranges of rows): forced here on small inputs,
    with the pairs marked in a table (read in bands of 2 groups) or sorted, or folded by
    the compiled kernel (bitsets, in ranges of groups); the lists coded then joined, or
    given as text (the compiled fold reads its bits straight into the text)."""
    import numpy as np

    import query.ops.items
    import treestore.arrays
    from query.ops.items import Items, distinct_items_of

    groups = 7
    bounds = [0, *sorted(min(c, len(rows)) for c in cuts), len(rows)]
    parts = [
        Items.of(pa.array([value for _, value in rows[a:b]], pa.string()))
        for a, b in itertools.pairwise(bounds)
    ]
    group = np.array([g for g, _ in rows], dtype=np.int64)
    expected = []
    for g in range(groups):
        found = {
            item for owner, value in rows if owner == g for item in (value or "").split(",") if item
        }
        expected.append(",".join(sorted(found)) if found else None)
    saved = (treestore.arrays.THREADED_SIZE, treestore.arrays.os.cpu_count)
    marks = (query.ops.items.MARKS_PER_PAIR, query.ops.items._BAND_BYTES)
    treestore.arrays.THREADED_SIZE = 0
    treestore.arrays.os.cpu_count = lambda: threads  # type: ignore[assignment]
    query.ops.items.MARKS_PER_PAIR = 10**9 if way == "marked" else 0
    query.ops.items._BAND_BYTES = 1
    try:
        native_from = 0 if way == "compiled" else 1 << 62
        if as_text:
            joined = distinct_items_of(parts, group, groups, native_from, as_text=True)
            assert joined.type == pa.string()
        else:
            joined = plain(distinct_items_of(parts, group, groups, native_from))
    finally:
        treestore.arrays.THREADED_SIZE, treestore.arrays.os.cpu_count = saved
        query.ops.items.MARKS_PER_PAIR, query.ops.items._BAND_BYTES = marks
    assert joined.to_pylist() == expected


def test_items_too_wide_for_a_bitset_per_group_fold_by_the_pairs(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A bitset per group takes groups x distinct items bits: 5,000 groups of one item
    each among 5,000 distinct (3.2 MB of bitsets for 5,000 items) fold by numpy's pairs;
    1,000 groups among 100 items take the kernel. Both give each group's sorted set."""
    import numpy as np

    import query.ops.items
    from query.ops.items import Items, distinct_items_of

    called: list[int] = []
    real = query.ops.items.grouped_distinct_ranks

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        called.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(query.ops.items, "grouped_distinct_ranks", counted)
    for groups, distinct, kernel in ((5000, 5000, False), (1000, 100, True)):
        called.clear()
        words = [f"w{(k * 7) % distinct}" for k in range(5000)]
        group = np.arange(5000, dtype=np.int64) % groups
        found = plain(distinct_items_of([Items.of(pa.array(words))], group, groups, 0))
        expected = [
            ",".join(sorted({w for w, g in zip(words, group.tolist(), strict=True) if g == k}))
            for k in range(groups)
        ]
        assert found.to_pylist() == expected
        assert bool(called) == kernel


@given(st.lists(st.integers(0, 5), max_size=40), st.integers(1, 8))
def test_first_rows_in_order_is_found_without_a_sort(codes, block) -> None:  # type: ignore[no-untyped-def]
    """Codes that number their values in first-appearance order give each code's first
    row; any other codes give None (the caller then sorts). Read in blocks of 1-8."""
    import numpy as np

    import query.ops.columns
    from query.ops.columns import first_rows_if_in_order

    seen: list[int] = []
    firsts: list[int] = []
    for row, code in enumerate(codes):
        if code not in seen:
            seen.append(code)
            firsts.append(row)
    in_order = seen == list(range(len(seen))) and bool(codes)
    saved = query.ops.columns._BLOCK
    query.ops.columns._BLOCK = block
    try:
        found = first_rows_if_in_order(np.array(codes, dtype=np.int32))
    finally:
        query.ops.columns._BLOCK = saved
    if in_order:
        assert found is not None and found.tolist() == firsts
    else:
        assert found is None


@given(
    st.lists(st.lists(st.none() | st.sampled_from("abcdefg"), max_size=6), min_size=1, max_size=6)
)
def test_chunks_unified_in_two_halves_match_one_unification(chunks) -> None:  # type: ignore[no-untyped-def]
    """Unified half by half in threads (forced here on small inputs), the chunks get the
    same dictionary, in the same order, and the same values as one unification."""
    import pyarrow.compute as pc

    import treestore.arrays
    from query.ops.columns import unified_chunks

    coded = [pc.dictionary_encode(pa.array(chunk, pa.string())) for chunk in chunks]
    kind = pa.dictionary(pa.int32(), pa.string())
    expected = pa.chunked_array(coded, kind).unify_dictionaries()
    saved = (treestore.arrays.THREADED_SIZE, treestore.arrays.os.cpu_count)
    treestore.arrays.THREADED_SIZE = 0
    treestore.arrays.os.cpu_count = lambda: 2  # type: ignore[assignment]
    try:
        found = unified_chunks(coded, kind)
    finally:
        treestore.arrays.THREADED_SIZE, treestore.arrays.os.cpu_count = saved
    assert [c.to_pylist() for c in found.chunks] == [c.to_pylist() for c in expected.chunks]
    assert found.chunk(0).dictionary.equals(expected.chunk(0).dictionary)
    assert [c.indices.to_pylist() for c in found.chunks] == [
        c.indices.to_pylist() for c in expected.chunks
    ]


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([st.sampled_from(["1", "2", "3", "10", "x"]), _VALUE]).flatmap(
        lambda values: st.lists(
            st.tuples(st.sampled_from(["u1", "u2", "u3", "u4"]), _SIDE, values).map(list),
            max_size=40,
        )
    ),
    st.lists(st.integers(0, 40), max_size=4),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_cross_lists_fold_as_the_pairs_do(  # type: ignore[no-untyped-def]
    rows, cuts, few_sizes, flush_each_block, compiled
) -> None:
    """``cross ... list`` then ``gather=kJ`` gives what the pairs give, and its lists
    read as text what the rows give: with the output coded once or block by block
    (forced), the list views' items taken by size class or by one sort (forced), and the
    lists folded by numpy's pairs or by the compiled kernel (forced).
    Values are single items (the lists are read as views) or any text (read as text)."""
    import query.ops.cross
    import query.ops.items

    rows = sorted(rows, key=lambda r: r[0])
    # the lists leave null right values out: the pairs of the rows without them
    kept = [list(r) for r in rows if not (r[1] == "A" and r[2] is None)]
    expected = list(compile_ops("cross=0,1,2,M,A;gather=kJ").run(kept))
    saved = (
        query.ops.items._FEW_SIZES,
        query.ops.cross.LIST_CHUNK_VALUES,
        query.ops.items.NATIVE_ITEMS,
    )
    query.ops.items._FEW_SIZES = 64 if few_sizes else 0
    query.ops.cross.LIST_CHUNK_VALUES = 1 if flush_each_block else 1 << 22
    query.ops.items.NATIVE_ITEMS = 0 if compiled else 1 << 62
    try:
        for text, want in [
            ("cross=0,1,2,M,A,list;gather=kJ", expected),
            ("cross=0,1,2,M,A,list", list(compile_ops("cross=0,1,2,M,A,list").run(rows))),
        ]:
            prefix, rest = compile_ops(text).column_prefix(["str"] * 3)
            assert not rest
            chunks = run_on_columns(prefix, _chunks(["str"] * 3, rows, sorted(cuts)))
            assert [tuple(r) for r in rows_of(chunks)] == [tuple(r) for r in want]
    finally:
        (
            query.ops.items._FEW_SIZES,
            query.ops.cross.LIST_CHUNK_VALUES,
            query.ops.items.NATIVE_ITEMS,
        ) = saved


_WORDS = st.lists(st.sampled_from(["a", "bb", "", "\u00e9t\u00e9", "x y", "10"]), max_size=5)


@given(
    st.lists(st.none() | st.lists(st.integers(0, 5), max_size=4), max_size=12),
    _WORDS,
    st.integers(0, 12),
    st.integers(0, 12),
    st.sampled_from([pa.int8(), pa.int32()]),
    st.integers(1, 3),
)
def test_lists_of_codes_join_as_arrows_binary_join(  # type: ignore[no-untyped-def]
    rows, words, start, length, index_type, threads
) -> None:
    """plain() of a list column of dictionary codes (what ``J`` gives) joins each row's
    words by commas as Arrow's binary_join does: null rows, empty lists, empty words,
    sliced columns, narrow codes, split over threads."""
    import numpy as np

    import treestore.arrays

    words = words or ["w"]
    rows = [None if r is None else [c % len(words) for c in r] for r in rows]
    sizes = [len(r or []) for r in rows]
    bounds = pa.array(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32))
    codes = pa.array([c for r in rows for c in (r or [])], index_type)
    coded = pa.DictionaryArray.from_arrays(codes, pa.array(words, pa.string()))
    lists = pa.ListArray.from_arrays(
        bounds, coded, mask=pa.array([r is None for r in rows], pa.bool_())
    )
    lists = lists.slice(min(start, len(lists)), length)
    expected = pa.compute.binary_join(lists.cast(pa.list_(pa.string())), ",").to_pylist()
    saved = (treestore.arrays.THREADED_SIZE, treestore.arrays.os.cpu_count)
    treestore.arrays.THREADED_SIZE = 0
    treestore.arrays.os.cpu_count = lambda: threads  # type: ignore[assignment]
    try:
        joined = plain(lists)
    finally:
        treestore.arrays.THREADED_SIZE, treestore.arrays.os.cpu_count = saved
    joined.validate(full=True)
    assert joined.type == pa.string()
    assert joined.to_pylist() == expected
