"""The scorecard's one cell that states a pass count from eval runs ("your cases": passed, median model calls): over
every repeat, with the 95 % intervals, when a case ran twice or more; as before when each ran once."""

from __future__ import annotations

from looplab.records.intervals import wilson
from looplab.views import scorecard, scorecard_rows
from looplab.views.eval_tables import pass_rate, spread
from tests.views.test_report_intervals import RUNS, document


def own_cases(repeats: int, runs: dict = RUNS) -> dict[str, scorecard_rows.Cell]:
    """Each runner's "your cases" cell from the document of `runs` on two cases outside looplab's suite."""
    doc = document(repeats, runs)
    card = scorecard.build(list(runs), scorecard.observed(doc))
    return {c.runner: c.cells["own_cases"] for c in card.cards}


def test_each_case_run_once_is_counted_as_before() -> None:
    cells = own_cases(1)
    # alpha: c1 passed with 3 calls, c2 passed with 4; beta: c1 passed with 2, c2 failed with 2.
    assert cells["alpha"].text == "2 of 2 passed; 3.5 calls"
    assert cells["beta"].text == "1 of 2 passed; 2 calls"
    assert cells["alpha"].evidence == "eval: c1, c2"


def test_with_repeats_every_repeat_counts_with_its_intervals() -> None:
    cells = own_cases(3)
    # The same numbers as the report's section over repeats (both from every run of c1 and c2).
    note = "(over 3 repeats; [low–high]: 95% intervals)"
    alpha = f"{pass_rate(5, 6, wilson(5, 6).ends)} passed; {spread(4, [3, 9])} calls {note}"
    assert cells["alpha"].text == alpha and "4 [3–9] calls" in alpha
    assert cells["beta"].text == f"{pass_rate(3, 6, wilson(3, 6).ends)} passed; {spread(2, [2, 6])} calls {note}"
    assert cells["beta"].measured and cells["beta"].evidence == "eval: c1, c2"


def test_the_first_repeat_still_stands_for_a_case_of_looplabs_own_suite() -> None:
    # Runs of looplab's own cases are not "your cases": with repeats, only the team's cases count there.
    doc = document(2)
    for cell in doc.cells:
        cell.case = {"c1": "vip-compound", "c2": "c2"}[cell.case]
    for result in doc.results:
        result["case"] = {"c1": "vip-compound", "c2": "c2"}[result["case"]]
    doc._parsed = None
    card = scorecard.build(["alpha"], scorecard.observed(doc))
    [alpha] = card.cards
    assert alpha.cells["own_cases"].text.startswith("2/2 100% [")  # c2 twice: passed with 4 calls, then 3
    assert alpha.cells["own_cases"].evidence == "eval: c2"
