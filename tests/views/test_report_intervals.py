"""The report over repeats: each runner's pass rate and medians with their 95 % intervals, from the document's
summary, in a section of their own; a document without repeats has no such section."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest

from looplab.adapters.contract.errors import ResultsError
from looplab.records import results
from looplab.records.document import Document
from looplab.records.intervals import wilson
from looplab.records.outcome import RunOutcome
from looplab.records.summary import RunnerSummary
from looplab.scenarios.cases import CheckResult
from looplab.views import report
from looplab.views.eval_tables import pass_rate, spread
from tests.repeated import synthetic_result

#: Per runner, per repeat of the cases `c1` and `c2`: (passed, model calls, wall seconds) of each run.
RUNS = {
    "alpha": [(True, 3, 1.0), (True, 4, 1.5), (False, 9, 2.0), (True, 3, 1.2), (True, 5, 1.1), (True, 4, 0.9)],
    "beta": [(True, 2, 0.5), (False, 2, 0.4), (False, 6, 0.8), (True, 2, 0.6), (False, 3, 0.7), (True, 2, 0.5)],
}


def document(repeats: int, runs: dict[str, list[tuple[bool, int, float]]] = RUNS) -> Document:
    """The results document of each runner on `c1` and `c2`, `repeats` times each (the first runs of `runs`)."""
    outcomes = []
    for runner, said in runs.items():
        for k, (passed, calls, wall_s) in enumerate(said[: 2 * repeats]):
            case, repeat = ("c1", "c2")[k % 2], k // 2 + 1
            checks = [CheckResult(name="answer", passed=passed, detail="")]
            outcomes.append(
                RunOutcome(runner, case, synthetic_result(runner, case, calls, wall_s), checks, repeat=repeat)
            )
    return results.build(outcomes, cases=[])


def section(html: str) -> str:
    """The text of the report's "over N repeats" section, tags dropped and whitespace made single."""
    start = html.index('<section id="repeats">')
    inner = html[start : html.index("</section>", start)]
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", inner)).split())


def test_with_repeats_each_runner_has_its_pass_rate_and_medians_with_their_intervals() -> None:
    doc = document(3)
    assert [RunnerSummary.model_validate(s).repeats for s in doc.summary] == [3, 3]
    html = report.render_html(doc)
    text = section(html)
    assert text.startswith("Per runner, over 3 repeats ")
    assert "[low–high] is a 95% interval (pass rate: Wilson; a median: from the order statistics" in text
    # alpha: 5 of 6 passed (Wilson: 44% to 97%); calls 3 3 4 4 5 9 (median 4; with 6 runs the interval is their
    # range), 110 tokens and $0.001 a call; wall seconds 0.9 1.0 1.1 1.2 1.5 2.0. As the terminal writes them.
    assert round(wilson(5, 6).low, 2) == 0.44 and round(wilson(5, 6).high, 2) == 0.97
    alpha = [
        pass_rate(5, 6, wilson(5, 6).ends),
        spread(4, [3, 9]),
        spread(440, [330, 990], ",.0f"),
        spread(0.004, [0.003, 0.009], ".4f"),
        spread(1.15, [0.9, 2.0], ".2f"),
    ]
    beta = [
        pass_rate(3, 6, wilson(3, 6).ends),
        spread(2, [2, 6]),
        spread(220, [220, 660], ",.0f"),
        spread(0.002, [0.002, 0.006], ".4f"),
        spread(0.55, [0.4, 0.8], ".2f"),
    ]
    assert f"alpha {' '.join(alpha)} beta {' '.join(beta)}" in text
    assert "5/6 83%" in text and "4 [3–9]" in text and "1.15 [0.90–2.00]" in text
    # Beside the per-runner table, reachable from the navigation; the page stays self-contained.
    assert html.index('id="runners"') < html.index('id="repeats"') < html.index('id="case-c1"')
    assert '<a href="#repeats">over 3 repeats</a>' in html
    assert "<script" not in html


def test_the_section_shows_what_the_documents_summary_says() -> None:
    doc = document(2)
    stored = RunnerSummary.model_validate(doc.summary[0])
    doc.summary[0] = stored.model_copy(update={"completion_interval": (0.125, 0.875), "wall_s_median": 7.0}).model_dump(
        mode="json"
    )
    text = section(report.render_html(doc))
    assert f"alpha {pass_rate(stored.passed, stored.runs, [0.125, 0.875])} " in text and " 7.00 [" in text


def test_without_repeats_there_is_no_section_and_no_link() -> None:
    doc = document(1)
    assert all(s["repeats"] == 1 and s["completion_interval"] is None for s in doc.summary)
    built = report.build(doc)
    assert built.repeats == 1 and built.over_repeats == []
    html = report.render_html(doc)
    assert 'id="repeats"' not in html and "#repeats" not in html and "95% interval" not in html


def test_a_runner_name_in_the_section_is_escaped() -> None:
    name = '<img src=x onerror="alert(1)">&'
    html = report.render_html(document(2, {name: RUNS["alpha"]}))
    start = html.index('<section id="repeats">')
    inner = html[start : html.index("</section>", start)]
    assert "<img" not in inner and "<th>&lt;img src=x onerror=&#34;alert(1)&#34;&gt;&amp;</th>" in inner


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"repeats": "three"}, "summary[0].repeats"),
        ({"completion_interval": [0.5]}, "summary[0].completion_interval"),
        ({"tokens_interval": [1.0, 2.0, 3.0]}, "summary[0].tokens_interval"),
        ({"runs": "many"}, "summary[0].runs"),
    ],
)
def test_a_summary_of_another_shape_is_one_line_naming_the_field(change: dict, named: str) -> None:
    """Checked when the document is read, before any view (report, OpenTelemetry, terminal) reads it."""
    data = json.loads(results.to_json(document(2)))
    data["summary"][0] |= change
    with pytest.raises(ResultsError, match=re.escape(f"r.json: not a valid looplab results document: {named}")):
        results.load(data, source="r.json")
