"""The same in-process runner with its tools called in-process and over MCP: the same run.

`Runner.run(..., tools="mcp")` serves the run's Guard on loopback and hands the adapter an MCP
client of it in place of the Guard; the records are still the Guard's. What crosses MCP is only
what the runner reads back, so if any of it were lost or changed (a result's text, an error flag,
a call id), the model's next step, and so the trajectory, would differ.
"""

from __future__ import annotations

import re

import pytest

from looplab.adapters import registry
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.scenarios.cases import load_cases
from looplab.scenarios.scripted.server import ScriptedModelServer
from tests.runs import RACES, tool_steps
from tests.tiers import FAST_TIER_RUNNER, by_tier

IN_PROCESS = [
    name for name, info in registry.RUNNERS.items() if info.installed() and not info.commands and info.by_default
]
#: Every case but the one whose model sends arguments that are not a JSON object (`42`, a quoted string): MCP
#: carries only objects, so those calls cannot cross it (test below).
CASES = sorted(set(load_cases()) - {"sloppy-calls"})
#: The cells the fast tier keeps (the hand-rolled runner on two cases); every other cell runs with `pytest --full`.
FAST_CASES = ("vip-compound", "path-escape")
CELLS = [
    pytest.param(
        runner,
        case,
        id=f"{runner}-{case}",
        marks=[] if runner == FAST_TIER_RUNNER and case in FAST_CASES else [pytest.mark.full],
    )
    for case in CASES
    for runner in IN_PROCESS
    if load_cases()[case].runs_on(registry.RUNNERS[runner])  # a delegation case: the runners that delegate
    and (runner, case) not in RACES  # thread timing decides how it goes: nothing to compare two runs by
]


def _records(result, *, numbered_ids: bool = True) -> list[list[tuple]]:  # type: ignore[no-untyped-def]
    """Each step's tool calls as compared; `numbered_ids=False` masks the ids the tool server numbers by arrival
    (`mcp-1`, `mcp-2`, ...): where children run side by side, which call arrives first is thread timing."""

    def call_id(given: str | None) -> str:
        return given or "" if numbered_ids else re.sub(r"^mcp-\d+$", "mcp-<n>", given or "")

    return tool_steps(
        result,
        lambda c: (c.name, repr(c.args), c.outcome, c.is_error, call_id(c.call_id), _timeless(c.result_preview)),
    )


def _timeless(text: str) -> str:
    """A result with its seconds masked: a killed test says how long it had left, which differs run to run."""
    return re.sub(r"\d+(\.\d+)?s\b", "<t>s", text)


@pytest.fixture(scope="module")
def where():  # type: ignore[no-untyped-def]
    with ScriptedModelServer() as server:
        yield server


@pytest.mark.parametrize(("runner", "case"), CELLS)
def test_the_same_runner_leaves_the_same_run_with_tools_over_mcp(where, runner: str, case: str) -> None:
    endpoint = Endpoint(ModelChoice(), {"openai": where.openai_base_url, "anthropic": where.anthropic_base_url})
    inside = run_one(runner, load_cases()[case], endpoint)
    over_mcp = run_one(runner, load_cases()[case], endpoint, tools="mcp")
    assert inside.result is not None and over_mcp.result is not None, (inside.error, over_mcp.error)
    a, b = inside.result, over_mcp.result
    assert (a.tool_transport, b.tool_transport) == ("in-process", "mcp")
    if load_cases()[case].delegation_shape == "parallel":  # children side by side: the calls, in any order
        calls_over_mcp, calls_inside = (sorted(map(str, sum(_records(r, numbered_ids=False), []))) for r in (b, a))
        assert calls_over_mcp == calls_inside and a.trace.tool_calls
    else:
        assert _records(b) == _records(a) and a.trace.tool_calls  # step by step: the trajectory, in detail
    assert (b.stop_reason, b.answer, b.totals.model_calls) == (a.stop_reason, a.answer, a.totals.model_calls)
    assert [(c.name, c.passed) for c in over_mcp.checks] == [(c.name, c.passed) for c in inside.checks]


@pytest.mark.parametrize("runner", by_tier(IN_PROCESS))
def test_arguments_that_are_not_an_object_never_reach_the_tools_over_mcp(where, runner: str) -> None:
    """Where the runner hands the Guard what the model sent (`42`, a quoted string), those calls stop at the
    MCP client; where the framework parsed them into objects already, nothing changes."""
    endpoint = Endpoint(ModelChoice(), {"openai": where.openai_base_url, "anthropic": where.anthropic_base_url})
    inside = run_one(runner, load_cases()["sloppy-calls"], endpoint).result
    over_mcp = run_one(runner, load_cases()["sloppy-calls"], endpoint, tools="mcp").result
    assert inside is not None and over_mcp is not None
    assert all(isinstance(c.args, dict) for c in over_mcp.trace.tool_calls)
    if all(isinstance(c.args, dict) for c in inside.trace.tool_calls):
        assert _records(over_mcp) == _records(inside)
    else:
        assert len(over_mcp.trace.tool_calls) < len(inside.trace.tool_calls)
