"""Streamed replies or whole ones (`--stream on|off`): the same run either way.

A runner declares the modes its loop can run (`streams`, its default first). Every runner that can do both runs
every case both ways against the scripted model, and both give the same model calls, tool calls, stop and answer,
and the same token counts where the wire format sends usage in the stream (where it does not, the recorder
estimates them and says so). The choice is part of a cell's identity when made, so an eval of each merges into one
document; a runner that cannot run the mode asked for is skipped with one line.
"""

from __future__ import annotations

import dataclasses

import pytest

from looplab.adapters import registry
from looplab.adapters.boundary.budget import forecast_input_tokens
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.contract.runner import RunnerDeclaration
from looplab.cli import main
from looplab.records import results
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.scenarios.cases import load_cases
from looplab.scenarios.scripted.server import ScriptedModelServer
from tests.paths import REPO
from tests.runs import ALL_RUNNERS, RACES, tool_steps
from tests.tiers import by_tier

#: The runners here whose loop can run both ways.
BOTH_WAYS = [r for r in ALL_RUNNERS if set(registry.RUNNERS[r.partition("@")[0]].streams) == {True, False}]
CASES = load_cases()


#: Where a framework's stream behaves otherwise, and how (each asserted as it stands, so a change shows): the
#: Anthropic SDK's stream helper parses a tool call's arguments as they arrive and raises on ones that are not JSON
#: (the sloppy persona's first call), where a whole reply hands them to the loop as text the Guard reports.
DIFFERS_STREAMED = {
    ("handrolled", "sloppy-calls"): "ValueError: Unable to parse tool parameter JSON from model",
    ("dspy", "sloppy-calls"): "Failed to parse field next_tool_name with value run_shell",  # no JSONAdapter retry
    ("anthropic_tool_runner", "sloppy-calls"): "ValueError: Unable to parse tool parameter JSON from model",
}


#: Frameworks that run a delegate's replies one way whatever the run's mode: ADK's `AgentTool` whole
#: (google/adk/tools/agent_tool.py), Microsoft Agent Framework's `Agent.as_tool` streamed (agent_framework/_agents.py).
DELEGATE_STREAMS = {"google_adk": False, "ms_agent_framework": True}


def _shape(outcome, at_once: bool) -> tuple:  # noqa: ANN001 - a RunOutcome
    """How a run went; `at_once`: its children ran side by side, so their steps are compared in any order."""
    result = outcome.result
    assert result is not None, outcome.error
    steps = [(s.model_call.tool_calls_requested, s.model_call.agent) for s in result.trace.steps]
    return (
        result.stop_reason,
        result.answer,
        result.totals.model_calls,
        # Which step a child's tool call is recorded under depends on its sibling's timing: the calls, in any order.
        sorted(str(call) for step in tool_steps(result) for call in step) if at_once else tool_steps(result),
        sorted(map(str, steps)) if at_once else steps,
    )


def _tokens(outcome) -> list[tuple[int, int] | None]:  # noqa: ANN001 - a RunOutcome
    """Each call's usage as the endpoint reported it, None where the recorder had to estimate it."""
    calls = [s.model_call for s in outcome.result.trace.steps]
    return [None if c.usage_estimated else (c.input_tokens, c.output_tokens) for c in calls]


@pytest.mark.full  # every case both ways through every runner that can run both
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("runner", by_tier(BOTH_WAYS))
def test_a_streamed_run_makes_the_same_calls_stop_and_answer_as_a_whole_one(runner: str, case: str) -> None:
    if not CASES[case].runs_on(registry.RUNNERS[runner.partition("@")[0]]):
        pytest.skip(f"{case} does not apply to {runner}")
    if (runner, case) in RACES:
        pytest.skip(RACES[(runner, case)])
    at_once = CASES[case].delegation_shape == "parallel"
    with ScriptedModelServer() as server:
        ways = {
            stream: run_one(runner, CASES[case], Endpoint(ModelChoice(stream=stream), server.base_urls))
            for stream in (True, False)
        }
    if (known := DIFFERS_STREAMED.get((runner.partition("@")[0], case))) is not None:
        streamed = ways[True].result
        assert streamed.stop_reason == "error" and known in (streamed.stop_detail or ""), streamed.stop_detail
        assert ways[False].passed, ways[False].checks
        return
    assert _shape(ways[True], at_once) == _shape(ways[False], at_once)
    delegates = set(CASES[case].delegate.names) if CASES[case].delegate else set()
    for stream, outcome in ways.items():
        fixed = DELEGATE_STREAMS.get(runner.partition("@")[0], stream)
        steps = outcome.result.trace.steps
        expected = [fixed if s.model_call.agent in delegates else stream for s in steps]
        assert [s.model_call.streamed for s in outcome.result.trace.steps] == expected, stream
    # Usage read from the stream where it sends one: the endpoint's own count of each request (a streamed request is
    # a few bytes longer: it asks for the stream), and the same replies' output either way.
    for outcome in ways.values():
        calls = [s.model_call for s in outcome.result.trace.steps if not s.model_call.usage_estimated]
        assert [c.input_tokens for c in calls] == [forecast_input_tokens(c.request_bytes) for c in calls]
    if at_once:  # children side by side: the same replies' output, in whatever order they came
        assert sorted(u[1] for u in _tokens(ways[True]) if u) == sorted(u[1] for u in _tokens(ways[False]) if u)
        return
    both = [(a, b) for a, b in zip(_tokens(ways[True]), _tokens(ways[False]), strict=True) if a and b]
    assert [a[1] for a in both] == [b[1] for b in both]


def test_a_runner_refuses_a_mode_its_loop_cannot_run_in_one_line() -> None:
    whole_only = dataclasses.replace(registry.RUNNERS["handrolled"], streams=(False,))
    with pytest.raises(LooplabError, match=r"cannot run with --stream on: its loop takes every reply whole$"):
        RunnerDeclaration.stream_for(whole_only, ModelSpec("anthropic", "m", stream=True))  # type: ignore[arg-type]
    assert RunnerDeclaration.stream_for(whole_only, ModelSpec("anthropic", "m")) is False  # unasked: its own
    streamed_only = dataclasses.replace(whole_only, streams=(True,))
    with pytest.raises(LooplabError, match=r"--stream off: its loop streams every reply$"):
        RunnerDeclaration.stream_for(streamed_only, ModelSpec("anthropic", "m", stream=False))  # type: ignore[arg-type]


def test_the_stream_asked_for_is_kept_in_each_cell_and_evals_of_each_merge(tmp_path, capsys) -> None:  # noqa: ANN001
    runner = next(iter(BOTH_WAYS), None)
    if runner is None:
        pytest.skip("no runner here runs both ways")
    paths = {}
    for mode in ("on", "off"):
        paths[mode] = tmp_path / f"{mode}.json"
        argv = ["eval", "--runner", runner, "--case", "vip-compound", "--stream", mode, "--json", str(paths[mode])]
        assert main([*argv, "--jobs", "1"]) == 0, capsys.readouterr().out
    merged = tmp_path / "both.json"
    assert main(["merge", str(paths["on"]), str(paths["off"]), "--output", str(merged)]) == 0
    doc = results.read(merged)
    assert sorted(c.stream for c in doc.cells) == [False, True] and all(c.passed for c in doc.cells)
    streamed = {c.stream: doc.result_of(c) for c in doc.cells}
    assert all(s.model_call.streamed for s in streamed[True].trace.steps)
    assert not any(s.model_call.streamed for s in streamed[False].trace.steps)


def test_a_runner_that_cannot_run_the_mode_is_skipped_with_one_line(tmp_path, capsys) -> None:  # noqa: ANN001
    one_way = [r for r in ALL_RUNNERS if len(registry.RUNNERS[r].streams) == 1]
    if not one_way or not BOTH_WAYS:
        pytest.skip("needs a runner of each kind here")
    mode = "off" if registry.RUNNERS[one_way[0]].streams == (True,) else "on"
    argv = ["run", "--runner", one_way[0], "--runner", BOTH_WAYS[0], "--case", "vip-compound", "--stream", mode]
    assert main([*argv, "--quiet", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"skipping {one_way[0]}: it cannot run with --stream {mode}" in out


def test_the_runners_page_says_how_each_runner_streams_as_its_declaration_does() -> None:
    import re

    page = (REPO / "docs" / "runners.md").read_text()
    section = page.split("## Streamed or whole replies", 1)[1].split("\n## ", 1)[0]
    rows = {
        name: (default, other)
        for name, default, other in re.findall(r"^\| `(\w+)` \| (\w+) \| (.+?) \|", section, re.M)
    }
    expected = {
        name: (
            "streamed" if info.streams[0] else "whole",
            f"`--stream {'off' if info.streams[0] else 'on'}`" if len(info.streams) > 1 else "no",
        )
        for name, info in registry.RUNNERS.items()
    }
    assert rows == expected
