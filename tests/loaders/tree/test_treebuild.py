"""Applying records to a tree: Hydra's element semantics, without Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from loaders.job.model import load_job
from loaders.tree.builder import ApplyStats, TreeBuilder
from loaders.tree.pending import PendingRecords
from query import parse_path, run_path
from treestore.storage.pagestore import MemoryPageStore
from treestore.storage.tree import ShardTree


def _builder(demo_dir: Path) -> TreeBuilder:
    return TreeBuilder(load_job(demo_dir / "job.json").tree)


def _record(builder: TreeBuilder, source: str, **fields: object) -> tuple[object, ...]:
    """A record as the loader hands it over: fields plus each element filter's verdict."""
    record: dict[str, object] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()
    }
    attr, mapping = builder.filters  # the two UID elements, in job order
    record[builder.filter_columns[attr.where]] = source == "ATTR"
    record[builder.filter_columns[mapping.where]] = source == "MAPPING"
    return builder.record(record)


def _apply(
    builder: TreeBuilder, tree: ShardTree, record: tuple[object, ...], stats: ApplyStats
) -> None:
    builder.apply_batch(tree, [record], [1], stats)


def test_seed_tree_is_built_with_hits_and_create_false(demo_dir: Path) -> None:
    builder = _builder(demo_dir)
    tree, stats = ShardTree(MemoryPageStore()), ApplyStats()
    for uid, ids in [("12345", ["1"]), ("67890", ["1", "2"]), ("12345", ["3", "4", "5"])]:
        _apply(builder, tree, _record(builder, "ATTR", UID=uid, ATTRIBUTE_IDS=ids), stats)
    for uid, puid in [("12345", "abc"), ("99999", "nope"), ("67890", "xyz")]:
        _apply(builder, tree, _record(builder, "MAPPING", UID=uid, PUID=puid), stats)
    tree = ShardTree(tree.pages, tree.commit())
    root = tree.child(tree.root, "root")
    assert root is not None and root.hits == 6
    uid = tree.child(root, "12345")
    assert uid is not None and uid.hits == 3  # two attribute records, one mapping record
    attributes = tree.child(uid, "A")
    assert attributes is not None and attributes.hits == 2
    assert [n.name for n in tree.children(attributes)] == ["1", "3", "4", "5"]
    assert tree.child(root, "99999") is None  # create:false never creates
    assert stats.missed_updates == 1 and stats.records == 6
    rows = list(run_path(tree, parse_path("root/+:nodes>1/+/+")))
    assert ("12345", "M", "abc") in rows and ("67890", "A", "2") in rows
    assert all(r[0] != "99999" for r in rows)


def test_null_and_empty_values_stop_the_path(demo_dir: Path) -> None:
    builder = _builder(demo_dir)
    tree, stats = ShardTree(MemoryPageStore()), ApplyStats()
    _apply(builder, tree, _record(builder, "ATTR", UID=None, ATTRIBUTE_IDS=["1"]), stats)
    _apply(builder, tree, _record(builder, "ATTR", UID="", ATTRIBUTE_IDS=["1"]), stats)
    _apply(builder, tree, _record(builder, "ATTR", UID="7", ATTRIBUTE_IDS=["", None, "2"]), stats)
    tree = ShardTree(tree.pages, tree.commit())
    paths = [path for path, _ in tree.walk()]
    assert paths == [("root",), ("root", "7"), ("root", "7", "A"), ("root", "7", "A", "2")]


def test_failing_element_filter_stops_that_branch(demo_dir: Path) -> None:
    builder = _builder(demo_dir)
    tree, stats = ShardTree(MemoryPageStore()), ApplyStats()
    _apply(builder, tree, _record(builder, "OTHER", UID="1", ATTRIBUTE_IDS=["1"], PUID="p"), stats)
    tree = ShardTree(tree.pages, tree.commit())
    assert [path for path, _ in tree.walk()] == [("root",)]


def test_update_only_records_see_the_nodes_of_earlier_records_only(demo_dir: Path) -> None:
    """Records apply in their order, as Hydra applies them one after another: in one
    batch, a mapping before its UID's record finds no node, the same mapping after it
    does."""
    builder = _builder(demo_dir)
    tree, stats = ShardTree(MemoryPageStore()), ApplyStats()
    batch = [
        _record(builder, "MAPPING", UID="2", PUID="early"),  # no UID 2 yet: missed
        _record(builder, "ATTR", UID="2", ATTRIBUTE_IDS=["b"]),
        _record(builder, "MAPPING", UID="2", PUID="late"),  # after it: updates UID 2
        _record(builder, "MAPPING", UID="3", PUID="never"),
    ]
    builder.apply_batch(tree, batch, [1, 1, 1, 1], stats)
    tree = ShardTree(tree.pages, tree.commit())
    hits = {path: node.hits for path, node in tree.walk()}
    assert hits[("root", "2", "M", "late")] == 1 and ("root", "2", "M", "early") not in hits
    assert hits[("root", "2")] == 2  # its attribute record and the late mapping
    assert ("root", "3") not in hits
    assert stats.missed_updates == 2


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ATTR", "MAPPING"]),
            st.sampled_from(["u1", "u2", "u3", "", None]),
            st.lists(st.sampled_from(["1", "2", "", None]), max_size=3),
            st.sampled_from(["p", "q", None]),
            st.integers(1, 3),
        ),
        max_size=25,
    )
)
def test_a_batch_gives_the_tree_of_its_records_one_by_one(records: list[tuple]) -> None:  # type: ignore[type-arg]
    from loaders.job.model import _Validator
    from loaders.job.text import JobText
    from shell.demo import DEMO_JOB

    builder = TreeBuilder(_Validator(JobText("job.json", "", DEMO_JOB), Path(".")).job_spec().tree)
    batch = [
        (_record(builder, source, UID=uid, ATTRIBUTE_IDS=ids, PUID=puid), weight)
        for source, uid, ids, puid, weight in records
    ]
    trees = []
    for one_by_one in (False, True):  # Hydra's order: each record sees the ones before it
        tree, stats = ShardTree(MemoryPageStore()), ApplyStats()
        parts = [[item] for item in batch] if one_by_one else [batch] if batch else []
        for part in parts:
            rows, weights = [r for r, _ in part], [w for _, w in part]
            builder.apply_batch(tree, rows, weights, stats)
        tree = ShardTree(tree.pages, tree.commit())
        trees.append(
            ({path: n.hits for path, n in tree.walk()}, stats.missed_updates, stats.records)
        )
    assert trees[0] == trees[1]


def test_branches_that_reach_the_same_node_go_on_from_it_once() -> None:
    """Two branches reach top/a (one through a value, one through a const); the element
    after the branch visits each of top/a's children once per path that reaches it."""
    from loaders.job.model import _Validator
    from loaders.job.text import JobText

    job = {
        "shards": 1,
        "source": [{"name": "s", "path": "in.csv", "format": "csv", "header": True}],
        "tree": {
            "root": [
                {"type": "const", "value": "top"},
                {
                    "type": "branch",
                    "list": [[{"type": "value", "key": "K"}], [{"type": "const", "value": "a"}]],
                },
                {"type": "const", "value": "end"},
            ]
        },
    }
    builder = TreeBuilder(_Validator(JobText("job.json", "", job), Path(".")).job_spec().tree)
    tree, stats = ShardTree(MemoryPageStore()), ApplyStats()
    builder.apply_batch(
        tree, [builder.record({"K": "a"}), builder.record({"K": "b"})], [1, 1], stats
    )
    tree = ShardTree(tree.pages, tree.commit())
    nodes = {path: (n.hits, n.child_count) for path, n in tree.walk()}
    assert nodes == {
        ("top",): (2, 2),
        ("top", "a"): (3, 1),  # K=a, and the const for both records
        ("top", "a", "end"): (3, 0),
        ("top", "b"): (1, 1),
        ("top", "b", "end"): (1, 0),
    }


def test_pending_records_of_an_element_the_job_no_longer_has_expire() -> None:
    """Records kept by a pending element are retried by place in the job; when the job no
    longer has a pending element there, they expire (counted), and the tree is unchanged."""
    import copy

    from loaders.job.model import _Validator
    from loaders.job.text import JobText
    from loaders.tree import pending
    from shell.demo import DEMO_JOB

    def builder_of(job: dict[str, Any]) -> TreeBuilder:
        return TreeBuilder(_Validator(JobText("job.json", "", job), Path(".")).job_spec().tree)

    job = copy.deepcopy(DEMO_JOB)
    job["tree"]["root"][1]["list"][1][0]["pending"] = {"loads": 3}
    with_pending = builder_of(job)
    tree, stats, kept = ShardTree(MemoryPageStore()), ApplyStats(), PendingRecords()
    early = _record(with_pending, "MAPPING", UID="9", PUID="p")
    with_pending.apply_batch(tree, [early, early], [2, 1], stats, tree.next_id, kept)
    assert (stats.pending_buffered, stats.missed_updates) == (3, 0)
    waiting = pa.concat_tables(kept.waiting)
    assert waiting.column(pending.WEIGHT).to_pylist() == [2, 1]  # each row keeps its weight
    assert waiting.column(pending.LOADS_LEFT).to_pylist() == [3, 3]

    tree = ShardTree(tree.pages, tree.commit())
    later, later_kept = ApplyStats(), PendingRecords()
    builder_of(DEMO_JOB).retry_pending(
        tree, waiting, with_pending.fingerprint, later, pending=later_kept
    )
    assert (later.pending_applied, later.pending_expired, later_kept.waiting) == (0, 3, [])
    retried, retried_kept = ApplyStats(), PendingRecords()
    with_pending.retry_pending(
        tree, waiting, with_pending.fingerprint, retried, pending=retried_kept
    )  # one load less
    assert retried.pending_expired == 0
    assert pa.concat_tables(retried_kept.waiting).column(pending.LOADS_LEFT).to_pylist() == [2, 2]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["u1", "u2", "u3"]),
            st.lists(st.sampled_from(["1", "2"]), min_size=1, max_size=2),
            st.lists(st.sampled_from(["p", "q"]), min_size=1, max_size=2),
        ),
        min_size=1,
        max_size=12,
    ),
    st.booleans(),
    st.booleans(),
)
def test_records_that_waited_give_the_tree_of_records_that_came_after_their_node(
    records: list[tuple[str, list[str], list[str]]], labels: bool, after_branch: bool
) -> None:
    """Mappings loaded before their UIDs (kept pending, retried in the next load) give the
    same tree, hits and child counts as the same mappings loaded after their UIDs."""
    import copy

    from loaders.job.model import _Validator
    from loaders.job.text import JobText
    from shell.demo import DEMO_JOB

    job = copy.deepcopy(DEMO_JOB)
    attribute, mapping = job["tree"]["root"][1]["list"]
    mapping[0]["pending"] = {"loads": 2}
    if labels:
        attribute[0]["name"] = mapping[0]["name"] = "uids"
        mapping[2]["name"] = "puids"
    if after_branch:
        job["tree"]["root"].append({"type": "const", "value": "end"})
    builder = TreeBuilder(_Validator(JobText("job.json", "", job), Path(".")).job_spec().tree)
    attributes = [_record(builder, "ATTR", UID=u, ATTRIBUTE_IDS=ids) for u, ids, _ in records]
    mappings = [
        _record(builder, "MAPPING", UID=u, PUID=puid) for u, _, puids in records for puid in puids
    ]

    def load(tree: ShardTree, batch: list[tuple[object, ...]], retry: bool) -> ShardTree:
        stats, kept = ApplyStats(), PendingRecords()
        builder.apply_batch(tree, batch, [1] * len(batch), stats, tree.next_id, kept)
        if retry:
            after = tree.next_id
            for table in waiting:
                builder.retry_pending(
                    tree, table, builder.fingerprint, stats, created_before=after, pending=kept
                )
        waiting[:] = kept.waiting
        return ShardTree(tree.pages, tree.commit())

    waiting: list[pa.Table] = []
    early = load(ShardTree(MemoryPageStore()), mappings, retry=False)
    assert sum(t.num_rows for t in waiting) == len(mappings)  # no UID yet: all wait
    early = load(early, attributes, retry=True)
    assert not waiting  # all applied
    late = load(ShardTree(MemoryPageStore()), attributes, retry=False)
    late = load(late, mappings, retry=False)

    def shape(tree: ShardTree) -> dict[tuple[str, ...], tuple[int, int]]:
        return {path: (n.hits, n.child_count) for path, n in tree.walk()}

    assert shape(early) == shape(late)


def test_the_tree_fingerprint_follows_settings_not_the_job_files_path() -> None:
    import copy

    from loaders.job.model import _Validator
    from loaders.job.text import JobText
    from shell.demo import DEMO_JOB

    def fingerprint(job: dict[str, Any], file: str = "job.json") -> str:
        spec = _Validator(JobText(file, "", job), Path(".")).job_spec()
        return TreeBuilder(spec.tree).fingerprint

    job = copy.deepcopy(DEMO_JOB)
    job["tree"]["root"][1]["list"][1][0]["pending"] = {"loads": 2}
    assert fingerprint(job) == fingerprint(job, "/somewhere/else/job.json")
    slower = copy.deepcopy(job)
    slower["tree"]["root"][1]["list"][1][0]["pending"] = {"loads": 3}
    assert fingerprint(slower) != fingerprint(job)
    explicit = copy.deepcopy(job)
    explicit["tree"]["root"][1]["list"][0][1]["count"] = True  # a default, said out loud
    assert fingerprint(explicit) == fingerprint(job)
