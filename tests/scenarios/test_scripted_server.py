"""The loopback server through the real `openai` and `anthropic` clients, recorded at the model boundary."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from looplab.adapters.boundary.recorder import ModelRecorder
from looplab.adapters.boundary.transport import http_module_for
from looplab.adapters.boundary.wire import parse_exchange
from looplab.scenarios.scripted.conversation import PERSONA_HEADER
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import run_clock
from tests.conftest import TASK

TARGET = "tests/test_invoice.py::test_invoice_total"
SCHEMA = {"type": "object", "properties": {"target": {"type": "string"}}, "required": ["target"]}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": "run_tests", "description": "Run pytest.", "parameters": SCHEMA}}
]
RESPONSES_TOOLS = [
    {"type": "function", "name": "run_tests", "description": "Run pytest.", "parameters": SCHEMA, "strict": False}
]
MESSAGES_TOOLS = [{"name": "run_tests", "description": "Run pytest.", "input_schema": SCHEMA}]
# After the test ran and passed, the investigator answers: a final turn with text.
PASSED = "exit code 0\n.\n1 passed in 0.01s"


@pytest.fixture
def recorder() -> ModelRecorder:
    return ModelRecorder(clock=run_clock())


def _openai(server: ScriptedModelServer, recorder: ModelRecorder) -> openai.OpenAI:
    client = recorder.http_client(http_module_for(openai))
    return openai.OpenAI(api_key="unused", base_url=server.openai_base_url, http_client=client, max_retries=0)


def _anthropic(server: ScriptedModelServer, recorder: ModelRecorder) -> anthropic.Anthropic:
    client = recorder.http_client(http_module_for(anthropic))
    return anthropic.Anthropic(api_key="unused", base_url=server.anthropic_base_url, http_client=client, max_retries=0)


def _only_call(recorder: ModelRecorder, endpoint: str, streamed: bool):
    assert len(recorder.calls) == 1
    call = recorder.calls[0]
    assert (call.endpoint, call.streamed, call.status) == (endpoint, streamed, 200)
    assert call.input_tokens > 0 and call.output_tokens > 0 and call.request_bytes > 0 and call.response_bytes > 0
    return call


@given(
    events=st.lists(st.dictionaries(st.sampled_from(["type", "id", "x"]), st.text(max_size=8)), min_size=1, max_size=4),
    lead=st.sampled_from(["", " ", "\n", "\r\n  "]),
    named=st.booleans(),
    comment=st.booleans(),
    endpoint=st.sampled_from(["chat.completions", "responses", "messages"]),
)
def test_a_reply_is_streamed_when_its_body_is_server_sent_events(
    events: list[dict[str, str]], lead: str, named: bool, comment: bool, endpoint: str
) -> None:
    """Told from the reply's own first bytes (not the request's flag): what came on the wire."""
    sse = (": keep-alive\n\n" if comment else "") + "".join(
        (f"event: {e.get('type', 'x')}\n" if named else "") + f"data: {json.dumps(e)}\n\n" for e in events
    )
    assert parse_exchange(endpoint, (lead + sse).encode()).streamed
    assert not parse_exchange(endpoint, (lead + json.dumps(events[0])).encode()).streamed


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_chat_completions_tool_call(model_server, recorder, stream: bool) -> None:
    client = _openai(model_server, recorder)
    request = dict(model="scripted", messages=[{"role": "user", "content": TASK}], tools=CHAT_TOOLS)
    if stream:
        chunks = list(client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True}))
        calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
        assert calls[0].function.name == "run_tests"
        assert json.loads("".join(tc.function.arguments for tc in calls)) == {"target": TARGET}
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
        assert chunks[-1].usage.prompt_tokens > 0
    else:
        reply = client.chat.completions.create(**request)
        call = reply.choices[0].message.tool_calls[0]
        assert (call.function.name, json.loads(call.function.arguments)) == ("run_tests", {"target": TARGET})
        assert reply.choices[0].finish_reason == "tool_calls" and reply.usage.completion_tokens > 0
    recorded = _only_call(recorder, "chat.completions", stream)
    assert (recorded.finish_reason, recorded.tool_calls_requested) == ("tool_calls", ["run_tests"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_chat_completions_final_answer_after_a_passing_run(model_server, recorder, stream: bool) -> None:
    client = _openai(model_server, recorder)
    messages = [
        {"role": "user", "content": TASK},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "run_tests", "arguments": json.dumps({"target": TARGET})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": PASSED},
    ]
    if stream:
        chunks = list(
            client.chat.completions.create(model="scripted", messages=messages, tools=CHAT_TOOLS, stream=True)
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
    else:
        text = (
            client.chat.completions.create(model="scripted", messages=messages, tools=CHAT_TOOLS)
            .choices[0]
            .message.content
        )
    assert "nothing is broken" in text
    recorded = _only_call(recorder, "chat.completions", stream)
    # Without stream_options.include_usage a stream carries no usage: the recorder estimates and says so.
    assert (recorded.finish_reason, recorded.usage_estimated) == ("stop", stream)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_responses_tool_call(model_server, recorder, stream: bool) -> None:
    client = _openai(model_server, recorder)
    if stream:
        with client.responses.stream(model="scripted", input=TASK, tools=RESPONSES_TOOLS) as events:
            kinds = [e.type for e in events]
            reply = events.get_final_response()
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        assert "response.function_call_arguments.done" in kinds
    else:
        reply = client.responses.create(model="scripted", input=TASK, tools=RESPONSES_TOOLS)
    item = reply.output[0]
    assert (item.type, item.name, json.loads(item.arguments)) == ("function_call", "run_tests", {"target": TARGET})
    assert reply.usage.input_tokens > 0
    recorded = _only_call(recorder, "responses", stream)
    assert (recorded.finish_reason, recorded.tool_calls_requested) == ("tool_calls", ["run_tests"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_responses_final_answer(model_server, recorder, stream: bool) -> None:
    client = _openai(model_server, recorder)
    items = [
        {"role": "user", "content": TASK},
        {"type": "function_call", "call_id": "c1", "name": "run_tests", "arguments": json.dumps({"target": TARGET})},
        {"type": "function_call_output", "call_id": "c1", "output": PASSED},
    ]
    if stream:
        with client.responses.stream(model="scripted", input=items, tools=RESPONSES_TOOLS) as events:
            deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
            reply = events.get_final_response()
        assert "".join(deltas) == reply.output_text
    else:
        reply = client.responses.create(model="scripted", input=items, tools=RESPONSES_TOOLS)
    assert "nothing is broken" in reply.output_text
    assert _only_call(recorder, "responses", stream).finish_reason == "completed"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_messages_tool_use(model_server, recorder, stream: bool) -> None:
    client = _anthropic(model_server, recorder)
    request = dict(
        model="scripted", max_tokens=1024, messages=[{"role": "user", "content": TASK}], tools=MESSAGES_TOOLS
    )
    if stream:
        with client.messages.stream(**request) as events:
            kinds = [e.type for e in events]
            reply = events.get_final_message()
        assert kinds.count("input_json") >= 1 and kinds[-1] == "message_stop"
    else:
        reply = client.messages.create(**request)
    block = reply.content[0]
    assert (block.type, block.name, block.input) == ("tool_use", "run_tests", {"target": TARGET})
    assert reply.stop_reason == "tool_use" and reply.usage.input_tokens > 0
    recorded = _only_call(recorder, "messages", stream)
    assert (recorded.finish_reason, recorded.tool_calls_requested) == ("tool_use", ["run_tests"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_messages_final_answer(model_server, recorder, stream: bool) -> None:
    client = _anthropic(model_server, recorder)
    messages = [
        {"role": "user", "content": TASK},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "run_tests", "input": {"target": TARGET}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": PASSED}]},
    ]
    request = dict(model="scripted", max_tokens=1024, messages=messages, tools=MESSAGES_TOOLS)
    if stream:
        with client.messages.stream(**request) as events:
            text = events.get_final_text()
    else:
        text = client.messages.create(**request).content[0].text
    assert "nothing is broken" in text
    assert _only_call(recorder, "messages", stream).finish_reason == "end_turn"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/messages"])
@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[1, 2]", b"{}", b'{"model": "m", "messages": "hello", "input": 5, "max_tokens": 0}'],
    ids=["not-json", "not-object", "empty", "wrong-types"],
)
def test_malformed_requests_get_a_400_with_a_json_error(model_server, path: str, body: bytes) -> None:
    import httpx2

    response = httpx2.post(
        model_server.url + path, content=body, headers={"content-type": "application/json"}, timeout=5
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]


def test_the_sdks_raise_bad_request_for_a_400(model_server, recorder) -> None:
    client = _anthropic(model_server, recorder)
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        client.messages.create(model="scripted", max_tokens=0, messages=[{"role": "user", "content": "x"}])
    assert recorder.calls == [] and len(recorder.failed) == 1 and recorder.failed[0].status == 400


def test_a_stateful_responses_request_is_refused_with_the_reason(model_server) -> None:
    import httpx2

    body = {"model": "scripted", "input": "x", "previous_response_id": "resp_1"}
    response = httpx2.post(model_server.url + "/v1/responses", json=body, timeout=5)
    assert response.status_code == 400 and "keeps no state" in response.json()["error"]["message"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_async_clients_are_recorded_too(model_server, recorder, stream: bool) -> None:
    import asyncio

    async def both() -> None:
        oa = openai.AsyncOpenAI(
            api_key="unused",
            base_url=model_server.openai_base_url,
            http_client=recorder.http_client(http_module_for(openai), is_async=True),
        )
        an = anthropic.AsyncAnthropic(
            api_key="unused",
            base_url=model_server.anthropic_base_url,
            http_client=recorder.http_client(http_module_for(anthropic), is_async=True),
        )
        messages = [{"role": "user", "content": TASK}]
        if stream:
            async for _ in await oa.chat.completions.create(
                model="s", messages=messages, tools=CHAT_TOOLS, stream=True
            ):
                pass
            async with an.messages.stream(model="s", max_tokens=64, messages=messages, tools=MESSAGES_TOOLS) as events:
                await events.get_final_message()
        else:
            await oa.chat.completions.create(model="s", messages=messages, tools=CHAT_TOOLS)
            await an.messages.create(model="s", max_tokens=64, messages=messages, tools=MESSAGES_TOOLS)

    asyncio.run(both())
    assert [(c.endpoint, c.streamed, c.tool_calls_requested) for c in recorder.calls] == [
        ("chat.completions", stream, ["run_tests"]),
        ("messages", stream, ["run_tests"]),
    ]


READ_TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": SCHEMA}}]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("sdk_sends", [None, "careful"], ids=["alone", "over-the-sdks"])
def test_the_recorders_headers_go_with_every_request_and_win(model_server, is_async: bool, sdk_sends) -> None:
    """The persona in the recorder's headers reaches the server (a snoop reads secrets first), in place of a
    header of the same name the SDK sent itself."""
    import asyncio

    recorder = ModelRecorder(clock=run_clock(), headers={PERSONA_HEADER: "snoop"})
    extra = {"X-Looplab-Persona": sdk_sends} if sdk_sends else None
    request = dict(
        model="scripted", messages=[{"role": "user", "content": TASK}], tools=READ_TOOLS, extra_headers=extra
    )
    http = recorder.http_client(http_module_for(openai), is_async=is_async)
    options = dict(api_key="unused", base_url=model_server.openai_base_url, http_client=http)
    if is_async:

        async def ask() -> Any:
            async with openai.AsyncOpenAI(**options) as client:  # its connections close in the loop that opened them
                return await client.chat.completions.create(**request)

        reply = asyncio.run(ask())
    else:
        with openai.OpenAI(**options) as client:
            reply = client.chat.completions.create(**request)
    first = reply.choices[0].message.tool_calls[0].function
    assert (first.name, json.loads(first.arguments)) == ("read_file", {"path": "../../etc/passwd"})
    assert recorder.calls[0].tool_calls_requested == ["read_file", "read_file"]
