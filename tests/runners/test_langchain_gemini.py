"""LangChain and LangGraph on Gemini's API: `ChatGoogleGenerativeAI` on the session's recorded google-genai client.

Every case, cap and wire API runs in tests/testing/test_conformance.py, tests/scenarios/test_cases.py and
tests/runners/test_gemini_runners.py.
"""

from __future__ import annotations

import sys

import pytest

from looplab.adapters.contract.errors import MissingExtra
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.scenarios.scripted.faults import HttpFaults
from looplab.scenarios.scripted.server import ScriptedModelServer
from tests.runs import run_runner

RUNNERS = ["langchain", "langgraph"]


@pytest.mark.parametrize("runner", RUNNERS)
def test_gemini_without_langchain_google_genai_names_the_extra_in_one_line(
    runner: str, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "langchain_google_genai", None)  # as if the extra's package were missing
    with pytest.raises(MissingExtra) as info:
        run_runner(runner, model_server, api="gemini")
    assert str(info.value) == f"runner {runner!r} needs 'google.genai': pip install 'looplab[{runner}]'"


@pytest.mark.parametrize("runner", RUNNERS)
def test_the_runs_retries_not_the_chat_models_are_the_gemini_attempts(runner: str) -> None:
    """ChatGoogleGenerativeAI sends its own retry policy with every request (6 attempts unless told): the run's
    `retries=1` must still mean two attempts."""
    faults: list[HttpFaults] = []

    def wrap(app):  # noqa: ANN001, ANN202 - an ASGI app in, one out
        faults.append(HttpFaults(app, [], then=500))
        return faults[0]

    with ScriptedModelServer(wrap=wrap) as server:
        result = run_runner(runner, server, Limits(max_seconds=30), api="gemini", retries=1)
    assert result.stop_reason == StopReason.ERROR and faults[0].served == [500, 500]
    assert [a.status for a in result.trace.unanswered] == [500, 500]


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_gemini_run_is_recorded_as_generate_content_calls(runner: str, model_server: ScriptedModelServer) -> None:
    result = run_runner(runner, model_server, Limits(max_steps=2), api="gemini")
    assert (result.stop_reason, result.totals.model_calls) == (StopReason.MAX_STEPS, 2)
    assert [s.model_call.endpoint for s in result.trace.steps] == ["generateContent"] * 2
