"""A tool call LangChain could not parse ends LangChain's and LangGraph's runs; the record names the call and why.

The sloppy model's first call has arguments that are not JSON. LangChain keeps such a call apart
(`AIMessage.invalid_tool_calls`, with the parse error) and both runners' graphs end on a reply that holds only
such calls, before the Guard sees it: the run's record must say which call it was and the framework's reason.
"""

from __future__ import annotations

import pytest

from looplab.adapters import registry
from looplab.adapters.contract.limits import StopReason
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.scenarios.cases import load_cases
from looplab.scenarios.scripted.server import ScriptedModelServer

#: The sloppy model's first call: `run_tests` with its one argument's value left unquoted.
MALFORMED_ARGS = '{"target": tests/test_invoice.py::test_invoice_total}'
#: The JSON parser's complaint, which LangChain keeps as the call's error on every OpenAI wire API.
PARSE_ERROR = "Expecting value: line 1 column 12 (char 11)"

RUNS = [
    pytest.param(runner, api, marks=[pytest.mark.full] if api != "chat" else [])
    for runner in ("langchain", "langgraph")
    for api in ("chat", "responses")
]


@pytest.mark.parametrize(("runner", "api"), RUNS)
def test_the_record_names_the_malformed_call_and_the_frameworks_reason(runner: str, api: str) -> None:
    if not registry.RUNNERS[runner].installed():
        pytest.skip(f"{runner} is not installed here")
    with ScriptedModelServer() as server:
        urls = {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url}
        outcome = run_one(runner, load_cases()["sloppy-calls"], Endpoint(ModelChoice(api=api), urls))
    result = outcome.result
    assert result is not None, outcome.error
    assert result.stop_reason is StopReason.ERROR
    assert [s.model_call.tool_calls_requested for s in result.trace.steps] == [["run_tests"]]
    assert result.trace.tool_calls == []  # the Guard never saw it
    detail = result.stop_detail or ""
    assert "AIMessage.invalid_tool_calls" in detail
    assert f"run_tests({MALFORMED_ARGS})" in detail
    assert PARSE_ERROR in detail
    assert result.native_end is not None and result.native_end.kind == "returned"
    assert result.native_end.message == detail
