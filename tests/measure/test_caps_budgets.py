"""The caps doc's budgets beyond one agent's steps: a cap under delegation, and a framework's own token budget."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from looplab.adapters import registry
from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.runner import Probe
from looplab.measure import caps, caps_budgets, caps_drift
from looplab.records import measurements
from looplab.records.measurements import CostReport, CostRow, DelegatedTokenRow, DelegationRow, Ending, TokenRow
from looplab.scenarios.cases import CODE_READER_DESCRIPTION
from looplab.scenarios.scripted.conversation import Conversation
from looplab.scenarios.scripted.probes import PARENT_SAW, REPORT, REPORTED, WENT_ON, NeverStops, policy_named
from looplab.scenarios.scripted.server import ScriptedModelServer
from tests.paths import REPO

COMMITTED = (REPO / "docs" / "iteration-caps.json").read_text()
needs_pydantic_ai = pytest.mark.skipif(
    not registry.RUNNERS["pydantic_ai"].installed(), reason="the pydantic-ai extra is not installed"
)


@contextlib.contextmanager
def _prober() -> Iterator[caps.Prober]:
    with contextlib.ExitStack() as stack:
        yield caps.Prober(caps.probe_servers(stack))


@needs_pydantic_ai
def test_under_delegation_the_rows_say_whose_calls_the_cap_counted() -> None:
    """Pydantic AI's delegating tool runs the child on the parent's usage: its `request_limit` counts both agents."""
    with _prober() as prober:
        report = caps_budgets.delegation(prober.run, registry.load("pydantic_ai"))
    assert report is not None and report.counts.startswith("both agents' model calls, together")
    capped = [(r.value, r.model_calls, r.parent_calls, r.child_calls) for r in report.rows if r.value is not None]
    assert capped == [(v, v, 1, v - 1) for v in caps_budgets.DELEGATION_VALUES if v is not None]
    assert all(r.child_last_call == r.value for r in report.rows if r.value is not None)
    assert all(r.parent_saw is None and r.ending.exception for r in report.rows)  # the limit ends the whole run


@needs_pydantic_ai
def test_a_token_budget_is_measured_against_the_call_whose_reply_passed_it() -> None:
    with _prober() as prober:
        adapter = registry.load("pydantic_ai")
        report = caps_budgets.token_budget(prober.run, adapter, adapter.knob_defaults()[adapter.token_knob])
    assert report is not None and report.default is None
    assert report.counts.startswith("input plus output tokens, checked after each reply")
    # its delegating tool runs the child on the parent's usage: the child's tokens count against the one budget
    assert (report.under_delegation_counts or "").startswith("both agents' tokens, together")
    assert all(r.child_calls and r.passed_on_call == r.model_calls for r in report.under_delegation)
    for row in report.rows:
        assert row.tokens > row.value and row.passed_on_call == row.model_calls
        assert row.ending.exception == "pydantic_ai.exceptions.UsageLimitExceeded"


def test_a_runner_that_cannot_delegate_or_has_no_token_budget_is_said_so() -> None:
    lines = "\n".join(caps_budgets.markdown(None, None))
    assert "It cannot delegate here" in lines and "None of its own: looplab's `max_tokens`" in lines
    assert caps_budgets.delegation_cell(None) == "cannot delegate" and caps_budgets.token_cell(None) == "none"


def _row(value: int | None, parent: int, child: int, before: int = 1) -> DelegationRow:
    """A delegating run: the parent's `before` calls, the child's `child`, then the parent's others."""
    return DelegationRow(
        value=value,
        model_calls=parent + child,
        parent_calls=parent,
        child_calls=child,
        ending=Ending(how="x"),
        child_last_call=before + child if child else None,
    )


@given(st.lists(st.integers(3, 30), min_size=2, max_size=4, unique=True), st.data())  # above the parent's calls
def test_whose_calls_a_cap_counts_is_read_off_every_capped_row(values: list[int], data: st.DataObject) -> None:
    # one counter for the run: the child stops when the run's calls, the parent's before it included, reach the value
    before = data.draw(st.integers(1, 2))
    together = [_row(v, before + data.draw(st.integers(0, 2)), v - before, before) for v in values]
    assert caps_budgets._whose([_row(None, 1, 59), *together]).startswith("both agents' model calls, together")
    # a counter of the child's own: its calls are the value, or one off it, whatever the parent made before
    extra = data.draw(st.integers(-1, 1).filter(lambda e: e != -before))
    own = caps_budgets._whose([_row(v, before + 1, v + extra, before) for v in values])
    made = {-1: "N - 1", 0: "N", 1: "N + 1"}[extra]
    assert own.startswith("each agent's own") and own.endswith(f"at cap N made {made} calls of its own")
    stuck = data.draw(st.integers(31, 59))  # the child stops at the same count whatever the value
    assert caps_budgets._whose([_row(v, 1, stuck) for v in values]).startswith("the parent's model calls only")


def test_a_counter_that_holds_the_parents_delegating_call_is_the_runs_not_the_childs() -> None:
    """At caps 3 and 5 the child made 2 and 4 calls after the parent's one: the run's calls reached the cap."""
    rows = [_row(3, 2, 2), _row(5, 2, 4)]
    assert caps_budgets._whose(rows).startswith("both agents' model calls, together")


@pytest.mark.parametrize(
    "runner", [r.runner for r in measurements.CapsDoc.model_validate_json(COMMITTED).runners if r.delegation]
)
def test_the_committed_statement_of_whose_calls_a_cap_counts_agrees_with_its_rows(runner: str) -> None:
    report = next(r for r in measurements.CapsDoc.model_validate_json(COMMITTED).runners if r.runner == runner)
    assert report.delegation is not None
    rows = report.delegation.rows
    assert all(r.child_last_call is not None for r in rows if r.child_calls), "measured before child_last_call"
    assert caps_budgets._whose(rows) == report.delegation.counts
    assert caps_budgets.counters_hold(rows) == report.delegation.counters_hold


#: Each statement `counters_hold` makes of a counter, and the calls of a row it says the counter held.
HELD = {
    "both agents' model calls, together": lambda r: r.model_calls,
    "the parent's model calls only": lambda r: r.parent_calls,
    "the child's model calls only": lambda r: r.child_calls,
}


@given(
    st.lists(st.tuples(st.integers(1, 3), st.integers(0, 12)), min_size=1, max_size=4),
    st.sampled_from([*HELD, "something else"]),
    st.data(),
)
def test_which_calls_a_frameworks_counter_held_is_read_against_every_row(
    calls: list[tuple[int, int]], held: str, data: st.DataObject
) -> None:
    rows = [_row(3 + n, parent, child) for n, (parent, child) in enumerate(calls)]
    for r in rows:
        n = HELD[held](r) if held in HELD else data.draw(st.integers(0, 60))
        r.ending = Ending(how="x", counters={"run.requests": n})
    said = caps_budgets.counters_hold(rows)
    assert said is not None and said.startswith("`run.requests` ")
    stated = said.removeprefix("`run.requests` held ")
    if stated in HELD:  # the statement holds at every row, whichever of the true ones it makes
        assert all(r.ending.counters["run.requests"] == HELD[stated](r) for r in rows)
    else:  # no statement holds: it says what the counter read beside each row's calls
        assert held not in HELD and all(f"{r.ending.counters['run.requests']} (parent" in said for r in rows)
    rows[0].ending.counters = {}
    assert caps_budgets.counters_hold(rows) is None  # a counter not every row has says nothing


def test_when_a_token_budget_stops_is_read_off_the_rows() -> None:
    after = [TokenRow(value=100, model_calls=3, tokens=120, passed_on_call=3, ending=Ending(how="x"))]
    before = [TokenRow(value=100, model_calls=2, tokens=90, passed_on_call=None, ending=Ending(how="x"))]
    odd = [TokenRow(value=100, model_calls=5, tokens=300, passed_on_call=3, ending=Ending(how="x"))]
    assert "checked after each reply" in caps_budgets._when(after)
    assert "checked before each request" in caps_budgets._when(before)
    assert caps_budgets._when(odd) == "not input plus output tokens alone: 100 -> 5 calls, 300 tokens"


def _conversation(task: str, offered: bool, results: tuple[tuple[str, str], ...] = ()) -> Conversation:
    """A chat request's conversation: the task, the delegating tool if `offered`, and each tool call's result."""
    from looplab.scenarios.scripted import conversation as c

    question = {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}
    listed = [("search_code", "Search the code.", {"type": "object"})]
    listed += [("code_reader", CODE_READER_DESCRIPTION, question)] if offered else []
    tools = [{"type": "function", "function": {"name": n, "description": d, "parameters": p}} for n, d, p in listed]
    messages: list[dict] = [{"role": "user", "content": task}]
    for i, (name, content) in enumerate(results):
        call = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        messages += [
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": content},
        ]
    return c.from_chat(c.ChatRequest.model_validate({"model": "m", "messages": messages, "tools": tools}))


def test_the_delegating_probe_asks_once_answers_with_what_came_back_and_its_child_never_stops() -> None:
    probe = policy_named("delegates-to-never-stops")
    [ask] = probe(_conversation("Why does the test fail?", offered=True)).calls
    assert ask.name == "code_reader" and "probe_target" in ask.args["question"]
    back = probe(_conversation("Why does the test fail?", True, (("code_reader", "Max turns (3) exceeded"),)))
    assert back.answer == f"{PARENT_SAW}Max turns (3) exceeded"
    child = probe(_conversation(Delegate.question("probe_target"), offered=False))
    assert [c.name for c in child.calls] == ["search_code"]  # the child: one more tool call, every time


@given(st.integers(1, 8), st.integers(0, 10))
def test_the_ending_probe_asks_for_the_report_tool_on_its_call_and_says_if_the_run_went_on(k: int, turns: int) -> None:
    decision = policy_named(f"ends-by-tool-on:{k}")(_conversation("Why?", False, (("search_code", "x"),) * turns))
    if turns + 1 < k:
        assert [c.name for c in decision.calls] == ["search_code"]
    elif turns + 1 == k:
        [call] = decision.calls
        assert call.name == REPORT.name and REPORT.fn(None, **call.args).startswith(REPORTED)
    else:
        assert decision.answer == WENT_ON and not decision.calls


def test_the_parallel_probe_asks_two_at_once_and_a_nested_child_hands_its_question_on_first_thing() -> None:
    two = policy_named("delegates-to-never-stops:2")
    asks = two(_conversation("Why does the test fail?", offered=True)).calls
    assert [a.name for a in asks] == ["code_reader"] * 2
    assert [a.args["question"] for a in asks] == [Delegate.question(f"probe_target_{n}") for n in (1, 2)]
    back = (("code_reader", "stopped"), ("code_reader", "stopped too"))
    assert two(_conversation("Why does the test fail?", True, back)).answer == f"{PARENT_SAW}stopped | stopped too"
    question = Delegate.question("probe_target")
    probe = policy_named("delegates-to-never-stops")
    [on] = probe(_conversation(question, offered=True)).calls
    assert on.name == "code_reader" and on.args["question"] == question  # offered a delegate: it hands it on
    relayed = probe(_conversation(question, True, (("code_reader", "Max turns (3) exceeded"),)))
    assert relayed.answer == f"{PARENT_SAW}Max turns (3) exceeded"


@given(st.lists(st.tuples(st.integers(2, 30), st.integers(-2, 40)), min_size=1, max_size=4))
def test_how_far_two_children_at_once_pass_the_value_is_read_off_the_rows(runs: list[tuple[int, int]]) -> None:
    made = [_shaped_row(value, value + by, 1, max(value + by - 1, 0), None) for value, by in runs]
    said = caps_budgets._past_the_value(made, "x")
    if all(by <= 0 for _, by in runs):
        assert said.startswith("the whole tree's calls:")
        return
    assert all(f"at {v}, {v + by} calls ({by:+d})" in said for v, by in runs)
    if all(by <= caps_budgets.RACE_SLACK for _, by in runs):
        assert said.startswith("the whole tree's calls, passed by requests out at once")
    else:
        assert said.startswith("not the whole tree's")


def test_two_childrens_rows_that_differ_only_by_their_race_are_not_drift_and_further_apart_they_are() -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    report = next(r for r in doc.runners if r.delegation is not None and r.delegation.parallel)
    committed = caps.to_json(doc)
    report.delegation.parallel[-1].model_calls += caps_budgets.RACE_SLACK
    report.delegation.parallel[-1].child_calls += caps_budgets.RACE_SLACK
    assert not caps_drift.drift(doc, committed).changes
    report.delegation.parallel[-1].child_calls += 1
    changes = caps_drift.drift(doc, committed).changes
    assert {c.field for c in changes} >= {"child_calls"} and changes[0].knob.startswith("under delegation, two")


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([(3, 3, 1, 1, 1), (5, 5, 1, 1, 3)], "the whole tree's calls: three levels deep"),
        ([(3, 7, 2, 2, 3), (5, 9, 2, 2, 5)], "each level's own: the third agent runs on a counter of its own, at 3 "
         "it made 3, at 5 it made 5"),
        ([(3, 60, 1, 1, 58), (5, 60, 1, 1, 58)], "not the third level's: at 3 the third agent made 58 calls"),
        ([(3, 5, 2, 2, 1, 3), (5, 7, 2, 2, 3, 5)], "the whole tree's calls, to the third level: at cap N its last "
         "call was the run's N-th, and the levels above went on to answer: at 3, 5 calls, at 5, 7 calls"),
    ],
)  # fmt: skip
def test_whether_the_cap_reaches_the_third_level_is_read_off_the_rows(rows: list, expected: str) -> None:
    made = [_shaped_row(*r) for r in rows]
    assert caps_budgets._third_level(made).startswith(expected)


def _shaped_row(
    value: int, calls: int, parent: int, child: int, third: int | None, third_last: int | None = None
) -> measurements.DelegationRow:
    ending = measurements.Ending(how="the parent answered")
    return measurements.DelegationRow(
        value=value,
        model_calls=calls,
        parent_calls=parent,
        child_calls=child,
        ending=ending,
        grandchild_calls=third,
        grandchild_last_call=third_last,
    )


def test_a_nested_delegation_row_that_moved_is_named_with_its_shape_and_value() -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    report = next(r for r in doc.runners if r.delegation is not None and r.delegation.nested)
    committed = caps.to_json(doc)
    report.delegation.nested[0].grandchild_calls += 1
    [change] = caps_drift.drift(doc, committed).changes
    knob, value = f"under delegation, three levels ({report.delegation.knob})", str(report.delegation.nested[0].value)
    assert (change.knob, change.value, change.field) == (knob, value, "grandchild_calls")


def test_a_delegation_row_that_moved_is_named_under_delegation_with_its_value() -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    report = next(r for r in doc.runners if r.delegation is not None)
    committed = caps.to_json(doc)
    report.delegation.rows[1].child_calls += 1
    [change] = caps_drift.drift(doc, committed).changes
    assert (change.knob, change.value, change.field) == (
        f"under delegation ({report.delegation.knob})",
        str(report.delegation.rows[1].value),
        "child_calls",
    )


def test_on_another_wire_api_a_token_budget_is_checked_by_how_it_ended_not_by_its_numbers() -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    report = next(r for r in doc.runners if r.token_budget is not None and r.token_budget.rows[0].ending.counters)
    row = report.token_budget.rows[0]
    row.tokens, row.model_calls = row.tokens + 200, row.model_calls + 1  # a wire format with larger requests
    row.ending.counters = {k: n + 1 for k, n in row.ending.counters.items()}  # and the framework counted them
    assert caps_drift.drift(doc, COMMITTED) and not caps_drift.drift(doc, COMMITTED, across_apis=True)
    row.ending.how = "returns silently (no exception, no answer)"  # what the budget does: the same on every API
    assert caps_drift.drift(doc, COMMITTED, across_apis=True)


def _delegated(value: int, parent: list[int], child: list[int], stopped: bool) -> DelegatedTokenRow:
    """A delegating run: the parent's first call, the child's calls, and (when the budget stopped it) no more."""
    spent = [*parent[:1], *child, *parent[1:]]
    passed = next((i for i, total in enumerate(itertools.accumulate(spent), 1) if total > value), None)
    return DelegatedTokenRow(
        value=value,
        model_calls=len(spent),
        tokens=sum(spent),
        passed_on_call=passed,
        ending=Ending(how="raises" if stopped else "kept going"),
        parent_calls=len(parent),
        child_calls=len(child),
        child_tokens=sum(child),
    )


@given(st.lists(st.integers(1000, 9000), min_size=2, max_size=3, unique=True), st.data())
def test_whose_tokens_a_budget_counts_under_delegation_is_read_off_the_rows(values: list[int], data: st.DataObject):
    call = st.integers(300, 700)
    together = []
    for value in values:  # the run ends with the call whose reply took both agents' total past the budget
        child: list[int] = []
        first = data.draw(call)
        while first + sum(child) <= value:
            child.append(data.draw(call))
        together.append(_delegated(value, [first], child, stopped=True))
    assert caps_budgets._whose_tokens(together).startswith("both agents' tokens, together")
    runaway = [_delegated(v, [500], [data.draw(call) for _ in range(59)], stopped=False) for v in values]
    if all(r.child_tokens > r.value for r in runaway):
        assert caps_budgets._whose_tokens(runaway).startswith("not the child's")


@pytest.mark.parametrize(
    "runner",
    [
        r.runner
        for r in measurements.CapsDoc.model_validate_json(COMMITTED).runners
        if r.token_budget and r.token_budget.under_delegation
    ],
)
def test_the_committed_statement_of_whose_tokens_a_budget_counts_agrees_with_its_rows(runner: str) -> None:
    report = next(r for r in measurements.CapsDoc.model_validate_json(COMMITTED).runners if r.runner == runner)
    assert report.token_budget is not None
    budget = report.token_budget
    assert caps_budgets._whose_tokens(budget.under_delegation) == budget.under_delegation_counts
    for row in budget.under_delegation:
        assert row.parent_calls + row.child_calls == row.model_calls and row.child_tokens <= row.tokens


@given(st.integers(2, 8), st.integers(0, 70), st.integers(0, 8))
def test_what_a_child_left_at_its_default_did_is_read_off_its_row_beside_the_capped_one(
    value: int, child: int, capped_child: int
) -> None:
    row = _shaped_row(value, 1 + child, 1, child, None)
    said = caps_budgets._at_its_default(row, [_shaped_row(value, 1 + capped_child, 1, capped_child, None)], None)
    calls = f"{child} call{'' if child == 1 else 's'}"
    if 1 + child >= measurements.SAFETY_STOP:
        assert said.startswith("uncapped") and f"({calls}" in said
        assert said.endswith("as when its knob is set too)") == (child == capped_child)
    elif child == capped_child:
        assert said.startswith("the parent's cap holds it")
    else:
        assert said.startswith("its own default") and f"made {calls}" in said


def test_the_caps_doc_names_each_user_reported_issue_where_the_measurement_shows_it_and_nowhere_else() -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    page = (REPO / "docs" / "iteration-caps.md").read_text(encoding="utf-8")
    sections = {r.runner: r for r in doc.runners}
    for reported in caps_budgets.REPORTED:
        report = sections.get(reported.runner)
        shown = report is not None and report.delegation is not None and reported.shows(report.delegation)
        section = page.split(f"\n## `{reported.runner}` ", 1)[-1].split("\n## ", 1)[0]
        named = f"- reproduces {reported.issue}" in section
        assert named == shown, reported


def test_where_thread_timing_decides_the_parallel_rows_only_how_they_ended_is_compared() -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    report = next(r for r in doc.runners if r.delegation is not None and r.delegation.parallel_races)
    committed = caps.to_json(doc)
    row = report.delegation.parallel[0]
    row.model_calls, row.child_calls = row.model_calls + 6, row.child_calls + 6  # the other way the race can go
    assert not caps_drift.drift(doc, committed).changes
    row.ending.how = "kept going: stopped by looplab's safety stop"
    assert caps_drift.drift(doc, committed).changes


def _cost_row(usd: float, calls: int, shares: tuple[int, int] | None = None, held: bool = False) -> CostRow:
    parent, child = shares if shares else (None, None)
    ending = Ending(how="raises", exception="x.ResultError", message=f"Reached maximum budget (${usd:g})")
    return CostRow(
        value_usd=usd, model_calls=calls, parent_calls=parent, child_calls=child, ending=ending, held_to_deadline=held
    )


@given(st.lists(st.integers(2, 40), min_size=2, max_size=2), st.data())
def test_whose_calls_a_dollar_budget_counts_is_read_against_a_runaways_at_the_same_budget(
    stops: list[int], data: st.DataObject
) -> None:
    alone = [_cost_row(usd, n) for usd, n in zip(caps_budgets.COST_VALUES_USD, stops, strict=True)]
    assert caps_budgets._cost_when(alone).endswith(f"after {stops[-1]} model calls")
    within = [_cost_row(a.value_usd, a.model_calls, (1, a.model_calls - 1)) for a in alone]
    assert caps_budgets._whose_cost(within, alone).startswith("both agents' calls, together")
    held = data.draw(st.booleans())
    past = [_cost_row(a.value_usd, 60, (1, 59), held=held) for a in alone]
    said = caps_budgets._whose_cost(past, alone)
    assert said.startswith("not the child's") and ("waited until looplab's deadline" in said) == held
    section = "\n".join(caps_budgets._cost_markdown(CostReport(knob="k", counts="c", rows=alone,
                        under_delegation=past, under_delegation_counts=said), "claude_agent_sdk"))  # fmt: skip
    assert ("reproduces claude-agent-sdk-python #1273" in section) == held
    assert "| $0.02 | 60 (1 + 59) |" in section
    assert caps_budgets._cost_markdown(None, "claude_agent_sdk") == []


def test_a_runner_without_a_dollar_budget_of_its_own_refuses_one_in_one_line() -> None:
    adapter = registry.load("handrolled")
    assert adapter.cost_knob is None
    with ScriptedModelServer(NeverStops()) as server, pytest.raises(LooplabError) as refused:
        caps.Prober({"never-stops": server}).run(
            adapter, "never-stops", Probe(knob=adapter.knobs[0], value=3, budget_usd=0.05)
        )
    assert "has no dollar budget of its own" in str(refused.value) and "\n" not in str(refused.value)
    assert caps_budgets.cost_budget(lambda *a, **k: None, adapter) is None


def test_a_dollar_budget_that_moved_is_drift_and_one_a_doc_never_measured_is_not() -> None:
    doc = measurements.CapsDoc.model_validate_json(COMMITTED)
    report = next(r for r in doc.runners if r.cost_budget)
    assert report.cost_budget is not None
    report.cost_budget.rows[0].model_calls += 1
    [change] = caps_drift.drift(doc, COMMITTED).changes
    assert (change.value, change.field) == (f"${report.cost_budget.rows[0].value_usd:g}", "model_calls")
    assert change.knob == f"dollar budget ({report.cost_budget.knob})"
    before = json.loads(COMMITTED)
    for r in before["runners"]:  # as a doc measured before the dollar budget was
        r.pop("cost_budget", None)
    assert not caps_drift.drift(measurements.CapsDoc.model_validate_json(COMMITTED), json.dumps(before)).changes
