"""One budget for the tree: a run's agent hands work to a second one, and the run's limits count both.

Every runner whose framework can delegate (its declaration's `delegation`) runs the `delegation` case with its
own way of delegating; the scripted model plays both agents, telling them apart by what each request asks (a
delegate's task is the parent's question). These pin what holds for all of them: `max_steps=N` is N model calls
summed over both agents, as the endpoint counts them; a token budget spent during the child's work stops the run
before the next request; the record names each call's agent; OpenTelemetry nests the child's spans.
"""

from __future__ import annotations

import pytest

from looplab.adapters import registry
from looplab.adapters.contract.agents import MAIN_AGENT
from looplab.adapters.contract.limits import StopReason
from looplab.records.outcome import RunOutcome
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.scenarios.cases import load_cases
from looplab.scenarios.scripted.requests import RequestLog
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.scenarios.scripted.wire import estimate_tokens
from tests.paths import REPO
from tests.runs import ALL_RUNNERS, RACES, without_races
from tests.tiers import by_tier

CASE = load_cases()["delegation"]
#: The runners here whose framework can delegate.
DELEGATING = [r for r in ALL_RUNNERS if registry.RUNNERS[r.partition("@")[0]].delegation is not None]
#: The investigation with a code reader: the investigator's test run, test read and question, the reader's search,
#: read and answer, the investigator's answer.
AGENTS = [MAIN_AGENT] * 3 + ["code_reader"] * 3 + [MAIN_AGENT]
#: Each delegation case, with the agents of its model calls in order: in `delegation-parallel` the investigator asks
#: two readers in one reply (apply_discount's and subtotal's), whose calls may interleave; in `delegation-nested`
#: the code reader hands its question on to a file reader and answers with its report.
TREES = {
    "delegation": AGENTS,
    "delegation-parallel": [MAIN_AGENT] * 3 + ["code_reader"] * 6 + [MAIN_AGENT],
    "delegation-nested": [MAIN_AGENT] * 3 + ["code_reader"] + ["file_reader"] * 3 + ["code_reader", MAIN_AGENT],
}
#: The case × runner cells to run: each case through every runner here that expresses its shape.
CELLS = [(r, c) for c in TREES for r in DELEGATING if load_cases()[c].runs_on(registry.RUNNERS[r.partition("@")[0]])]


def _run(runner: str, case_id: str = "delegation", **limits: object) -> tuple[RunOutcome, RequestLog]:
    log = RequestLog()
    case = load_cases()[case_id]
    case = case.model_copy(update={"limits": case.limits.model_copy(update=limits)})
    with ScriptedModelServer(wrap=log.wrap) as server:
        outcome = run_one(runner, case, Endpoint(ModelChoice(), server.base_urls))
    assert outcome.result is not None, outcome.error
    return outcome, log


def _in_order(case_id: str, agents: list[str | None]) -> list[str | None]:
    """The agents as compared: children running at once may interleave, so the parallel case's are sorted past the
    investigator's first three calls."""
    return agents if case_id != "delegation-parallel" else agents[:3] + sorted(agents[3:], key=str)


@pytest.mark.parametrize(("runner", "case_id"), by_tier(without_races(CELLS)))
def test_the_record_names_the_agent_of_every_model_call(runner: str, case_id: str) -> None:
    outcome, log = _run(runner, case_id)
    assert outcome.passed, [f"{c.name}: {c.detail}" for c in outcome.checks if not c.passed]
    agents = [s.model_call.agent for s in outcome.result.trace.steps]
    assert _in_order(case_id, agents) == _in_order(case_id, TREES[case_id])
    assert len(log.posts()) == len(TREES[case_id])


@pytest.mark.parametrize("max_steps", [2, 3, 5])
@pytest.mark.parametrize(("runner", "case_id"), by_tier(CELLS))
def test_max_steps_counts_the_model_calls_of_every_agent_of_the_tree(runner: str, case_id: str, max_steps: int) -> None:
    outcome, log = _run(runner, case_id, max_steps=max_steps)
    result = outcome.result
    assert (result.stop_reason, result.answer) == (StopReason.MAX_STEPS, None), result.stop_detail
    assert result.totals.model_calls == max_steps == len(log.posts())  # the endpoint's own count
    agents = [s.model_call.agent for s in result.trace.steps]
    assert _in_order(case_id, agents) == _in_order(case_id, TREES[case_id][:max_steps])


@pytest.mark.parametrize(("runner", "case_id"), by_tier(c for c in CELLS if c in RACES))
def test_where_two_calls_of_one_delegate_race_the_budget_counts_every_call_once(runner: str, case_id: str) -> None:
    """A framework that runs a reply's two calls of one delegate at once on its one agent object (`RACES`: what it
    does with them depends on timing): whichever way it goes, the model asked both at once, every call reached the
    endpoint once and was recorded with its agent, and the run ended with an answer or at the cap."""
    outcome, log = _run(runner, case_id, max_steps=20)
    result = outcome.result
    failed = {c.name for c in outcome.checks if not c.passed}
    assert "a reply asking 2 delegates at once" not in failed and "handed work to code_reader" not in failed, failed
    assert result.stop_reason in (StopReason.FINAL_ANSWER, StopReason.MAX_STEPS), result.stop_detail
    assert result.totals.model_calls == len(log.posts()) <= 20
    assert {s.model_call.agent for s in result.trace.steps} == {MAIN_AGENT, "code_reader"}


@pytest.mark.parametrize("runner", by_tier(DELEGATING))
def test_a_token_budget_spent_during_the_childs_work_stops_the_run_before_the_next_request(runner: str) -> None:
    whole, _ = _run(runner)
    spent = [s.model_call.input_tokens + s.model_call.output_tokens for s in whole.result.trace.steps]
    budget = sum(spent[:5])  # room for the parent's three calls and the child's first two, not its third
    outcome, log = _run(runner, max_tokens=budget)
    result = outcome.result
    assert (result.stop_reason, result.answer) == (StopReason.BUDGET, None), result.stop_detail
    assert "max_tokens" in (result.stop_detail or "") and len(log.posts()) == 5
    at_the_endpoint = sum(estimate_tokens(r.body) for r in log.posts())  # what the scripted model counts as input
    assert at_the_endpoint == result.totals.input_tokens
    assert result.totals.input_tokens + result.totals.output_tokens <= budget


def test_a_runner_that_cannot_delegate_refuses_a_delegate_and_the_matrix_leaves_the_case_out(monkeypatch) -> None:
    import dataclasses

    from looplab.run import matrix

    cannot = "handrolled"  # declared here as a runner without a way to delegate
    monkeypatch.setitem(registry.RUNNERS, cannot, dataclasses.replace(registry.RUNNERS[cannot], delegation=None))
    monkeypatch.setattr(registry.load(cannot), "delegation", None)
    with ScriptedModelServer() as server:
        outcome = run_one(cannot, CASE, Endpoint(ModelChoice(), server.base_urls))
    assert outcome.result is None and f"{cannot} cannot delegate" in (outcome.error or "")
    others = [r for r in DELEGATING if r != cannot][:1]
    assert [(r, c.id) for r, c, _ in matrix.plan([cannot, *others], [CASE])] == [(r, "delegation") for r in others]


def test_opentelemetry_nests_the_delegates_calls_in_an_agent_span_of_its_own() -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")
    from looplab.views import otel

    outcome, _ = _run(DELEGATING[0])
    spans = otel.spans([outcome.result])
    by_id = {s.context.span_id: s for s in spans}
    [root] = [s for s in spans if s.parent is None]
    [child] = [s for s in spans if s.name == "invoke_agent code_reader"]
    assert child.parent.span_id == root.context.span_id and child.attributes["gen_ai.agent.name"] == "code_reader"
    under_child = [s.name for s in spans if s.parent is not None and by_id[s.parent.span_id] is child]
    assert under_child == ["chat scripted", "execute_tool search_code", "chat scripted", "execute_tool read_file",
                           "chat scripted"]  # fmt: skip
    under_root = [s.name for s in spans if s.parent is not None and s.parent.span_id == root.context.span_id]
    assert under_root.count("chat scripted") == 4 and "invoke_agent code_reader" in under_root


def _offered(api: str, description: str, schema: dict) -> dict:
    """A request body in `api`'s wire format offering `run_tests` and a tool `ask` with `description`."""
    plain = {"type": "object", "properties": {"target": {"type": "string"}}}
    if api == "chat":
        tools = [{"type": "function", "function": {"name": n, "description": d, "parameters": p}}
                 for n, d, p in (("run_tests", "Run pytest.", plain), ("ask", description, schema))]  # fmt: skip
        return {"model": "m", "messages": [{"role": "user", "content": "t"}], "tools": tools}
    if api == "responses":
        tools = [{"type": "function", "name": n, "description": d, "parameters": p}
                 for n, d, p in (("run_tests", "Run pytest.", plain), ("ask", description, schema))]  # fmt: skip
        return {"model": "m", "input": "t", "tools": tools}
    if api == "messages":
        tools = [{"name": n, "description": d, "input_schema": p}
                 for n, d, p in (("run_tests", "Run pytest.", plain), ("ask", description, schema))]  # fmt: skip
        return {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "t"}], "tools": tools}
    declarations = [{"name": n, "description": d, "parameters": p}
                    for n, d, p in (("run_tests", "Run pytest.", plain), ("ask", description, schema))]  # fmt: skip
    return {"contents": [{"role": "user", "parts": [{"text": "t"}]}], "tools": [{"functionDeclarations": declarations}]}


@pytest.mark.parametrize("api", ["chat", "responses", "messages", "gemini"])
def test_the_scripted_model_finds_the_delegating_tool_by_its_description_in_every_wire_format(api: str) -> None:
    from looplab.scenarios.cases import CODE_READER_DESCRIPTION
    from looplab.scenarios.scripted import conversation as c

    read = {
        "chat": (c.ChatRequest, c.from_chat),
        "responses": (c.ResponsesRequest, c.from_responses),
        "messages": (c.MessagesRequest, c.from_messages),
        "gemini": (c.GeminiRequest, c.from_gemini),
    }[api]
    schema = {"type": "object", "properties": {"task": {"type": "STRING"}, "extra": {"type": "object"}},
              "required": ["task"]}  # fmt: skip
    conv = read[1](read[0].model_validate(_offered(api, CODE_READER_DESCRIPTION, schema)))
    assert (conv.delegate, conv.delegate_params) == ("ask", ["task"])
    plain = read[1](read[0].model_validate(_offered(api, "Answers questions.", schema)))
    assert plain.delegate is None  # a tool that says nothing of finding definitions is not one


def test_the_scripted_model_finds_the_delegating_tool_in_dspys_field_protocol_too() -> None:
    from looplab.scenarios.cases import CODE_READER_DESCRIPTION
    from looplab.scenarios.scripted import fields

    listed = (
        "(1) read_file, whose description is <desc>Return a file.</desc>. It takes arguments {'path': {'type': "
        f"'string'}}}}.\n        (2) ask, whose description is <desc>{CODE_READER_DESCRIPTION}</desc>. It takes "
        "arguments {'question': {'type': 'string'}}.\n        (3) finish, whose description is <desc>Done.</desc>. "
        "It takes arguments {}."
    )
    system = (
        "Your input fields are:\n1. `task` (str): \n2. `trajectory` (str):\nYour output fields are:\n"
        "1. `next_thought` (str): \n2. `next_tool_name` (Literal['read_file', 'ask', 'finish']): \n"
        "3. `next_tool_args` (dict[str, Any]):\nAll interactions will be structured in the following way.\n" + listed
    )
    user = "[[ ## task ## ]]\nThe test t.py::test_x fails.\n\n[[ ## trajectory ## ]]\n"
    request = fields.read([("system", system), ("user", user)], "m")
    assert request is not None
    conv = request.conversation()
    assert (conv.delegate, conv.delegate_params) == ("ask", ["question"])


def test_the_runners_page_lists_exactly_the_runners_that_declare_a_delegation() -> None:
    import re

    page = (REPO / "docs" / "runners.md").read_text(encoding="utf-8")
    section = page.split("## Delegation", 1)[1].split("\nEvery runner installs", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", section, re.M)
    assert listed and set(listed) == {n for n, info in registry.RUNNERS.items() if info.delegation is not None}


def test_the_scripted_model_finds_an_agent_starting_tool_by_the_agents_its_context_lists() -> None:
    """A client that lists its agents in context blocks around the task (Claude Code's `<system-reminder>`) and
    offers one tool that starts an agent by type: the task is the text outside those blocks, the tool is the
    delegating one, and the parameter that picks the type gets the listed agent's name."""
    from looplab.scenarios.cases import CODE_READER_DESCRIPTION
    from looplab.scenarios.scripted import conversation as c

    reminder = (
        "<system-reminder>\nAgents you can start:\n- general: Does anything.\n"
        f"- code_reader: {CODE_READER_DESCRIPTION}\n</system-reminder>"
    )
    schema = {
        "type": "object",
        "properties": {
            "description": {"type": "string", "description": "A short description of the task"},
            "prompt": {"type": "string", "description": "The task for the agent to perform"},
            "subagent_type": {"type": "string", "description": "The type of specialized agent to use for this task"},
        },
        "required": ["description", "prompt"],
    }
    content = [{"type": "text", "text": reminder}, {"type": "text", "text": "The test t.py::test_x fails."}]
    request = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": content}],
        "tools": [
            {"name": "Agent", "description": "Launch an agent; they are listed in context.", "input_schema": schema}
        ],
    }
    conv = c.from_messages(c.MessagesRequest.model_validate(request))
    assert conv.task == "The test t.py::test_x fails." and conv.delegate == "Agent"
    assert conv.delegate_args("q?") == {"description": "q?", "prompt": "q?", "subagent_type": "code_reader"}
    unlisted = {**request, "messages": [{"role": "user", "content": content[1:]}]}
    assert c.from_messages(c.MessagesRequest.model_validate(unlisted)).delegate is None  # nothing listed: no delegate


def test_a_report_handed_back_framed_and_indented_reads_as_the_delegate_wrote_it() -> None:
    from looplab.scenarios.scripted.policy import Evidence

    source = "def apply_discount(total):\n    return total\n"
    report = f"`apply_discount` is defined in billing/discount.py:\n```python\n{source}\n```"
    framed = "[Subagent hand-back]\n" + "\n".join(f"  {line}" if line else line for line in report.split("\n"))
    for answer in (report, framed):
        ev = Evidence()
        ev._reported("Find where `apply_discount` is defined and read it.", answer)
        assert ev.files == {"billing/discount.py": source}


def test_a_shape_a_runner_declares_it_cannot_express_is_left_out_and_the_scorecard_says_why(monkeypatch) -> None:
    import dataclasses

    from looplab.run import matrix
    from looplab.views import scorecard

    runner, why = "handrolled", "its loop answers one delegate a reply"  # declared here as a gap
    declared = dataclasses.replace(registry.RUNNERS[runner], delegation_gaps={"parallel": why})
    monkeypatch.setitem(registry.RUNNERS, runner, declared)
    cases = [load_cases()[c] for c in TREES]
    assert [c.id for _, c, _ in matrix.plan([runner], cases)] == ["delegation", "delegation-nested"]
    [card] = scorecard.build([runner]).cards
    cell = card.cells["delegation_parallel"]
    assert (
        cell.text == "no parallel delegation" and cell.evidence == f"runner declaration: no parallel delegation: {why}"
    )
    assert card.cells["delegation_nested"].text != card.cells["delegation_parallel"].text  # the other shape runs


def test_a_runner_refuses_a_nested_delegate_where_it_declares_it_cannot_nest(monkeypatch) -> None:
    runner = "handrolled"
    monkeypatch.setattr(registry.load(runner), "delegation_gaps", {"nested": "one level only"})
    with ScriptedModelServer() as server:
        outcome = run_one(runner, load_cases()["delegation-nested"], Endpoint(ModelChoice(), server.base_urls))
    assert outcome.result is None and "cannot nest delegates here: one level only" in (outcome.error or "")


def test_the_parallel_case_says_whether_the_delegates_ran_side_by_side() -> None:
    from looplab.views import scorecard

    outcome, _ = _run(DELEGATING[0], "delegation-parallel")
    cell = scorecard._delegation(DELEGATING[0], outcome, "parallel")
    assert cell.text.startswith("passed: 6 of 10 calls the delegates', ")
    assert cell.text.endswith(("side by side", "one after the other"))


def test_every_declared_gap_names_a_delegation_shape_and_says_why_in_one_line() -> None:
    from looplab.adapters.contract.agents import SHAPES

    gaps = {(n, shape): why for n, info in registry.RUNNERS.items() for shape, why in info.delegation_gaps.items()}
    assert gaps  # some framework cannot express some shape: the declarations say which
    for (runner, shape), why in gaps.items():
        assert shape in SHAPES and why.strip() and "\n" not in why, (runner, shape)
