"""`eval --repeat-until WIDTH`: each cell repeated, in rounds, until its pass rate's 95 % interval is at most WIDTH
wide or it ran the most times allowed; the rounds settle, and a settled cell spends nothing more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looplab import cli
from looplab.records.intervals import wilson
from looplab.run import rounds
from tests.tiers import scaled_examples

widths = st.floats(0.05, 1.0)


@settings(max_examples=scaled_examples(1.0), deadline=None)
@given(width=widths, most=st.integers(1, 60), rates=st.lists(st.floats(0, 1), min_size=1, max_size=6))
def test_rounds_settle_every_cell_narrow_enough_or_at_the_most(width: float, most: int, rates: list[float]) -> None:
    """Cells whose runs pass at fixed rates (every run's outcome from its rate and its index, so deterministic):
    each round asks only for cells still too wide, never past `most`, and the rounds end."""
    first = rounds.first_round(width, most)
    assert 1 <= first <= most
    runs = {(f"r{i}", "case"): [k * rate % 1 < rate for k in range(1, first + 1)] for i, rate in enumerate(rates)}
    for _ in range(most * len(rates) + 1):  # each round adds a run or more to a cell below the most: bounded
        tallies = {cell: (sum(outcomes), len(outcomes)) for cell, outcomes in runs.items()}
        goals = rounds.next_round(tallies, width, most)
        for cell, (passed, ran) in tallies.items():
            settled = ran >= most or wilson(passed, ran).width <= width
            assert (cell in goals) != settled
            if cell in goals:
                assert ran < goals[cell] <= most
        if not goals:
            break
        rate = dict(zip(runs, rates, strict=True))
        for cell, goal in goals.items():
            runs[cell] += [k * rate[cell] % 1 < rate[cell] for k in range(len(runs[cell]) + 1, goal + 1)]
    else:
        pytest.fail("the rounds did not settle")


def test_a_width_is_a_fraction_or_a_percentage_and_nothing_else(capsys: pytest.CaptureFixture[str]) -> None:
    from looplab.cli._options import width

    assert width("0.3") == width("30%") == pytest.approx(0.3) and width("1") == 1.0
    for bad in ("0", "-0.1", "1.5", "nan", "inf", "thirty", "%"):
        with pytest.raises(Exception, match="expected a width above 0 and at most 1"):
            width(bad)


def test_eval_repeats_a_settled_cell_only_as_often_as_its_interval_needs(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    args = ["eval", "--case", "vip-compound", "--runner", "handrolled", "--repeat-until", "45%", "--jobs", "1"]
    assert cli.main([*args, "--json", str(out)]) == 0
    cells = json.loads(out.read_text())["cells"]
    # Every run passes against the scripted model: the first round, as many runs as 45 % needs at best, settles it.
    assert [c["repeat"] for c in cells] == list(range(1, rounds.first_round(0.45, 20) + 1))
    assert wilson(len(cells), len(cells)).width <= 0.45 < wilson(len(cells) - 1, len(cells) - 1).width
    [summary] = json.loads(out.read_text())["summary"]
    assert summary["repeats"] == len(cells) and summary["completion_interval"][1] == 1.0


def test_repeat_until_is_refused_with_a_shard_or_resume_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["eval", "--case", "vip-compound", "--repeat-until", "0.3", "--shard", "1/2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--repeat-until decides each round from every run of a cell" in err
