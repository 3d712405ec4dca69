"""Counting into buckets: ``histo`` (powers of a scale) and ``disorder`` (entropy and Gini)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

from query.ops.base import (
    Op,
    OpArgs,
    Row,
    as_number,
    as_text,
    cell,
    column_number,
    to_long,
    whole_argument,
)

__all__ = ["DisorderOp", "PowerHistogramOp", "power_bucket"]


def power_bucket(value: int, scale: int) -> int:
    """The bucket of ``value``: the largest power of ``scale`` strictly below it (1 at least).

    As Hydra's KeyHistogram computes it: with scale 10, 1..10 fall into 1, 11..100
    into 10, 101..1000 into 100 (its Javadoc says 1-9, 10-99; the code is followed).
    """
    bound, bucket = 1, 1
    while value > bound:
        bucket = bound
        bound *= scale
    return bucket


class PowerHistogramOp(Op):
    """histo=C[,SCALE] : count column C's whole numbers into buckets by powers of SCALE.

    SCALE (default 10, at least 2) makes the buckets 1 (values up to SCALE),
    SCALE (up to SCALE²), SCALE², ...; gives one row per bucket that was hit, in
    bucket order: its lower bound and its count. As in Hydra, a 0 is not counted
    (and neither is a cell that is not a number).
    Example: ``histo=0`` over 5, 10, 11, 250 gives ``1 2`` / ``10 1`` / ``100 1``.
    """

    name = "histo"
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        column, comma, scale = args.text.partition(",")
        self.column = column_number(args, column, 0)
        self.scale = whole_argument(args, scale, len(column) + 1, "the scale") if comma else 10
        if self.scale < 2:
            raise args.error(len(column) + 1, "the scale must be at least 2")

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """The buckets, after all the rows."""
        counts: dict[int, int] = {}
        for row in rows:
            number = as_number(cell(row, self.column))
            if number is None or to_long(number) == 0:
                continue
            bucket = power_bucket(to_long(number), self.scale)
            counts[bucket] = counts.get(bucket, 0) + 1
        for bucket in sorted(counts):
            yield [bucket, counts[bucket]]


def _disorder(weights: dict[str, int]) -> tuple[float, float]:
    """Entropy (base 10) and Gini impurity of the weights' shares."""
    total = float(sum(weights.values()))
    shares = [weight / total for weight in weights.values()]
    entropy = -sum(share * math.log10(share) for share in shares)
    gini = sum(a * b for i, a in enumerate(shares) for j, b in enumerate(shares) if i != j)
    return entropy, gini


class DisorderOp(Op):
    """disorder=P:S[:F] : how mixed the secondary keys S are under each primary key P.

    Each row adds weight F (default 1; rows with a weight of 0 or less, or without
    column F, are skipped) to its (P, S) pair. Gives one row per P, in text order:
    P, the entropy (base 10) of its S shares and their Gini impurity.
    Example: ``disorder=0:1:2`` on ``a b 1`` / ``a c 2`` / ``a d 1`` gives
    ``a 0.45154499349597177 0.625``.
    """

    name = "disorder"
    table = True

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        parts = args.text.split(":")
        if len(parts) not in (2, 3):
            raise args.error(0, "expected P:S[:F]", hint="For example disorder=0:1:2.")
        starts = [0, len(parts[0]) + 1, len(parts[0]) + len(parts[1]) + 2]
        columns = [
            column_number(args, part, start)
            for part, start in zip(parts, starts[: len(parts)], strict=True)
        ]
        self.primary, self.secondary = columns[0], columns[1]
        self.frequency = columns[2] if len(columns) == 3 else None

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """One row per primary key, after all the rows."""
        weights: dict[str, dict[str, int]] = {}
        widest = max(self.primary, self.secondary, self.frequency or 0)
        for row in rows:
            if len(row) <= widest:
                continue
            weight = 1
            if self.frequency is not None:
                number = as_number(row[self.frequency])
                weight = 0 if number is None else to_long(number)
            if weight <= 0:
                continue
            pairs = weights.setdefault(as_text(row[self.primary]), {})
            secondary = as_text(row[self.secondary])
            pairs[secondary] = pairs.get(secondary, 0) + weight
        for primary in sorted(weights):
            yield [primary, *_disorder(weights[primary])]
