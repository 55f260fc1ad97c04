"""Runners compared over the same cases and repeats: the pairs, and their counts and tests."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from looplab.records import results
from looplab.records.comparison import compare_runners, repeats_of
from looplab.records.intervals import SignCounts, sign_test
from tests.repeated import run
from tests.tiers import scaled_examples

pairs_st = st.lists(
    st.tuples(st.booleans(), st.booleans(), st.integers(0, 3), st.integers(0, 3)), min_size=2, max_size=30
)


@settings(max_examples=scaled_examples(0.5), deadline=None)
@given(pairs=pairs_st, cases=st.integers(1, 3))
def test_the_pairs_are_counted_by_sign_and_tested_exactly(pairs: list[tuple[bool, bool, int, int]], cases: int) -> None:
    outcomes = []
    for i, (a_passed, b_passed, a_tokens, b_tokens) in enumerate(pairs):
        case, repeat = ("vip-compound", "three-hops", "wrong-path")[i % cases], i // cases + 1
        outcomes += [run("a", case, repeat, a_passed, a_tokens), run("b", case, repeat, b_passed, b_tokens)]
    doc = results.build(outcomes)
    found = {c.metric: c for c in compare_runners(doc)}
    expected = {
        "pass rate": SignCounts.of([float(a) - float(b) for a, b, *_ in pairs]),
        "tokens": SignCounts.of([float(a - b) for *_, a, b in pairs]),
    }
    for metric, counts in expected.items():
        c = found[metric]
        assert (c.first, c.second, c.counts) == ("a", "b", counts)
        assert c.p_value == sign_test(counts.above, counts.below)
        assert c.distinguishable == (c.p_value < 0.05)
        assert c.repeats == repeats_of(doc) == -(-len(pairs) // cases)


def test_only_what_both_runners_ran_is_paired() -> None:
    outcomes = [run("a", "vip-compound", k, True) for k in (1, 2, 3)] + [
        run("b", "vip-compound", k, False) for k in (1, 2)
    ]
    outcomes += [run("b", "delegation", k, True) for k in (1, 2, 3)]  # a case only b ran
    pass_rate = next(c for c in compare_runners(results.build(outcomes)) if c.metric == "pass rate")
    assert pass_rate.counts == SignCounts(2, 0, 0) and pass_rate.repeats == 2


@settings(max_examples=scaled_examples(0.5), deadline=None)
@given(pairs=pairs_st)
def test_the_paired_difference_leaves_zero_out_exactly_where_the_sign_test_holds(
    pairs: list[tuple[bool, bool, int, int]],
) -> None:
    outcomes = []
    for k, (_, _, a_tokens, b_tokens) in enumerate(pairs, 1):
        outcomes += [run("a", "vip-compound", k, True, a_tokens), run("b", "vip-compound", k, True, b_tokens)]
    tokens = next(c for c in compare_runners(results.build(outcomes)) if c.metric == "tokens")
    if tokens.difference is None:
        assert tokens.counts.above + tokens.counts.below < 6 and not tokens.distinguishable
    else:
        _, low, high = tokens.difference
        assert (low > 0 or high < 0) == tokens.distinguishable
