"""The intervals and tests over repeats, each checked against a reference computed another way: the Wilson interval
by inverting the score test numerically, the exact tests and the median's interval by enumerating the binomial
distribution (and against scipy, where it is installed)."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looplab.records.intervals import (
    LEVEL,
    MAX_REPEATS,
    SignCounts,
    median_interval,
    repeats_to_resolve,
    sign_test,
    wilson,
)
from tests.tiers import scaled_examples

Z = NormalDist().inv_cdf(0.975)
EXAMPLES = settings(max_examples=scaled_examples(1.0), deadline=None)


def _pmf(n: int, k: int) -> float:
    return math.comb(n, k) / 2**n


def _score_test_accepts(passed: int, runs: int, p: float) -> bool:
    """The score test of rate `p`: what the Wilson interval is the set of."""
    return abs(passed / runs - p) <= Z * math.sqrt(p * (1 - p) / runs)


def _edge(passed: int, runs: int, inside: float, outside: float) -> float:
    """Where the score test turns from accepting to rejecting between `inside` and `outside`, by bisection."""
    for _ in range(200):
        middle = (inside + outside) / 2
        inside, outside = (middle, outside) if _score_test_accepts(passed, runs, middle) else (inside, middle)
    return inside


@EXAMPLES
@given(runs=st.integers(1, 400), data=st.data())
def test_the_wilson_interval_is_every_rate_the_score_test_accepts(runs: int, data: st.DataObject) -> None:
    passed = data.draw(st.integers(0, runs))
    found = wilson(passed, runs)
    estimate = passed / runs
    assert found.low == pytest.approx(0.0 if passed == 0 else _edge(passed, runs, estimate, 0.0), abs=1e-9)
    assert found.high == pytest.approx(1.0 if passed == runs else _edge(passed, runs, estimate, 1.0), abs=1e-9)
    assert 0.0 <= found.low <= estimate <= found.high <= 1.0


def _two_sided(plus: int, minus: int) -> float:
    """The exact two-sided binomial p-value at 1/2 as scipy defines it: every outcome no likelier than the one seen."""
    n = plus + minus
    seen = _pmf(n, plus)
    return min(1.0, sum(_pmf(n, k) for k in range(n + 1) if _pmf(n, k) <= seen * (1 + 1e-7)))


@EXAMPLES
@given(plus=st.integers(0, 60), minus=st.integers(0, 60))
def test_the_sign_test_is_the_exact_binomial_test_at_one_half(plus: int, minus: int) -> None:
    assert sign_test(plus, minus) == pytest.approx(_two_sided(plus, minus), rel=1e-9, abs=1e-300)
    assert sign_test(plus, minus) == sign_test(minus, plus)


def test_the_exact_tests_agree_with_scipy_where_it_is_installed() -> None:
    stats = pytest.importorskip("scipy.stats")
    for plus, minus in [(0, 5), (1, 9), (7, 3), (12, 2), (30, 18), (0, 0)]:
        if plus + minus:
            assert sign_test(plus, minus) == pytest.approx(stats.binomtest(plus, plus + minus).pvalue)
    for passed, runs in [(0, 5), (3, 5), (14, 20), (50, 50)]:
        ci = stats.binomtest(passed, runs).proportion_ci(method="wilson")
        assert wilson(passed, runs).ends == pytest.approx([ci.low, ci.high])


def _coverage(n: int, k: int) -> float:
    """How often `[x(k), x(n+1-k)]` of `n` draws holds the median of a continuous distribution: P(k <= B <= n-k)."""
    return sum(_pmf(n, b) for b in range(k, n - k + 1))


@EXAMPLES
@given(values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=300))
def test_a_medians_interval_is_the_narrowest_order_statistics_that_hold_it_at_95_percent(values: list[float]) -> None:
    found = median_interval(values)
    ordered, n = sorted(values), len(values)
    # the largest k whose interval still covers the median at LEVEL, by enumerating the binomial distribution
    k = max((k for k in range(1, (n + 1) // 2 + 1) if _coverage(n, k) >= LEVEL), default=0)
    if k == 0:
        assert (found.low, found.high) == (ordered[0], ordered[-1]) and found.confidence < LEVEL
    else:
        assert (found.low, found.high) == (ordered[k - 1], ordered[n - k])
        assert found.confidence == pytest.approx(_coverage(n, k)) and found.confidence >= LEVEL
    middle = sorted(values)[(n - 1) // 2 : n // 2 + 1]
    assert found.low <= min(middle) and max(middle) <= found.high


def test_bad_counts_are_refused() -> None:
    for passed, runs in [(1, 0), (-1, 3), (4, 3)]:
        with pytest.raises(ValueError, match="pass rate needs"):
            wilson(passed, runs)
    with pytest.raises(ValueError, match="one value or more"):
        median_interval([])


@EXAMPLES
@given(above=st.integers(0, 40), tied=st.integers(0, 40), below=st.integers(0, 40), repeats=st.integers(1, 40))
def test_the_repeats_that_resolve_a_difference_resolve_it_and_fewer_do_not(
    above: int, tied: int, below: int, repeats: int
) -> None:
    counts = SignCounts(above, tied, below)
    needed = repeats_to_resolve(counts, repeats)
    if counts.distinguishable:
        assert needed == repeats
    elif above == below:
        assert needed is None  # no difference seen: no number of repeats tells them apart
    elif needed is None:
        assert not counts.scaled(MAX_REPEATS / repeats).distinguishable
    else:
        assert needed > repeats and counts.scaled(needed / repeats).distinguishable
        assert not counts.scaled((needed - 1) / repeats).distinguishable


def test_twenty_pairs_all_one_way_tell_two_runners_apart_and_three_do_not() -> None:
    assert SignCounts(20, 0, 0).distinguishable and not SignCounts(3, 0, 0).distinguishable
    assert repeats_to_resolve(SignCounts(3, 0, 0), 3) == 6  # six pairs one way: p = 1/32
