"""How the runners differ: the closing screen of `looplab run` and the HTML report show the same rows."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from rich.console import Console

from looplab.records import results
from looplab.records.document import Document
from looplab.run import harness
from looplab.scenarios.cases import load_cases
from looplab.views import differences, first_screen, report, scorecard
from tests.paths import REPO

ROOT = REPO
#: Two runners that differ on a malformed call (handrolled recovers, langgraph stops), and a case they agree on.
RUNNERS = ["handrolled", "langgraph"]
CASES = ["vip-compound", "sloppy-calls"]


@pytest.fixture(scope="module")
def doc() -> Document:
    """The results document of `RUNNERS` on `CASES`, run in this process on the scripted model."""
    pytest.importorskip("langgraph", reason="the langgraph extra is not installed")
    from looplab.run import matrix

    cases = [load_cases()[c] for c in CASES]
    with harness.endpoint(harness.ModelChoice()) as where:
        outcomes = matrix.run_matrix(RUNNERS, cases, where)
    return results.build(outcomes, model="scripted", api=None, runners=RUNNERS, cases=cases)


class _TopicRows(HTMLParser):
    """The rows of the report's `table.topics`: (label, text) each, the text's whitespace made single."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, str]] = []
        self._inside = False
        self._cells: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and dict(attrs).get("class") == "topics":
            self._inside = True
        elif self._inside and tag == "tr":
            self._cells = []
        elif self._inside and tag in ("th", "td"):
            self._cells.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._inside = False
        elif self._inside and tag == "tr":
            label, text = self._cells
            self.rows.append((label.strip(), " ".join(text.split())))

    def handle_data(self, data: str) -> None:
        if self._inside and self._cells:
            self._cells[-1] += data


@pytest.mark.full  # four runs in this process
def test_the_report_lists_the_same_differences_as_the_closing_screen(
    doc: Document, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the report reads the caps measurement from the working folder, as `looplab report` does
    caps = scorecard.load_caps()
    assert caps is not None, "docs/iteration-caps.json is not in this checkout"
    width = 2000  # wide enough that no row folds: one line a row
    out = Console(width=width, highlight=False, record=True)
    lines = [line.plain.rstrip() for line in first_screen.differences_lines(doc, width=width, caps=caps, out=out)]
    title, rows = lines[0], lines[1:]
    screen = [tuple(re.split(r"\s{2,}", row.strip(), maxsplit=1)) for row in rows if row.strip()]

    html = report.render_html(doc)
    parser = _TopicRows()
    parser.feed(html[html.index('<section id="differences">') : html.index('<section id="matrix-section">')])

    assert parser.rows == screen
    assert f"{title[:1].upper()}{title[1:]}:" in html
    # Both show the ways these two runners differ, not only that they do.
    labels = [label for label, _ in screen]
    assert {differences.SAME, differences.BAD_CALLS, differences.LAST_TOOLS} <= set(labels), screen
    assert ("same", "vip-compound: all 2 answered in 5 model calls, the same answer") in screen
    assert ("bad call", "sloppy-calls: langgraph stops at the first malformed call; handrolled recovers") in screen


@pytest.mark.parametrize(
    ("plural", "one"),
    [("go on", "goes on"), ("do nothing", "does nothing"), ("raise an exception", "raises an exception"),
     ("return without an answer", "returns without an answer"), ("finish", "finishes"),
     ("recover, fixing bad arguments themselves", "recovers, fixing bad arguments themselves"),
     ("recover", "recovers")],
)  # fmt: skip
def test_a_verb_phrase_is_said_of_one_runner_in_the_singular(plural: str, one: str) -> None:
    from looplab.views.differences import _conjugated

    assert (_conjugated(plural, 1), _conjugated(plural, 2)) == (one, plural)


def test_the_agent_tree_row_names_whose_own_cap_holds_a_tree_of_agents() -> None:
    caps = scorecard.load_caps(REPO / "docs" / "iteration-caps.json")
    assert caps is not None
    runners = ["pydantic_ai", "handrolled", "strands", "dspy", "claude_agent_sdk"]
    card = scorecard.build(runners, [], caps)
    [line] = differences._tree_caps(card)
    holding = [
        c.runner
        for c in card.cards
        if {c.cells[k].text for k in ("parallel_cap", "nested_cap")} & set(differences._TREE_CAPS)
        <= {"the whole tree's calls"}
    ]
    assert holding and all(r in line for r in holding) and line.endswith("let the agents below pass it")
