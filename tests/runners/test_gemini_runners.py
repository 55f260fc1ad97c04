"""Runners on Gemini's API: each on its framework's own Gemini model class, on a google-genai client the session builds
over the recorder. (The contract checks run on every declared API in tests/testing/test_conformance.py.)"""

from __future__ import annotations

import sys

import pytest

from looplab.adapters import registry
from looplab.adapters.contract.errors import LooplabError, MissingExtra
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.runners.google_adk import GoogleAdk
from looplab.measure.caps import Prober
from looplab.run import harness
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.scenarios.cases import load_cases
from looplab.scenarios.scripted.conversation import GeminiRequest, from_gemini
from looplab.scenarios.scripted.faults import BROKEN
from looplab.scenarios.scripted.probes import NeverStops
from looplab.scenarios.scripted.server import ScriptedModelServer
from tests.runs import ALL_RUNNERS, GEMINI_RETRIES_A_BROKEN_REPLY, cells, run_behind_faults, run_runner, without_races
from tests.tiers import by_tier

GEMINI_RUNNERS = [r for r in ALL_RUNNERS if "gemini" in registry.RUNNERS[r].apis]
CASES = load_cases()


def test_the_runners_whose_framework_has_a_gemini_model_class_speak_gemini() -> None:
    # The others are written on one provider's SDK (the loops by hand, the Anthropic tool runners, the Claude Code
    # CLI, the OpenAI Agents SDK for TypeScript, whose own model classes speak OpenAI's APIs only) or are a team's
    # program, which reads the Gemini URL it is given but is not looplab's to declare.
    silent = {r for r, info in registry.RUNNERS.items() if "gemini" not in info.apis}
    assert silent == {
        "handrolled",
        "anthropic_tool_runner",
        "claude_agent_sdk",
        "ts_anthropic_tool_runner",
        "ts_openai_agents",
        "external",
    }


def test_a_scripted_run_on_gemini_gets_the_servers_gemini_url() -> None:
    adapter = registry.load("google_adk")
    with harness.endpoint(ModelChoice(api="gemini")) as where:
        spec = where.spec_for(adapter)
        assert where.scripted_urls is not None
        assert (spec.provider, spec.api, spec.base_url) == ("google", "gemini", where.scripted_urls["google"])
    assert adapter.api_for(spec) == "gemini"


def test_google_adk_speaks_chat_by_default_and_gemini_to_a_google_model() -> None:
    adk = registry.load("google_adk")
    assert adk.apis[0] == "chat"  # the scripted model's default, the API its bare loop speaks
    assert adk.api_for(ModelSpec("google", "gemini-2.5-flash")) == "gemini"
    assert adk.api_for(ModelSpec("openai", "gpt-4.1")) == "chat"


def test_a_model_of_a_provider_a_runner_does_not_speak_is_refused_with_the_providers_it_does() -> None:
    with pytest.raises(LooplabError) as one:
        registry.load("anthropic_tool_runner").api_for(ModelSpec("google", "gemini-2.5-flash"))
    assert str(one.value) == (
        "runner 'anthropic_tool_runner' speaks only anthropic messages API: use an anthropic: model with it, "
        "not a google one"
    )
    with pytest.raises(LooplabError) as two:
        registry.load("handrolled").api_for(ModelSpec("google", "gemini-2.5-flash"))
    assert str(two.value) == (
        "runner 'handrolled' speaks only anthropic and openai messages, chat APIs: "
        "use an anthropic: model or an openai: model with it, not a google one"
    )


@pytest.mark.parametrize(
    ("runner", "module", "extra"),
    [
        ("pydantic_ai", "pydantic_ai.models.google", "pydantic-ai"),
        ("strands", "strands.models.gemini", "strands"),
        ("agno", "agno.models.google", "agno"),
    ],
)
def test_gemini_without_google_genai_names_the_extra_in_one_line(
    runner: str, module: str, extra: str, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # as if google-genai, which the module imports, were missing
    with pytest.raises(MissingExtra) as info:
        run_runner(runner, model_server, api="gemini")
    assert str(info.value) == f"runner {runner!r} needs 'google.genai': pip install 'looplab[{extra}]'"


@pytest.mark.parametrize(
    ("response", "text"),
    [
        ({"return_value": "exit code 1"}, "exit code 1"),  # Pydantic AI's GoogleModel
        ({"output": [{"text": "exit "}, {"text": "code 1"}]}, "exit code 1"),  # Strands' GeminiModel
        ({"output": "exit code 1"}, "exit code 1"),  # google-genai's own wrapping
        ({"result": "exit code 1"}, "exit code 1"),  # ADK's
        ({"output": [{"inline_data": {}}]}, '{"output": [{"inline_data": {}}]}'),  # not text: read as JSON
    ],
)
def test_the_scripted_model_reads_each_frameworks_function_response(response: dict, text: str) -> None:
    request = GeminiRequest.model_validate(
        {
            "contents": [
                {"role": "user", "parts": [{"text": "task"}]},
                {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "run_tests", "args": {}}}]},
                {
                    "role": "user",
                    "parts": [{"functionResponse": {"id": "c1", "name": "run_tests", "response": response}}],
                },
            ]
        }
    )
    [result] = from_gemini(request).results
    assert (result.call.name, result.content) == ("run_tests", text)


@pytest.mark.parametrize("runner", by_tier(r for r in GEMINI_RUNNERS if r not in GEMINI_RETRIES_A_BROKEN_REPLY))
def test_a_reply_that_breaks_off_ends_a_gemini_run_as_error_with_the_attempt(runner: str) -> None:
    """google-genai retries timeouts and connections that fail, not a reply whose body breaks off (streamed or not):
    the run ends `error`, the broken attempt on the record."""
    result, _ = run_behind_faults(runner, [BROKEN], api="gemini")
    assert (result.stop_reason, result.answer, result.totals.model_calls) == (StopReason.ERROR, None, 0)
    [attempt] = result.trace.unanswered
    assert attempt.error.startswith("the reply broke off after 11 bytes")


@pytest.mark.parametrize("runner", by_tier(GEMINI_RUNNERS))
def test_retries_zero_is_one_attempt_on_gemini(runner: str) -> None:
    result, faults = run_behind_faults(runner, [], then=500, api="gemini", retries=0)
    assert result.stop_reason == StopReason.ERROR and faults.served == [500]
    assert [a.status for a in result.trace.unanswered] == [500]


@pytest.mark.parametrize("runner", by_tier(GEMINI_RUNNERS))
def test_a_callers_vertex_ai_setting_does_not_reroute_a_gemini_run(
    runner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # google-genai reads GOOGLE_GENAI_USE_VERTEXAI when not told which API it speaks, and then asks Vertex AI's paths.
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    with ScriptedModelServer() as server:
        result = run_runner(runner, server, Limits(max_seconds=60), api="gemini")
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert {s.model_call.endpoint for s in result.trace.steps} == {"generateContent"}


@pytest.mark.full  # one knob probe: a few runs
def test_caps_measures_a_runner_whose_default_api_is_gemini() -> None:
    class GeminiFirst(GoogleAdk):
        apis = ("gemini",)

    with ScriptedModelServer(NeverStops()) as server:
        result = Prober({"never-stops": server}).run(GeminiFirst(), "never-stops", None, max_steps=2)
    assert (result.stop_reason, result.totals.model_calls) == (StopReason.MAX_STEPS, 2)
    assert {s.model_call.endpoint for s in result.trace.steps} == {"generateContent"}


@pytest.mark.parametrize(("runner", "case_id"), by_tier(without_races(cells(GEMINI_RUNNERS, CASES))))
def test_every_case_passes_on_gemini(runner: str, case_id: str, model_server: ScriptedModelServer) -> None:
    outcome = run_one(runner, CASES[case_id], Endpoint(ModelChoice(api="gemini"), model_server.base_urls))
    assert outcome.result is not None, outcome.error
    assert outcome.passed, [f"{c.name}: {c.detail}" for c in outcome.checks if not c.passed]
    assert {s.model_call.endpoint for s in outcome.result.trace.steps} <= {"generateContent"}
