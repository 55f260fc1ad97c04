"""What a number measured over repeats is worth: 95 % intervals, paired tests, and the repeats a verdict needs.

Against a real model the same runner passes 3 of 5 times and spends other tokens on every run; these say which of
its numbers, and which differences between two runners, hold at 95 %. Each is exact or closed-form, so the same
document gives the same numbers on every machine, with no resampling to seed:

- `wilson`: a pass rate's interval (the Wilson score interval);
- `median_interval`: a median's interval from the order statistics (the distribution-free interval a sign test
  inverts; what a percentile bootstrap of the median approximates, without its resampling noise or its cost);
- `sign_test`: the exact two-sided binomial test of paired outcomes, McNemar's exact test when the pairs are
  pass/fail and the sign test when they are one runner's number against another's;
- `repeats_to_resolve`: how many repeats a difference not yet distinguishable would need, if the spread observed
  so far held; `runs_for_width`, how many a pass rate's interval needs to narrow to a width.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from statistics import NormalDist

__all__ = ["MAX_REPEATS", "SignCounts", "median_interval", "repeats_to_resolve", "runs_for_width", "wilson"]

#: The confidence every interval and test here is at.
LEVEL = 0.95
#: The normal quantile of a two-sided `LEVEL` interval.
Z = NormalDist().inv_cdf(1 - (1 - LEVEL) / 2)
#: The most repeats `repeats_to_resolve` looks for: past it, a difference is called out of reach.
MAX_REPEATS = 10_000


@dataclass(frozen=True)
class Interval:
    """A value's interval: `low` to `high`, holding the true value with probability `confidence` or more."""

    low: float
    high: float
    #: What the interval guarantees: `LEVEL`, or less where too few runs allow no more (a median of 5 runs or
    #: fewer: the range of the runs).
    confidence: float = LEVEL

    @property
    def width(self) -> float:
        """How far apart its ends are."""
        return self.high - self.low

    def excludes(self, value: float) -> bool:
        """Whether `value` lies outside it, at `LEVEL` (an interval short of it excludes nothing)."""
        return self.confidence >= LEVEL and not self.low <= value <= self.high

    @property
    def ends(self) -> tuple[float, float]:
        """`(low, high)`, as the results document stores it."""
        return self.low, self.high


def wilson(passed: int, runs: int) -> Interval:
    """The Wilson score interval of `passed` out of `runs` (at least one run)."""
    if runs < 1 or not 0 <= passed <= runs:
        raise ValueError(f"a pass rate needs 0 <= passed <= runs and runs >= 1, not {passed}/{runs}")
    p, z2 = passed / runs, Z * Z
    centre = (p + z2 / (2 * runs)) / (1 + z2 / runs)
    half = Z * math.sqrt(p * (1 - p) / runs + z2 / (4 * runs * runs)) / (1 + z2 / runs)
    # At 0 or every run an end is exactly 0 or 1; rounding must not move it past.
    low = 0.0 if passed == 0 else max(0.0, centre - half)
    high = 1.0 if passed == runs else min(1.0, centre + half)
    return Interval(low, high)


#: Half of what an interval may miss by, exactly (1/40 at 95 %): the binomial tails below compare in integers.
_HALF_ALPHA = (1 - Fraction(LEVEL).limit_denominator(1000)) / 2


def _tails(n: int) -> Iterator[int]:
    """`2**n * P(Binomial(n, 1/2) <= k)` for k = 0, 1, ..., n, in integers (each binomial coefficient from the one
    before, not afresh)."""
    term, tail = 1, 0
    for k in range(n + 1):
        tail += term
        yield tail
        term = term * (n - k) // (k + 1)


@lru_cache(maxsize=4096)
def _lower_rank(n: int) -> int:
    """The 1-based rank of a median interval's lower end over `n` sorted values: the largest `k` with
    `P(Binomial(n, 1/2) < k) <= (1 - LEVEL) / 2`; 0 when even the range of the values falls short of `LEVEL`."""
    bound = _HALF_ALPHA * 2**n
    for k, tail in enumerate(_tails(n)):
        if tail > bound:
            return k
    return n  # pragma: no cover - the whole distribution is more than its tail


def _lower_tail(n: int, k: int) -> int:
    """`2**n * P(Binomial(n, 1/2) <= k)`."""
    return next(itertools.islice(_tails(n), k, None))


def median_interval(values: Sequence[float]) -> Interval:
    """The median's interval from the order statistics: `[x(k), x(n+1-k)]` with the largest `k` whose coverage,
    `1 - 2 P(Binomial(n, 1/2) < k)`, is `LEVEL` or more. Distribution-free; with 5 values or fewer it is their
    range, and its `confidence` says how much that holds."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("a median's interval needs one value or more")
    k = _lower_rank(n)
    if k == 0:  # too few values for LEVEL: their range, at what it holds
        return Interval(ordered[0], ordered[-1], 1 - 2 * 0.5**n if n > 1 else 0.0)
    covered = 1 - 2 * _lower_tail(n, k - 1) / 2**n  # int / int: correctly rounded, however large
    return Interval(ordered[k - 1], ordered[n - k], covered)


def sign_test(plus: int, minus: int) -> float:
    """The exact two-sided p-value of `plus` pairs one way and `minus` the other, ties left out (McNemar's exact test
    on the discordant pairs of pass/fail outcomes; the sign test on paired numbers): 1 when there are none."""
    n = plus + minus
    if n == 0:
        return 1.0
    return min(1.0, 2 * _lower_tail(n, min(plus, minus)) / 2**n)


@dataclass(frozen=True)
class SignCounts:
    """Paired outcomes counted by sign: the pairs where the first is above the second, tied, and below."""

    above: int
    tied: int
    below: int

    @property
    def pairs(self) -> int:
        """Every pair counted."""
        return self.above + self.tied + self.below

    def scaled(self, factor: float) -> SignCounts:
        """The same spread over `factor` times the pairs."""
        return SignCounts(*(round(n * factor) for n in (self.above, self.tied, self.below)))

    @property
    def distinguishable(self) -> bool:
        """Whether the two differ at `LEVEL` (the exact sign test; ties count for neither)."""
        return sign_test(self.above, self.below) < 1 - LEVEL

    @classmethod
    def of(cls, differences: Sequence[float]) -> SignCounts:
        """The counts of paired differences (first minus second)."""
        above = below = 0
        for d in differences:
            above += d > 0
            below += d < 0
        return cls(above, len(differences) - above - below, below)


def repeats_to_resolve(
    counts: SignCounts, repeats: int, resolved: Callable[[SignCounts], bool] | None = None
) -> int | None:
    """The fewest repeats at which `counts`, observed over `repeats`, would be `resolved` (default: distinguishable
    by the sign test) if their spread held; `repeats` itself when they already are; None when no number up to
    `MAX_REPEATS` would (no difference seen: as many pairs each way)."""
    check = resolved or (lambda c: c.distinguishable)
    if check(counts):
        return repeats
    if counts.above == counts.below or repeats < 1:
        return None
    low, high = repeats, repeats
    while not check(counts.scaled(high / repeats)):  # doubling to a number that resolves it, then halving back
        if high >= MAX_REPEATS:
            return None
        low, high = high, min(2 * high, MAX_REPEATS)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if check(counts.scaled(middle / repeats)) else (middle, high)
    return high


def runs_for_width(rate: float, width: float, most: int) -> int:
    """The fewest runs whose pass-rate interval (`wilson`) is at most `width` wide if the rate `rate` held, at most
    `most`."""
    for runs in range(1, most + 1):
        if wilson(round(rate * runs), runs).width <= width:
            return runs
    return most
