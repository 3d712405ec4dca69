"""A task's clock: wall and CPU seconds by phase, shared out to the shards it serves."""

from __future__ import annotations

import time

from loaders.load.timing import Timer


def test_a_wait_books_wall_seconds_and_work_books_cpu_seconds() -> None:
    clock = Timer("input")
    with clock.phase("sleep"):
        time.sleep(0.05)
    with clock.phase("work"):
        sum(i * i for i in range(300_000))
    assert list(clock.cpu_seconds) == list(clock.seconds) == ["input", "sleep", "work"]
    assert clock.seconds["sleep"] >= 0.05 and clock.cpu_seconds["sleep"] < 0.02
    assert clock.cpu_seconds["work"] > 0


def test_cpu_shares_sum_to_the_whole_like_the_wall_shares() -> None:
    clock = Timer()
    with clock.phase("work"):
        sum(i * i for i in range(100_000))
    first_wall, first_cpu = clock.since_last_share(), clock.cpu_since_last_share()
    with clock.phase("work"):
        sum(i * i for i in range(100_000))
    second_cpu = clock.cpu_since_last_share()
    assert first_wall["work"] > 0 and first_cpu["work"] > 0
    assert abs(first_cpu["work"] + second_cpu["work"] - clock.cpu_seconds["work"]) < 0.002
    assert clock.cpu_since_last_share() == {"work": 0.0}
