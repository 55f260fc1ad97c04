"""With repeats, the differences name a pass-rate, token, cost or time difference only where it holds at 95 %, and a
case whose runs vary from repeat to repeat is one row, not a difference read off its first runs."""

from __future__ import annotations

from looplab.records import results
from looplab.records.outcome import RunOutcome
from looplab.views import differences
from tests.repeated import run


def _rows(outcomes: list[RunOutcome]) -> dict[str, str]:
    found = differences.compare(results.build(outcomes))
    return {t.text.split(":")[0]: t.text for t in found.topics if t.label == differences.REPEATS}


def test_a_pass_rate_difference_is_named_only_where_it_holds() -> None:
    clear = [run("a", "vip-compound", k, True) for k in range(1, 13)]
    clear += [run("b", "vip-compound", k, k > 10) for k in range(1, 13)]  # b fails 10 of 12 where a passes
    row = _rows(clear)["pass rate"]
    assert row.startswith("pass rate: a passes more often than b in 10 of 12 paired runs") and "McNemar" in row
    close = [run("a", "vip-compound", k, k != 1) for k in range(1, 6)]
    close += [run("b", "vip-compound", k, k not in (1, 2)) for k in range(1, 6)]  # 4/5 and 3/5
    row = _rows(close)["pass rate"]
    assert "a and b not distinguishable yet after 5 repeats" in row and "passes more often" not in row
    assert "repeats would tell them apart if the spread held" in row


def test_without_repeats_nothing_is_compared_over_them() -> None:
    assert _rows([run("a", "vip-compound", 1, True), run("b", "vip-compound", 1, False)]) == {}


def test_a_case_whose_runs_vary_is_one_row_in_place_of_its_first_runs_comparison() -> None:
    outcomes = [run(r, "vip-compound", k, passed=(k + (r == "b")) % 2 == 0) for k in (1, 2, 3) for r in ("a", "b")]
    found = differences.compare(results.build(outcomes))
    [varies] = [t for t in found.topics if t.label == differences.VARIES]
    assert varies.case == "vip-compound" and "a 2 ways, b 2 ways" in varies.text
    assert not any(t.case == "vip-compound" for t in found.topics if t.label in (differences.STOPS, differences.SAME))


def test_runners_whose_differences_do_not_hold_are_not_called_different() -> None:
    alike = [run(r, "vip-compound", k, True) for k in (1, 2, 3) for r in ("a", "b")]
    found = differences.compare(results.build(alike))
    assert not found.differ and found.title.startswith("the 2 runners behaved the same")
    assert {t.text for t in found.topics if t.label == differences.REPEATS} >= {
        "pass rate: a and b the same in all 3 paired runs over 3 repeats"
    }
    more_tokens = [run(r, "vip-compound", k, True, tokens=1000 + (r == "b")) for k in range(1, 7) for r in "ab"]
    found = differences.compare(results.build(more_tokens))  # b above a in all 6 pairs: p = 1/32
    assert found.differ and any(
        t.text.startswith("tokens: b spends more tokens than a in 6 of 6") for t in found.topics
    )


def test_eval_prints_the_comparison_over_repeats(capsys) -> None:  # type: ignore[no-untyped-def]
    from looplab import cli

    args = ["eval", "--case", "vip-compound", "--runner", "handrolled", "--runner", "langgraph", "--repeat", "2"]
    assert cli.main([*args, "--jobs", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "passed [95%]" in out and "2/2 100% [34–100%]" in out
    assert (
        "compared over the repeats" in out and "pass rate handrolled and langgraph the same in all 2 paired runs" in out
    )
