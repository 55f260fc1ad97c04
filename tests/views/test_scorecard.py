"""The scorecard: every cell read off a measurement, "not measured" where there is none."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.console import Console

from looplab.adapters import registry
from looplab.adapters.boundary.budget import RunBudget
from looplab.records import measurements, results
from looplab.records.document import Document
from looplab.run import harness
from looplab.scenarios.cases import load_cases
from looplab.shared_tools import Guard
from looplab.views import scorecard, scorecard_rows, scorecard_text
from tests.paths import REPO

DOCS = REPO / "docs"
COMMITTED_CAPS = scorecard.load_caps(DOCS / "iteration-caps.json")


def _eval(runners: list[str], case_ids: list[str]) -> Document:
    from looplab.run import matrix

    cases = [load_cases()[c] for c in case_ids]
    with harness.endpoint(harness.ModelChoice()) as where:
        outcomes = matrix.run_matrix(runners, cases, where)
    return results.build(outcomes, model="scripted", api=None, runners=runners, cases=cases)


def test_without_measurements_every_behaviour_cell_says_not_measured() -> None:
    card = scorecard.build(["handrolled"])
    cells = card.cards[0].cells
    assert set(cells) == {r.key for r in scorecard_rows.ROWS}
    # What the runner declares is known without measuring: its wire APIs (and that it cannot delegate, if so).
    declared = {"apis"} | ({"delegation"} if registry.RUNNERS["handrolled"].delegation is None else set())
    assert {k for k, c in cells.items() if c.text != scorecard_rows.NOT_MEASURED} == declared
    assert all(not c.measured for k, c in cells.items() if k not in declared)
    without_delegation = scorecard.build(["external"]).cards[0].cells["delegation"]
    assert without_delegation.text == "cannot delegate"


def test_a_runner_that_stops_recovering_changes_its_malformed_arguments_cell(monkeypatch) -> None:
    before = scorecard.build(["handrolled"], scorecard.observed(_eval(["handrolled"], ["sloppy-calls"])))
    assert before.cards[0].cells["malformed"].text == "recovers"
    assert before.cards[0].cells["malformed"].evidence == "eval: sloppy-calls"

    real_call = Guard.call

    def no_recovery(self: Guard, name, args, call_id=None):  # the loop now dies on the first bad call
        record = real_call(self, name, args, call_id)
        if "InvalidArguments" in record.result:
            raise RuntimeError("this runner gives up on malformed arguments")
        return record

    monkeypatch.setattr(Guard, "call", no_recovery)
    after = scorecard.build(["handrolled"], scorecard.observed(_eval(["handrolled"], ["sloppy-calls"])))
    assert after.cards[0].cells["malformed"].text == "stops: error"


def test_the_token_budget_cell_says_whether_the_budget_held(monkeypatch) -> None:
    held = scorecard.build(["handrolled"], scorecard.observed(_eval(["handrolled"], ["token-budget"])))
    cell = held.cards[0].cells["token_budget"]
    assert re.fullmatch(r"held: [\d,]+ tokens of 3,000, \d+ calls", cell.text) and cell.evidence == "eval: token-budget"
    # A gate that no longer counts tokens: the run spends past the budget and answers, and the cell says so.
    monkeypatch.setattr(RunBudget, "refusal", lambda self, request_bytes=0: None)
    spent = scorecard.build(["handrolled"], scorecard.observed(_eval(["handrolled"], ["token-budget"])))
    assert spent.cards[0].cells["token_budget"].text.startswith("failed (stop: final_answer): ")


@pytest.mark.full  # a framework's run
@pytest.mark.skipif(not registry.RUNNERS["pydantic_ai"].installed(), reason="the pydantic-ai extra is not installed")
def test_the_delegation_cell_counts_the_delegates_calls() -> None:
    card = scorecard.build(["pydantic_ai"], scorecard.observed(_eval(["pydantic_ai"], ["delegation"])))
    cell = card.cards[0].cells["delegation"]
    assert cell.text == "passed: 3 of 7 calls the delegates'" and cell.evidence == "eval: delegation"


@pytest.mark.skipif(COMMITTED_CAPS is None, reason="docs/iteration-caps.json is not in this checkout")
def test_the_cap_cells_follow_the_caps_measurement() -> None:
    doc = COMMITTED_CAPS.model_copy(deep=True)
    card = scorecard.build(["openai_agents"], caps=doc).cards[0].cells
    assert card["at_cap"].text == "the framework raises MaxTurnsExceeded (from agents.exceptions)"
    assert card["default_cap"].text == "10 model calls (Runner.run(max_turns=10))"
    report = next(r for r in doc.runners if r.runner == "openai_agents")
    report.knobs[0].rows[0].ending = measurements.Ending(how="returns silently (no exception, no answer)")
    changed = scorecard.build(["openai_agents"], caps=doc).cards[0].cells
    assert changed["at_cap"].text == "returns silently"


@pytest.mark.skipif(COMMITTED_CAPS is None, reason="docs/iteration-caps.json is not in this checkout")
def test_the_streamed_cell_says_what_streaming_changed_at_the_cap() -> None:
    doc = COMMITTED_CAPS.model_copy(deep=True)
    report = next(r for r in doc.runners if r.streamed)
    assert report.streamed is not None
    report.streamed.streamed = report.streamed.whole.model_copy(deep=True)
    assert _cap_cell(doc, report.runner, "streamed_cap") == "the same as with whole replies"
    report.streamed.streamed.model_calls += 1
    assert _cap_cell(doc, report.runner, "streamed_cap").startswith(f"{report.streamed.whole.model_calls + 1} model")
    report.streamed.streamed.ending = measurements.Ending(how="raises", exception="agents.exceptions.MaxTurnsExceeded")
    assert _cap_cell(doc, report.runner, "streamed_cap").startswith("the framework raises MaxTurnsExceeded")
    report.streamed = None
    assert _cap_cell(doc, report.runner, "streamed_cap") == scorecard.NOT_MEASURED


@pytest.mark.skipif(COMMITTED_CAPS is None, reason="docs/iteration-caps.json is not in this checkout")
def test_the_streamed_cell_names_the_frameworks_counters_that_streaming_reads_otherwise() -> None:
    doc = COMMITTED_CAPS.model_copy(deep=True)
    report = next(r for r in doc.runners if r.streamed)
    assert report.streamed is not None
    whole = report.streamed.whole.model_copy(deep=True, update={"setting": None})
    whole.ending.counters = {"usage.requests": whole.model_calls}
    streamed = whole.model_copy(deep=True)
    streamed.ending.counters |= {"result.current_turn": 0}
    report.streamed.whole, report.streamed.streamed = whole, streamed
    said = f"streamed, result.current_turn reads 0 after {whole.model_calls} model calls"
    assert _cap_cell(doc, report.runner, "streamed_cap") == f"the same as with whole replies; {said}"
    streamed.ending.counters["usage.requests"] = 0
    cell = _cap_cell(doc, report.runner, "streamed_cap")
    assert cell.startswith(f"the same as with whole replies; its counters differ: usage.requests {whole.model_calls}")


def _cap_cell(doc: measurements.CapsDoc, runner: str, key: str = "default_cap") -> str:
    return scorecard.build([runner], caps=doc).cards[0].cells[key].text


@pytest.mark.skipif(COMMITTED_CAPS is None, reason="docs/iteration-caps.json is not in this checkout")
def test_the_default_cap_is_what_stops_a_runaway_when_nothing_is_set() -> None:
    """LangChain and LangGraph map max_steps onto a knob with no default; their recursion_limit still bites."""
    doc = COMMITTED_CAPS.model_copy(deep=True)
    assert _cap_cell(doc, "langchain") == "about 5,000 model calls (recursion_limit = 9999)"
    assert _cap_cell(doc, "langgraph") == "about 5,004 model calls (recursion_limit = 10007)"
    assert _cap_cell(doc, "crewai") == "26 model calls (Agent(max_iter=25))"  # counts tool calls: one more
    assert _cap_cell(doc, "handrolled").startswith("none (unbounded: still going at looplab's safety stop")
    # Read off the measurement, not written down: another default, or rows of another slope, give another number.
    recursion = next(k for r in doc.runners if r.runner == "langgraph" for k in r.knobs if k.knob == "recursion_limit")
    recursion.default = 101
    assert _cap_cell(doc, "langgraph") == "about 51 model calls (recursion_limit = 101)"
    for row in recursion.rows:
        row.model_calls = row.value or 0
    assert _cap_cell(doc, "langgraph") == "about 101 model calls (recursion_limit = 101)"


@pytest.mark.skipif(COMMITTED_CAPS is None, reason="docs/iteration-caps.json is not in this checkout")
def test_every_knob_with_a_default_is_named_the_first_to_bite_first() -> None:
    doc = COMMITTED_CAPS.model_copy(deep=True)
    report = next(r for r in doc.runners if r.runner == "pydantic_ai")
    requests, tools = report.knobs  # request_limit (default 50), tool_calls_limit (no default)
    tools.default = 10  # a tool-call limit of 10 by default: 11 model calls, before the request limit's 50
    for knob in report.knobs:  # the run with nothing set now ends at the tool-call limit
        knob.unset = knob.unset.model_copy(update={"model_calls": 11, "tool_calls": 10})
    assert _cap_cell(doc, "pydantic_ai") == (
        "11 model calls (Agent.run(usage_limits=UsageLimits(tool_calls_limit=10))); "
        "then 50 model calls (Agent.run(usage_limits=UsageLimits(request_limit=50)))"
    )
    assert requests.default == 50


@pytest.mark.skipif(COMMITTED_CAPS is None, reason="docs/iteration-caps.json is not in this checkout")
def test_an_exception_at_the_cap_reads_as_the_frameworks_with_its_module() -> None:
    doc = COMMITTED_CAPS.model_copy(deep=True)
    assert _cap_cell(doc, "crewai", "at_cap") == "the framework raises ValidationError (from pydantic_core)"
    assert _cap_cell(doc, "langgraph", "at_cap") == "returns silently"
    assert (
        _cap_cell(doc, "google_adk", "at_cap")
        == "the framework raises LlmCallsLimitExceededError (from google.adk.agents.invocation_context)"
    )


@pytest.mark.skipif(COMMITTED_CAPS is None, reason="docs/iteration-caps.json is not in this checkout")
def test_every_markdown_cap_link_names_a_section_of_the_caps_doc() -> None:
    runners = [r.runner for r in COMMITTED_CAPS.runners]
    text = scorecard_text.markdown(scorecard.build(runners, caps=COMMITTED_CAPS))
    headings = re.findall(r"^## (.+)$", (DOCS / "iteration-caps.md").read_text(encoding="utf-8"), re.M)
    anchors = {
        "".join(ch for ch in h.lower().replace("`", "") if ch.isalnum() or ch in " -_").replace(" ", "-")
        for h in headings
    }
    links = re.findall(r"\]\(iteration-caps\.md#([^)]+)\)", text)
    assert links and set(links) <= anchors


words = st.text(st.characters(categories=("L", "N"), max_codepoint=0x7F), min_size=1, max_size=30)


@settings(deadline=None)
@example(width=80, texts=[["0"], ["0"]])  # every behaviour shared: no table names the runners
@given(width=st.sampled_from([80, 160]), texts=st.lists(st.lists(words, min_size=1, max_size=6), min_size=1))
def test_the_terminal_scorecard_fits_its_width_and_cuts_nothing(width: int, texts: list[list[str]]) -> None:
    cards = [
        scorecard_rows.RunnerCard(
            runner=f"runner_with_a_long_name_{i}",
            version="1.0",
            cells={r.key: scorecard_rows.Cell(text=" ".join(t), evidence="x") for r in scorecard_rows.ROWS},
        )
        for i, t in enumerate(texts[:14])
    ]
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=False, color_system=None)
    scorecard_text.print_terminal(scorecard_rows.Scorecard(cards=cards, sources={"eval": "e.json"}), console)
    printed = out.getvalue()
    assert max(len(line) for line in printed.splitlines()) <= width
    assert "…" not in printed
    # wrapped, never cut: every character of every cell is printed somewhere; a behaviour every runner shares is
    # said once, above its group
    shared = {r.key for r in scorecard_rows.ROWS if len(cards) > 1 and len({c.cells[r.key].text for c in cards}) == 1}
    texts_shown = [c.runner for c in cards] + [cards[0].cells[k].text for k in shared]
    texts_shown += [c.cells[r.key].text for c in cards for r in scorecard_rows.ROWS if r.key not in shared]
    wanted = Counter(ch for text in texts_shown for ch in text if ch.isalnum())
    assert not wanted - Counter(ch for ch in printed if ch.isalnum())


def test_a_teams_cases_get_their_own_group_and_looplabs_alone_do_not(tmp_path: Path) -> None:
    from looplab import cli
    from tests.team_suite import CASES, write_team_suite

    suite = write_team_suite(tmp_path)
    builtin_only = scorecard.build(["handrolled"], scorecard.observed(_eval(["handrolled"], ["vip-compound"])))
    assert "your cases" not in scorecard_rows.groups_of(builtin_only)
    assert not builtin_only.cards[0].cells["own_cases"].measured

    out = tmp_path / "card.md"
    assert cli.main(["scorecard", "--runner", "handrolled", "--cases", str(suite), "--markdown", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "## your cases" in text
    row = next(line for line in text.splitlines() if line.startswith("| `handrolled`") and " passed; " in line)
    assert f"{len(CASES)} of {len(CASES)} passed" in row


def test_a_framework_that_kept_the_malformed_call_gives_its_reason_in_the_cell() -> None:
    pytest.importorskip("langchain", reason="the langchain extra is not installed")
    card = scorecard.build(["langchain"], scorecard.observed(_eval(["langchain"], ["sloppy-calls"])))
    cell = card.cards[0].cells["malformed"]
    # LangChain kept the call whose arguments are not JSON in AIMessage.invalid_tool_calls and ended the run; the
    # cell says so with LangChain's reason, its echo of the arguments left out and the rest cut between words.
    assert cell.text.startswith("stops: error (invalid_tool_calls: Function run_tests arguments: … are not valid JSON")
    assert cell.text.endswith("…)")
    assert len(cell.text) <= len("stops: error (invalid_tool_calls: )") + scorecard.REASON_CHARS
    assert cell.evidence == "eval: sloppy-calls"


def test_importing_the_scorecard_loads_no_suite() -> None:
    # `looplab scorecard` on a results document must not pay for reading the built-in suite's case files at import.
    code = "import sys, looplab.views.scorecard; print('looplab.scenarios.cases' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


def _kept_document(tmp_path: Path, cases: tuple[str, ...]) -> Path:
    """A results document under tmp_path/looplab-runs/<time>/ holding `cases` for handrolled (one real run, copied)."""
    with harness.endpoint(harness.ModelChoice()) as where:
        one = harness.run_one("handrolled", load_cases()["vip-compound"], where)
    assert one.result is not None
    outcomes = [
        harness.RunOutcome("handrolled", c, one.result.model_copy(update={"case": c}), one.checks) for c in cases
    ]
    doc = results.build(outcomes, runners=["handrolled"], cases=[load_cases()[c] for c in cases])
    return results.write(doc, tmp_path / "looplab-runs" / "20260101-120000" / "results.json")


def test_scorecard_reads_the_newest_results_document_and_runs_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    from looplab import cli
    from looplab.run import matrix

    kept = _kept_document(tmp_path, scorecard.CASES)
    older = tmp_path / "looplab-runs" / "20250101-000000" / "results.json"
    older.parent.mkdir()
    older.write_text(kept.read_text())
    import os

    os.utime(older, (0, 0))  # written long before: not the newest

    def no_run(*_: object, **__: object) -> None:
        raise AssertionError("the scorecard ran the cases although a results document holds them")

    monkeypatch.setattr(matrix, "run_scripted", no_run)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["scorecard", "--caps", str(DOCS / "iteration-caps.json")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    said = f"newest results: {Path('looplab-runs/20260101-120000/results.json')} (--rerun runs anew)"
    assert said in out
    assert f"eval: {Path('looplab-runs/20260101-120000/results.json')}" in out


def test_scorecard_says_what_it_runs_when_the_newest_document_lacks_its_cases(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from looplab import cli
    from looplab.run import matrix

    _kept_document(tmp_path, ("vip-compound",))
    ran: list[object] = []

    def stop_here(runners: list[str], cases: list[object], **_: object) -> None:
        ran.append((runners, cases))
        raise KeyboardInterrupt  # what was said before the run is what this test reads

    monkeypatch.setattr(matrix, "run_scripted", stop_here)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        cli.main(["scorecard", "--runner", "handrolled", "--caps", str(DOCS / "iteration-caps.json")])
    out = " ".join(capsys.readouterr().out.split())
    assert "the newest results document, lacks sloppy-calls" in out
    assert f"running {len(scorecard.CASES)} cases × 1 runners against the scripted model" in out
    assert "roughly" in out and ran


def test_scorecard_rerun_runs_even_when_a_document_holds_the_cases(tmp_path: Path, monkeypatch, capsys) -> None:
    from looplab import cli
    from looplab.run import matrix

    _kept_document(tmp_path, scorecard.CASES)
    monkeypatch.setattr(matrix, "run_scripted", lambda *_, **__: (_ for _ in ()).throw(KeyboardInterrupt))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        cli.main(["scorecard", "--rerun", "--runner", "handrolled", "--caps", str(DOCS / "iteration-caps.json")])
    assert "newest results:" not in capsys.readouterr().out
