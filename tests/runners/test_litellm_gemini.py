"""Gemini's API through LiteLLM (the OpenAI Agents SDK, smolagents) and through DSPy's lm15 engine, and the scripted
model's reading of what they send. (The runs themselves: tests/testing/test_conformance.py on every declared API.)"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from looplab.adapters.contract.model import ModelServerUrls, ModelSpec
from looplab.scenarios.scripted import fields
from looplab.scenarios.scripted.conversation import GeminiRequest, from_gemini

litellm_runners = pytest.importorskip("looplab.adapters.runners._litellm")
pytest.importorskip("litellm")

SYSTEM, TASK = "You investigate failing tests.", "Why does tests/test_x.py::test_y fail?"


class _Urls(ModelServerUrls):
    url = "http://127.0.0.1:9"


def _raw_request(model: str, api_base: str) -> dict[str, Any]:
    """The request LiteLLM would send for a system prompt and a task (built, not sent)."""
    from litellm.types.utils import CallTypes
    from litellm.utils import return_raw_request

    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    raw = return_raw_request(CallTypes.completion, {"model": model, "api_base": api_base, "messages": messages})
    assert not raw["error"], raw["error"]
    return raw


def test_a_gemini_model_litellm_does_not_know_goes_to_looplabs_url_with_its_system_instruction() -> None:
    name = f"looplab-unknown-{uuid.uuid4().hex[:8]}"  # unknown to LiteLLM's map, whatever ran before
    model, api_base = litellm_runners.litellm_route("smolagents", "smolagents", "gemini", name, _Urls())
    assert (model, api_base) == (f"gemini/{name}", "http://127.0.0.1:9/v1beta")
    raw = _raw_request(model, api_base)
    assert raw["raw_request_api_base"] == f"http://127.0.0.1:9/v1beta/models/{name}:generateContent"
    body = raw["raw_request_body"]
    assert body["system_instruction"] == {"parts": [{"text": SYSTEM}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": TASK}]}]


def test_a_gemini_model_litellm_knows_keeps_its_own_entry() -> None:
    litellm = litellm_runners.import_litellm("smolagents", "smolagents")
    before = dict(litellm.model_cost["gemini/gemini-2.5-flash"])
    litellm_runners.litellm_route("smolagents", "smolagents", "gemini", "gemini-2.5-flash", _Urls())
    assert litellm.model_cost["gemini/gemini-2.5-flash"] == before


def test_litellm_carries_anthropic_at_the_url_and_refuses_an_openai_api() -> None:
    def route(api: str, name: str) -> tuple[str, str]:
        return litellm_runners.litellm_route("smolagents", "smolagents", api, name, _Urls())

    assert route("messages", "claude") == ("anthropic/claude", "http://127.0.0.1:9")
    with pytest.raises(ValueError, match="not 'chat'"):
        route("chat", "gpt")


@pytest.mark.parametrize("runner", ["openai_agents", "smolagents"])
def test_a_litellm_runners_version_names_litellm_for_a_google_model(runner: str) -> None:
    from looplab.adapters import registry

    adapter = registry.load(runner)
    assert "+ litellm " in adapter.version(ModelSpec("google", "gemini-2.5-flash"))
    assert "+ litellm " not in adapter.version(ModelSpec("openai", "gpt-4.1"))


def test_lm15_takes_a_gemini_base_url_with_the_api_version() -> None:
    lm15 = pytest.importorskip("looplab.adapters.runners._lm15")
    assert lm15.lm15_base_url("gemini", "http://127.0.0.1:9") == "http://127.0.0.1:9/v1beta"
    assert lm15.lm15_base_url("gemini", "http://127.0.0.1:9/") == "http://127.0.0.1:9/v1beta"
    assert lm15.lm15_base_url("gemini", None) is None  # lm15's own default endpoint
    assert lm15.lm15_base_url("openai", "http://127.0.0.1:9/v1") == "http://127.0.0.1:9/v1"


def test_the_scripted_model_reads_litellms_function_response() -> None:
    request = GeminiRequest.model_validate(
        {
            "contents": [
                {"role": "user", "parts": [{"text": "task"}]},
                {"role": "model", "parts": [{"function_call": {"id": "c1", "name": "run_tests", "args": {}}}]},
                {
                    "role": "user",
                    "parts": [{"function_response": {"id": "c1", "name": "run_tests", "response": {"content": "ok"}}}],
                },
            ]
        }
    )
    [result] = from_gemini(request).results
    assert (result.call.name, result.content) == ("run_tests", "ok")


@pytest.mark.parametrize("spelling", ["systemInstruction", "system_instruction"])
def test_the_scripted_model_reads_dspys_fields_on_gemini(spelling: str) -> None:
    dspy = pytest.importorskip("dspy")
    tool = dspy.Tool(lambda **kw: "", name="read_file", desc="reads", args={"path": {"type": "string"}})
    agent = dspy.ReAct(dspy.Signature("task -> answer", "Investigate."), tools=[tool])
    inputs = {"task": TASK, "trajectory": agent._format_trajectory({})}
    messages = dspy.ChatAdapter().format(agent.react.signature, demos=[], inputs=inputs)
    [system] = [m["content"] for m in messages if m["role"] == "system"]
    contents = [{"role": "user", "parts": [{"text": m["content"]}]} for m in messages if m["role"] == "user"]
    request = GeminiRequest.model_validate({"contents": contents, spelling: {"parts": [{"text": system}]}})
    read = fields.from_gemini(request)
    assert read == fields.read([(m["role"], m["content"]) for m in messages], "")
    assert read is not None and (read.kind, read.task, read.tools) == ("react", TASK, ("read_file",))


def test_a_gemini_request_outside_dspys_fields_is_not_read_as_one() -> None:
    request = GeminiRequest.model_validate(
        {"contents": [{"role": "user", "parts": [{"text": TASK}]}], "systemInstruction": {"parts": [{"text": SYSTEM}]}}
    )
    assert fields.from_gemini(request) is None
