"""Gemini's generateContent on the scripted model, through the real `google-genai` client and the recorder."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from google import genai
from google.genai import errors, types
from hypothesis import given, settings
from hypothesis import strategies as st

from looplab.adapters.boundary.recorder import ModelRecorder
from looplab.adapters.boundary.transport import http_module_for
from looplab.adapters.boundary.wire import parse_exchange
from looplab.adapters.contract.trace import api_of
from looplab.scenarios.scripted import wire
from looplab.scenarios.scripted.conversation import PERSONA_HEADER, GeminiRequest, MalformedRequest, from_gemini
from looplab.scenarios.scripted.faults import HttpFaults
from looplab.scenarios.scripted.policy import Call, Decision
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Guard, Workspace, run_clock
from tests.boundary.clients import closed_at_end
from tests.conftest import FIXTURE_REPO, SYSTEM_PROMPT, TASK

#: Turns an investigation may take here: the scripted investigator answers vip-compound in far fewer.
MAX_TURNS = 20


def _gemini(server: ScriptedModelServer, recorder: ModelRecorder) -> genai.Client:
    """google-genai on the recorder's HTTP client (the SDK's default backend, httpx), as a runner would build it;
    both closed when the test ends."""
    http = recorder.http_client(httpx, tls=False)
    options = types.HttpOptions(base_url=server.gemini_base_url, httpx_client=http, timeout=30_000)
    client = genai.Client(api_key="unused", http_options=options)
    closed_at_end(http, client)
    return client


def _config(guard: Guard) -> types.GenerateContentConfig:
    declarations = [
        types.FunctionDeclaration(name=t.name, description=t.description, parameters_json_schema=t.parameters)
        for t in guard.tools
    ]
    return types.GenerateContentConfig(
        system_instruction=SYSTEM_PROMPT,
        tools=[types.Tool(function_declarations=declarations)],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )


def _gemini_turn(client: genai.Client, contents: list[types.Content], config: Any, stream: bool) -> types.Content:
    """One model call: the reply's content, a streamed one put back together as google-genai's users do."""
    if not stream:
        reply = client.models.generate_content(model="scripted", contents=contents, config=config)
        assert reply.candidates and reply.candidates[0].content
        return reply.candidates[0].content
    parts: list[types.Part] = []
    for chunk in client.models.generate_content_stream(model="scripted", contents=contents, config=config):
        assert chunk.candidates and chunk.candidates[0].content
        parts += chunk.candidates[0].content.parts or []
    text = "".join(p.text for p in parts if p.text)
    calls = [p for p in parts if p.function_call]
    return types.Content(role="model", parts=([types.Part(text=text)] if text else []) + calls)


def _investigate_over_gemini(server: ScriptedModelServer, recorder: ModelRecorder, stream: bool) -> tuple[str, Guard]:
    """The investigation of the vip-compound case, over Gemini: each function call run through the Guard."""
    with Workspace(FIXTURE_REPO) as ws:
        guard, client = Guard(ws), _gemini(server, recorder)
        config, contents = _config(guard), [types.Content(role="user", parts=[types.Part(text=TASK)])]
        for _ in range(MAX_TURNS):
            content = _gemini_turn(client, contents, config, stream)
            calls = [p.function_call for p in content.parts or [] if p.function_call]
            if not calls:
                return "".join(p.text or "" for p in content.parts or []), guard
            contents.append(content)
            results = []
            for call in calls:
                record = guard.call(call.name or "", call.args or {}, call.id)
                outcome = {"error": record.result} if record.is_error else {"result": record.result}
                results.append(types.Part.from_function_response(name=call.name or "", response=outcome))
                results[-1].function_response.id = call.id  # type: ignore[union-attr]
            contents.append(types.Content(role="user", parts=results))
    raise AssertionError(f"no answer in {MAX_TURNS} turns")


def _investigate_over_chat(server: ScriptedModelServer) -> tuple[str, Guard]:
    """The same investigation over Chat Completions, to compare with."""
    recorder = ModelRecorder(clock=run_clock())
    client = openai.OpenAI(
        api_key="unused", base_url=server.openai_base_url, http_client=recorder.http_client(http_module_for(openai))
    )
    with Workspace(FIXTURE_REPO) as ws:
        guard = Guard(ws)
        tools = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in guard.tools
        ]
        messages: list[Any] = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": TASK}]
        for _ in range(MAX_TURNS):
            message = (
                client.chat.completions.create(model="scripted", messages=messages, tools=tools).choices[0].message
            )
            if not message.tool_calls:
                return message.content or "", guard
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                record = guard.call(call.function.name, json.loads(call.function.arguments), call.id)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": record.result})
    raise AssertionError(f"no answer in {MAX_TURNS} turns")


@pytest.mark.parametrize("stream", [False, True])
def test_an_investigation_over_gemini_is_recorded_call_by_call(model_server: ScriptedModelServer, stream: bool) -> None:
    recorder = ModelRecorder(clock=run_clock())
    answer, guard = _investigate_over_gemini(model_server, recorder, stream)
    assert answer and guard.records  # it investigated, then answered
    assert {(c.endpoint, c.streamed, c.status, c.finish_reason) for c in recorder.calls} == {
        ("generateContent", stream, 200, "STOP")
    }
    assert api_of("generateContent") == "gemini"
    assert all(c.input_tokens > 0 and c.output_tokens > 0 and not c.usage_estimated for c in recorder.calls)
    # Every function call the model asked for is in the record, in order, and each was one the Guard ran.
    requested = [name for c in recorder.calls for name in c.tool_calls_requested]
    assert requested == [r.name for r in guard.records]
    # Each call but the last asked for tools; the last one answered.
    assert [not c.tool_calls_requested for c in recorder.calls] == [False] * (len(recorder.calls) - 1) + [True]


@pytest.mark.full  # the investigation twice (about 8 s): the fast tier has the Gemini one alone above
def test_the_investigation_over_gemini_is_the_one_over_chat_completions(model_server: ScriptedModelServer) -> None:
    """The investigator decides from what the tools returned, whatever the wire format carried it."""
    gemini_answer, gemini_guard = _investigate_over_gemini(model_server, ModelRecorder(clock=run_clock()), False)
    chat_answer, chat_guard = _investigate_over_chat(model_server)
    assert [(r.name, r.args) for r in gemini_guard.records] == [(r.name, r.args) for r in chat_guard.records]
    assert gemini_answer == chat_answer


def test_the_sdk_reads_function_call_ids_usage_and_finish_reason(model_server: ScriptedModelServer) -> None:
    recorder = ModelRecorder(clock=run_clock())
    client = _gemini(model_server, recorder)
    with Workspace(FIXTURE_REPO) as ws:
        reply = client.models.generate_content(model="scripted", contents=TASK, config=_config(Guard(ws)))
    (call,) = reply.function_calls or []
    assert call.id == "call_1_0" and call.name == "run_tests" and isinstance(call.args, dict)
    usage = reply.usage_metadata
    assert usage and usage.prompt_token_count and usage.candidates_token_count
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count
    assert reply.candidates and reply.candidates[0].finish_reason == types.FinishReason.STOP
    (recorded,) = recorder.calls
    assert (recorded.input_tokens, recorded.output_tokens) == (usage.prompt_token_count, usage.candidates_token_count)
    assert recorded.tool_calls_requested == ["run_tests"]


def test_a_stream_without_alt_sse_is_one_json_array_of_the_chunks(model_server: ScriptedModelServer) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": TASK}]}]}
    url = f"{model_server.gemini_base_url}/v1beta/models/scripted:streamGenerateContent"
    reply = httpx.post(url, json=body, timeout=10)
    chunks = reply.json()
    assert reply.status_code == 200 and isinstance(chunks, list) and len(chunks) > 1
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP" and "usageMetadata" in chunks[-1]
    info = parse_exchange("generateContent", reply.content)
    assert info.streamed and info.finish_reason == "STOP" and info.text
    sse = httpx.post(url + "?alt=sse", json=body, timeout=10)
    assert sse.headers["content-type"].startswith("text/event-stream")
    assert parse_exchange("generateContent", sse.content) == info  # the same reply, however it was streamed


@pytest.mark.parametrize(
    ("path", "body", "status", "says"),
    [
        ("/v1beta/models/scripted:generateContent", b"{", 400, "not valid JSON"),
        ("/v1beta/models/scripted:generateContent", b'{"contents": []}', 400, "contents"),
        ("/v1beta/models/scripted:countTokens", b'{"contents": []}', 404, "not a method"),
        ("/v1beta/models/:generateContent", b"{}", 404, "not a method"),
    ],
)
def test_a_bad_gemini_request_gets_geminis_error_shape(
    model_server: ScriptedModelServer, path: str, body: bytes, status: int, says: str
) -> None:
    reply = httpx.post(model_server.url + path, content=body, timeout=10)
    error = reply.json()["error"]
    assert reply.status_code == status == error["code"] and says in error["message"]
    assert error["status"] == {400: "INVALID_ARGUMENT", 404: "NOT_FOUND"}[status]


def test_the_sdk_raises_a_clear_error_for_a_bad_request(model_server: ScriptedModelServer) -> None:
    recorder = ModelRecorder(clock=run_clock())
    recorder.headers = {PERSONA_HEADER: "nobody"}
    client = _gemini(model_server, recorder)
    with pytest.raises(errors.ClientError) as raised:
        client.models.generate_content(model="scripted", contents=TASK)
    assert raised.value.code == 400 and raised.value.status == "INVALID_ARGUMENT"
    assert "is not a persona" in (raised.value.message or "")
    (failed,) = recorder.failed
    assert not recorder.calls and failed.endpoint == "generateContent" and "is not a persona" in failed.error


@pytest.mark.parametrize("status", [429, 500, 503])
def test_an_injected_fault_on_a_gemini_path_is_in_geminis_error_shape(status: int) -> None:
    with ScriptedModelServer(wrap=lambda app: HttpFaults(app, [status])) as server:
        recorder = ModelRecorder(clock=run_clock())
        client = _gemini(server, recorder)
        with pytest.raises(errors.APIError) as raised:
            client.models.generate_content(model="scripted", contents=TASK)
    assert raised.value.code == status and raised.value.status and "injected fault" in (raised.value.message or "")
    (failed,) = recorder.failed
    assert (failed.endpoint, failed.status) == ("generateContent", status) and "injected fault" in failed.error


def test_function_calls_without_ids_are_matched_to_their_results_by_name() -> None:
    request = GeminiRequest.model_validate(
        {
            "contents": [
                {"role": "user", "parts": [{"text": "why?"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"path": "a.py"}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"result": "x"}}}]},
                {"role": "model", "parts": [{"function_call": {"name": "run_tests", "args": {"target": "t"}}}]},
                {"role": "user", "parts": [{"function_response": {"name": "run_tests", "response": {"error": "E"}}}]},
            ],
            "tools": [{"functionDeclarations": [{"name": "read_file"}, {"name": "run_tests"}]}],
        }
    )
    conv = from_gemini(request)
    assert (conv.task, conv.tools, conv.assistant_turns) == ("why?", ["read_file", "run_tests"], 2)
    assert [(r.call.name, r.call.args, r.content, r.is_error) for r in conv.results] == [
        ("read_file", {"path": "a.py"}, "x", False),
        ("run_tests", {"target": "t"}, "E", True),
    ]


@pytest.mark.parametrize(
    "part",
    [{"functionCall": "read_file"}, {"functionCall": {"name": 3}}, {"functionResponse": []}],
)
def test_a_malformed_part_is_a_malformed_request(part: dict[str, Any]) -> None:
    request = GeminiRequest.model_validate({"contents": [{"role": "model", "parts": [part]}]})
    with pytest.raises(MalformedRequest):
        from_gemini(request)


# --- properties ---------------------------------------------------------------------

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12).filter(
    lambda name: name != "unknown"
)
json_scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=12)
args = st.dictionaries(st.text(max_size=8), json_scalars, max_size=3)
calls = st.lists(st.builds(Call, names, args | st.text(max_size=20)), max_size=3)
decisions = st.one_of(
    st.builds(lambda cs: Decision(tuple(cs)), calls.filter(bool)),
    st.builds(lambda text: Decision(answer=text), st.text(max_size=600)),
)
replies = st.builds(wire.Reply, decisions, st.just("scripted"), st.integers(1, 50), st.integers(1, 10**6))


@given(reply=replies, stream=st.sampled_from(["whole", "sse", "array"]))
def test_the_recorder_reads_back_what_the_scripted_model_wrote(reply: wire.Reply, stream: str) -> None:
    """Tokens, tool calls, finish reason and text, whichever way the reply went on the wire."""
    if stream == "whole":
        body = json.dumps(wire.gemini_response(reply))
    elif stream == "sse":
        body = "".join(f"data: {json.dumps(payload)}\n\n" for _, payload in wire.gemini_events(reply))
    else:
        body = json.dumps(wire.gemini_chunks(reply))
    info = parse_exchange("generateContent", body.encode())
    assert info.streamed is (stream != "whole")
    assert (info.input_tokens, info.output_tokens) == (reply.input_tokens, reply.output_tokens)
    assert info.tool_calls_requested == [c.name for c in reply.decision.calls]
    assert info.finish_reason == "STOP" and info.text == (reply.decision.answer or "")


@settings(deadline=None)  # the first example imports google-genai's types, which is slow on a busy machine
@given(reply=replies, stream=st.booleans())
def test_the_sdk_parses_every_reply_the_scripted_model_writes(reply: wire.Reply, stream: bool) -> None:
    """Read by google-genai's own response type: ids, names and object arguments survive, a botched one as {}."""
    chunks = wire.gemini_chunks(reply) if stream else [wire.gemini_response(reply)]
    parsed = [types.GenerateContentResponse._from_response(response=c, kwargs={}) for c in chunks]
    got = [fc for r in parsed for fc in r.function_calls or []]
    assert [(fc.id, fc.name) for fc in got] == list(
        zip(reply.call_ids, [c.name for c in reply.decision.calls], strict=True)
    )
    assert [fc.args for fc in got] == [wire.gemini_args(c) for c in reply.decision.calls]
    usage = parsed[-1].usage_metadata
    assert usage and (usage.prompt_token_count, usage.candidates_token_count) == (
        reply.input_tokens,
        reply.output_tokens,
    )


parts = st.one_of(
    st.fixed_dictionaries({"text": st.text(max_size=10)}),
    st.fixed_dictionaries(
        {"functionCall": st.fixed_dictionaries({"name": names, "args": args}, optional={"id": names})}
    ),
    st.fixed_dictionaries(
        {"functionResponse": st.fixed_dictionaries({"name": names, "response": args}, optional={"id": names})}
    ),
    st.dictionaries(st.text(max_size=6), json_scalars, max_size=2),
)
contents = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "model"]), "parts": st.lists(parts, max_size=3)}),
    min_size=1,
    max_size=6,
)


@given(contents=contents)
def test_any_well_formed_conversation_is_read_with_one_result_per_response(contents: list[dict[str, Any]]) -> None:
    conv = from_gemini(GeminiRequest.model_validate({"contents": contents}))
    responses = [p for c in contents for p in c["parts"] if "functionResponse" in p]
    assert len(conv.results) == len(responses)
    assert all(r.call.name != "unknown" for r in conv.results)  # each result is tied to a call, by id or by name
    assert conv.assistant_turns == sum(c["role"] == "model" for c in contents)


@given(
    body=st.recursive(
        json_scalars,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "candidates",
                        "content",
                        "parts",
                        "usageMetadata",
                        "functionCall",
                        "name",
                        "text",
                        "finishReason",
                        "promptTokenCount",
                        "candidatesTokenCount",
                        "thought",
                    ]
                ),
                inner,
                max_size=4,
            )
        ),
        max_leaves=20,
    )
)
def test_any_json_reply_is_read_without_failing(body: Any) -> None:
    """Whatever shape a reply has, the record is read, with counts that are never negative."""
    for encoded in (json.dumps(body), f"data: {json.dumps(body)}\n\n"):
        info = parse_exchange("generateContent", encoded.encode())
        assert info.input_tokens >= 0 and info.output_tokens >= 0 and isinstance(info.text, str)
        assert all(isinstance(name, str) for name in info.tool_calls_requested)
