"""The `agno` runner: what Agno's own knob counts, and how the hook `max_steps` maps to ends Agno's loop.

Measured against the installed Agno with the scripted model that asks for a tool on every call (`NeverStops`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("agno", reason="the agno extra is not installed")

import openai  # noqa: E402
from agno.exceptions import StopAgentRun  # noqa: E402
from agno.models.openai import OpenAIChat  # noqa: E402
from agno.run.base import RunStatus  # noqa: E402

from looplab.adapters import registry  # noqa: E402
from looplab.adapters.boundary.plain import plain_http_client  # noqa: E402
from looplab.adapters.contract.bare import BareTool  # noqa: E402
from looplab.adapters.contract.limits import StopReason  # noqa: E402
from looplab.adapters.contract.runner import Probe  # noqa: E402
from looplab.adapters.runners._agno import agno_tool, run_agent  # noqa: E402
from looplab.adapters.runners.agno import HOOK, TOOL_CALL_LIMIT  # noqa: E402
from looplab.measure.caps import Prober  # noqa: E402
from looplab.scenarios.scripted.faults import HttpFaults  # noqa: E402
from looplab.scenarios.scripted.probes import AnswersOnCall, NeverStops  # noqa: E402
from looplab.scenarios.scripted.server import ScriptedModelServer  # noqa: E402

RUNNER = registry.load("agno")
SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}


def counted_client(server: ScriptedModelServer, replies: list[int]) -> openai.OpenAI:
    """A plain sync `openai` client on `server` that appends to `replies` for every response it receives."""
    http = plain_http_client(openai, server.openai_base_url)
    http.event_hooks["response"].append(lambda _: replies.append(1))
    return openai.OpenAI(api_key="not-needed", base_url=server.openai_base_url, http_client=http)


@pytest.fixture(scope="module")
def never_stops() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(NeverStops()) as server:
        yield server


@pytest.fixture(scope="module")
def prober(never_stops: ScriptedModelServer) -> Prober:
    return Prober({"never-stops": never_stops})


def test_both_knobs_are_unset_by_default() -> None:
    defaults = RUNNER.knob_defaults()
    assert [defaults[k].value for k in (HOOK, TOOL_CALL_LIMIT)] == [None, None]
    assert defaults[TOOL_CALL_LIMIT].source == "agno.agent.agent.Agent(tool_call_limit=None) signature"


def test_tool_call_limit_counts_tools_and_leaves_the_loop_running(prober: Prober) -> None:
    # tool_call_limit=2 and max_steps=5: two tools run; Agno answers the next ones itself and keeps asking the model,
    # until the model boundary refuses call 6.
    result = prober.run(RUNNER, "never-stops", Probe(knob=TOOL_CALL_LIMIT, value=2), max_steps=5)
    assert result.stop_reason is StopReason.MAX_STEPS
    assert result.totals.model_calls == 5
    assert [len(s.tool_calls) for s in result.trace.steps] == [1, 1, 0, 0, 0]
    assert all(s.model_call.tool_calls_requested == ["search_code"] for s in result.trace.steps)
    assert result.native_end is not None and result.native_end.kind == "refused by the model boundary"


def test_past_the_limit_agno_answers_each_tool_call_itself_and_asks_the_model_again() -> None:
    ran: list[str] = []
    tool = agno_tool("search_code", "search", SCHEMA, lambda fc, query: ran.append(query) or "no hits")
    with ScriptedModelServer(AnswersOnCall(5)) as server, counted_client(server, []) as client:
        output = run_agent(OpenAIChat(id="scripted", client=client), [tool], "sys", "task", tool_call_limit=1)
    assert (output.status, output.content) == (RunStatus.completed, "answered on model call 5")
    assert ran == ["probe_1"]
    answers = [m.content for m in output.messages if m.role == "tool"]
    refused = "Tool call limit reached. Tool call search_code not executed. Don't try to execute it again."
    assert answers == ["no hits", refused, refused, refused]


@pytest.mark.parametrize("cap", [1, 3])
def test_the_hook_alone_ends_agnos_run_in_the_tools_of_call_n(prober: Prober, cap: int) -> None:
    # The model boundary's stop far above the hook's value: the hook ends the loop, and Agent.run returns normally.
    result = prober.run(RUNNER, "never-stops", Probe(knob=HOOK, value=cap), max_steps=cap + 5)
    assert result.totals.model_calls == cap
    assert [len(s.tool_calls) for s in result.trace.steps] == [1] * (cap - 1) + [0]
    assert result.native_end is not None and (result.native_end.kind, result.native_end.text) == ("returned", "")


def test_max_steps_maps_to_the_hook_and_the_run_ends_max_steps(prober: Prober) -> None:
    result = prober.run(RUNNER, "never-stops", None, max_steps=2)
    assert (result.native_cap.knob, result.native_cap.value) == (HOOK, 2)
    assert (result.stop_reason, result.totals.model_calls) == (StopReason.MAX_STEPS, 2)
    assert result.native_end is not None and result.native_end.kind == "returned"


def test_the_partial_history_is_in_the_run_output(never_stops: ScriptedModelServer) -> None:
    replies: list[int] = []
    tool = agno_tool("search_code", "search", SCHEMA, lambda fc, query: f"hits for {query} ({fc.call_id})")
    with counted_client(never_stops, replies) as client:

        def stop_at_two(function_name: str, function_call: Any, arguments: dict[str, Any]) -> Any:
            if len(replies) >= 2:
                raise StopAgentRun("(stopped)")
            return function_call(**arguments)

        output = run_agent(OpenAIChat(id="scripted", client=client), [tool], "sys", "task", tool_hooks=[stop_at_two])
    assert (output.status, output.content) == (RunStatus.completed, "")
    shape = [(m.role, bool(m.tool_calls)) for m in output.messages]
    assert shape == [("system", False), ("user", False)] + [("assistant", True), ("tool", False)] * 2
    tools = [(m.content, m.tool_call_error) for m in output.messages if m.role == "tool"]
    assert tools == [("hits for probe_1 (call_1_0)", False), ("(stopped)", True)]


def test_a_run_agno_returns_as_failed_ends_error(capfd: pytest.CaptureFixture[str]) -> None:
    # A 400 is not retried; Agno catches the SDK's error and returns a run whose status is `error`.
    with ScriptedModelServer(NeverStops(), wrap=lambda app: HttpFaults(app, [400])) as server:
        prober = Prober({"never-stops": server})
        result = prober.run(RUNNER, "never-stops", None, max_steps=3)
    assert "injected fault" not in "".join(capfd.readouterr())
    assert result.stop_reason is StopReason.ERROR
    assert result.totals.model_calls == 0 and result.totals.failed_model_calls == 1
    assert result.native_end is not None and result.native_end.exception is not None
    assert result.native_end.exception.endswith("AgnoRunFailed")
    assert (result.native_end.message or "").startswith("RunOutput.status=ERROR: ")
    # Agno's own log of it is kept with the run, not printed.
    assert "agno: Error in Agent run: injected fault: HTTP 400" in result.warnings


def test_the_bare_loop_makes_exactly_max_steps_calls(never_stops: ScriptedModelServer) -> None:
    ran: list[str] = []
    tools = [BareTool("search_code", "search", SCHEMA, lambda query: ran.append(query) or "no hits")]
    urls = {"openai": never_stops.openai_base_url}
    assert RUNNER.bare_loop()("task", tools, urls, "scripted", 3, system_prompt="sys") == 3
    assert ran == ["probe_1", "probe_2"]
