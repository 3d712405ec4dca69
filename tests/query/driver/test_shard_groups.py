"""A query's shards cut into a task per core: consecutive, every shard once, about equal."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from query.driver.shard_groups import shard_groups
from treestore.storage.state import ShardState


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=40), st.integers(1, 12))
def test_groups_hold_every_shard_once_in_order_and_about_equal_nodes(
    nodes: list[int], count: int
) -> None:
    shards = list(range(100, 100 + len(nodes)))
    states = {s: ShardState(nodes=n) for s, n in zip(shards, nodes, strict=True)}
    groups = shard_groups(shards, states, count)
    assert [s for group in groups for s in group] == shards  # consecutive, in order, once
    assert len(groups) == min(count, len(shards)) and all(groups)
    weight = {s: states[s].nodes + 1 for s in shards}
    share = sum(weight.values()) / len(groups)
    biggest = max(weight.values())
    for group in groups:  # no group takes more than its share and one more shard
        assert sum(weight[s] for s in group) <= share + biggest


def test_one_big_shard_gets_a_task_to_itself() -> None:
    states = {s: ShardState(nodes=n) for s, n in enumerate([1, 1, 500, 1, 1, 1])}
    assert shard_groups(list(states), states, 3) == [(0, 1), (2,), (3, 4, 5)]


def test_no_shards_no_groups() -> None:
    assert shard_groups([], {}, 4) == []
