"""The scripted model server against hostile and broken requests: never a 500, never a hang, and it stops promptly.

Requests go to a real `ScriptedModelServer` over loopback with a client timeout, so a request that hangs fails
its test instead of hanging the suite. The property tests post generated bodies (bytes, JSON values, request-shaped
JSON with wrong types, deep nesting, huge strings, lone surrogates) to all three endpoints, streamed and not.
"""

from __future__ import annotations

import dataclasses
import json
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from looplab.scenarios.scripted import server as server_module
from looplab.scenarios.scripted import wire
from looplab.scenarios.scripted.conversation import (
    PERSONA_HEADER,
    PERSONAS,
    ChatRequest,
    MalformedRequest,
    MessagesRequest,
    ResponsesRequest,
    from_chat,
    from_messages,
    from_responses,
    persona_named,
)
from looplab.scenarios.scripted.policy import Investigator
from looplab.scenarios.scripted.server import MAX_ERROR_CHARS, ScriptedModelServer, create_app
from tests.paths import REPO
from tests.tiers import BUSY_MACHINE_S

ROOT = REPO
ENDPOINTS = ("chat", "responses", "messages")
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
TOOLS = ("run_tests", "read_file", "search_code", "write_file")
TARGET = "tests/test_x.py::test_y"
TASK = f"Investigate the failing test {TARGET} and explain the cause."
#: Far above what any request here needs; a request that takes longer is a hang.
REQUEST_TIMEOUT_S = 20.0
#: What a long request may take: it took minutes when the policy was quadratic.
LONG_REQUEST_BOUND_S = 5.0
FAST = settings(
    deadline=timedelta(seconds=5),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as running:
        yield running


@pytest.fixture(scope="module")
def client(server: ScriptedModelServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=REQUEST_TIMEOUT_S) as http:
        yield http


def request(
    endpoint: str,
    task: Any = TASK,
    *,
    call: tuple[str, Any] | None = None,
    result: Any = None,
    model: str = "scripted",
    stream: bool = False,
) -> dict[str, Any]:
    """A well-formed request in `endpoint`'s format: the task, and optionally one tool call with its result.

    The call's arguments go out as JSON text (Chat Completions, Responses) or as the object (Messages); text that
    is not an object goes out as it is, or as `{"raw": text}` in Messages.
    """
    name, args = call or ("", None)
    text_args = args if isinstance(args, str) else json.dumps(args)
    if endpoint == "chat":
        messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        if call:
            fn = {"name": name, "arguments": text_args}
            messages += [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": fn}],
                },
                {"role": "tool", "tool_call_id": "c1", "content": result},
            ]
        tools = [{"type": "function", "function": {"name": t, "parameters": {}}} for t in TOOLS]
        return {"model": model, "messages": messages, "tools": tools, "stream": stream}
    if endpoint == "responses":
        items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": task}]
        if call:
            items += [
                {"type": "function_call", "call_id": "c1", "name": name, "arguments": text_args},
                {"type": "function_call_output", "call_id": "c1", "output": result},
            ]
        tools = [{"type": "function", "name": t, "parameters": {}} for t in TOOLS]
        return {"model": model, "input": items, "tools": tools, "stream": stream}
    messages = [{"role": "user", "content": task}]
    if call:
        block_input = args if isinstance(args, dict) else {"raw": args}
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": name, "input": block_input}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": result}]},
        ]
    tools = [{"name": t, "input_schema": {"type": "object"}} for t in TOOLS]
    return {"model": model, "max_tokens": 1024, "messages": messages, "tools": tools, "stream": stream}


def encode(body: dict[str, Any]) -> bytes:
    """JSON text; a lone surrogate is written as its escape (`\\udcff`), which is valid JSON."""
    return json.dumps(body).encode()


def check(response: httpx.Response, stream: bool | None = None) -> None:
    """A 200 or a 400, never a 500; the body is JSON, or SSE whose every data line is JSON (or `[DONE]`)."""
    assert response.status_code in (200, 400), (response.status_code, response.text[:500])
    kind = response.headers["content-type"]
    if response.status_code == 200 and stream:
        assert kind.startswith("text/event-stream"), kind
    if kind.startswith("text/event-stream"):
        assert response.status_code == 200
        data = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        assert data, response.text[:500]
        for line in data:
            if line != "[DONE]":
                json.loads(line)
    else:
        assert kind.startswith("application/json"), kind
        body = response.json()
        if response.status_code == 400:
            message = body["error"]["message"]
            assert isinstance(message, str) and len(message) < MAX_ERROR_CHARS + 100


def post(client: httpx.Client, endpoint: str, body: bytes, persona: str | None = None) -> httpx.Response:
    """`body` posted to `endpoint`, with `persona` in the persona header (None: no header)."""
    headers = {"content-type": "application/json"} | ({PERSONA_HEADER: persona} if persona is not None else {})
    return client.post(PATHS[endpoint], content=body, headers=headers)


# --- long text: linear time ---------------------------------------------------------

N = 200_000
LONG_TASKS = {
    "word": "a" * N,  # one run of word characters with no `.py`: retried from each position by the old TARGET
    "path": "a/" * (N // 2),
    "dots": "." * N,
    "lines": "tests/x\n" * (N // 8),
    "long target": "tests/" + "a" * N + ".py::" + "t" * N,
}
LONG_RESULTS = {
    "word": ("run_tests", {"target": TARGET}, "a" * N),
    "location lines": ("run_tests", {"target": TARGET}, "tests/test_x.py:" * (N // 16)),
    "traceback headers": ("run_tests", {"target": TARGET}, "    def test_y(\n" * (N // 16)),
    "failed lines": ("run_tests", {"target": TARGET}, "FAILED " + "x" * N),
    "calls in one assert": (
        "read_file",
        {"path": "tests/test_x.py"},
        "def test_y():\n    assert [" + ", ".join(f"f{i}()" for i in range(N // 10)) + "] == 2\n",
    ),
    "deep expression": ("read_file", {"path": "tests/test_x.py"}, "def test_y():\n    assert " + "-" * N + "1\n"),
}


def _timed(client: httpx.Client, endpoint: str, body: dict[str, Any]) -> float:
    started = time.perf_counter()
    response = post(client, endpoint, encode(body))
    elapsed = time.perf_counter() - started
    check(response, body.get("stream"))
    assert response.status_code == 200
    return elapsed


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("shape", LONG_TASKS)
def test_a_long_task_is_answered_promptly(client, endpoint: str, shape: str) -> None:
    assert _timed(client, endpoint, request(endpoint, LONG_TASKS[shape])) < LONG_REQUEST_BOUND_S


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_a_long_responses_input_string_is_answered_promptly(client, endpoint: str) -> None:
    """The shape first seen to take minutes: `input` one 200,000-character string (and its twins)."""
    body = request(endpoint, "x" * N)
    if endpoint == "responses":
        body["input"] = "x" * N
    assert _timed(client, endpoint, body) < LONG_REQUEST_BOUND_S


@pytest.mark.parametrize("shape", LONG_RESULTS)
@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_a_long_tool_result_is_answered_promptly(client, endpoint: str, shape: str) -> None:
    name, args, result = LONG_RESULTS[shape]
    assert _timed(client, endpoint, request(endpoint, call=(name, args), result=result)) < LONG_REQUEST_BOUND_S


def test_a_long_request_does_not_block_other_requests(server, client) -> None:
    """While one long request is answered, a small one on another connection is answered too."""
    body = encode(request("responses", "a" * N))
    done = threading.Event()
    with httpx.Client(base_url=server.url, timeout=REQUEST_TIMEOUT_S) as other:

        def long_one() -> None:
            post(other, "responses", body)
            done.set()

        worker = threading.Thread(target=long_one, daemon=True)
        worker.start()
        started = time.perf_counter()
        check(post(client, "chat", encode(request("chat"))))
        assert time.perf_counter() - started < LONG_REQUEST_BOUND_S
        assert done.wait(REQUEST_TIMEOUT_S)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_a_10_mb_request_is_answered_and_errors_do_not_echo_it(client, endpoint: str) -> None:
    big = "tests/ab " * (10_000_000 // 9)
    answered = post(client, endpoint, encode(request(endpoint, big)))
    check(answered)
    assert answered.status_code == 200 and len(answered.content) < 10_000
    wrong = request(endpoint, big)
    wrong["model"] = [big]  # a wrong type, holding 10 MB
    refused = post(client, endpoint, encode(wrong))
    check(refused)
    assert refused.status_code == 400 and len(refused.content) < 2_000
    check(post(client, endpoint, encode(request(endpoint))))  # and the server still serves


def _streamed_text(response: httpx.Response) -> str:
    """The answer's text from a stream in any of the three formats."""
    pieces = []
    for line in response.text.splitlines():
        if not line.startswith("data: {"):
            continue
        event = json.loads(line[6:])
        if event.get("choices"):  # Chat Completions
            pieces.append(event["choices"][0]["delta"].get("content") or "")
        elif event.get("type") == "response.output_text.delta":  # Responses
            pieces.append(event["delta"])
        elif event.get("type") == "content_block_delta" and event["delta"]["type"] == "text_delta":  # Messages
            pieces.append(event["delta"]["text"])
    return "".join(pieces)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_a_long_answer_streams_in_a_bounded_number_of_events(client, endpoint: str) -> None:
    """The answer quotes the test output's `N passed`; with N two million digits long it is still a few events."""
    body = request(endpoint, call=("run_tests", {"target": TARGET}), result="1" * 2_000_000 + " passed", stream=True)
    started = time.perf_counter()
    response = post(client, endpoint, encode(body))
    check(response, stream=True)
    assert time.perf_counter() - started < LONG_REQUEST_BOUND_S
    assert "1" * 2_000_000 in _streamed_text(response)
    assert sum(line.startswith("data: ") for line in response.text.splitlines()) < 2 * wire.MAX_PIECES + 20


def test_an_error_message_is_trimmed() -> None:
    for dialect in ("openai", "anthropic"):
        body = json.loads(server_module._error(dialect, "x" * 1_000_000).body)
        assert len(body["error"]["message"]) < MAX_ERROR_CHARS + 100


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_a_body_over_the_limit_is_refused_before_it_is_read_whole(monkeypatch, endpoint: str) -> None:
    monkeypatch.setattr(server_module, "MAX_BODY_BYTES", 1_000)
    with TestClient(create_app(), raise_server_exceptions=False) as test_client:
        response = test_client.post(PATHS[endpoint], content=encode(request(endpoint, "a" * 2_000)))
    assert response.status_code == 413 and "error" in response.json()


# --- deep nesting: a 400, not a 500 -------------------------------------------------


def _nest(depth: int, kind: str) -> str:
    return ("[" * depth + "]" * depth) if kind == "array" else ('{"a":' * depth + "1" + "}" * depth)


def _deep_bodies(depth: int, kind: str) -> dict[str, str]:
    deep = _nest(depth, kind)
    return {
        "responses input": f'{{"model":"m","input":{deep}}}',
        "responses metadata": f'{{"model":"m","input":"{TASK}","metadata":{deep}}}',
        "chat content": f'{{"model":"m","messages":[{{"role":"user","content":{deep}}}]}}',
        "chat tools": f'{{"model":"m","messages":[{{"role":"user","content":"{TASK}"}}],"tools":{deep}}}',
        "messages content": f'{{"model":"m","max_tokens":5,"messages":[{{"role":"user","content":{deep}}}]}}',
        "messages block": (
            f'{{"model":"m","max_tokens":5,"messages":[{{"role":"user","content":[{{"type":"text","text":{deep}}}]}}]}}'
        ),
    }


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("depth", [300, 900, 100_000])
@pytest.mark.parametrize("kind", ["array", "object"])
def test_a_deeply_nested_body_is_a_400(client, depth: int, kind: str, stream: bool) -> None:
    for where, body in _deep_bodies(depth, kind).items():
        endpoint = where.split()[0]
        if stream:
            body = body[:-1] + ',"stream":true}'
        response = post(client, endpoint, body.encode())
        assert response.status_code == 400, (where, response.status_code, response.text[:300])
        check(response)
        assert "nests deeper" in response.json()["error"]["message"], where


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_deeply_nested_arguments_and_results_are_only_text(client, endpoint: str) -> None:
    """Inside a string (tool-call arguments, a tool's output) deep nesting is just text the model reads."""
    for depth in (300, 900, 100_000):
        deep = _nest(depth, "array")
        check(post(client, endpoint, encode(request(endpoint, call=("run_tests", deep), result=deep))))
        check(post(client, endpoint, encode(request(endpoint, call=("run_tests", {"target": TARGET}), result=deep))))
        envelope = '{"error": ' + deep + "}"
        check(post(client, endpoint, encode(request(endpoint, call=("read_file", {"path": "x"}), result=envelope))))


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_numbers_json_cannot_spell_are_a_400(client, endpoint: str) -> None:
    for number in ("NaN", "Infinity", "-Infinity", "1e999", "1" * 5_000):
        body = json.dumps(request(endpoint)).replace('"stream": false', f'"stream": false, "temperature": {number}')
        response = post(client, endpoint, body.encode())
        assert response.status_code == 400, (number, response.text[:300])
        check(response)


# --- generated bodies: properties ---------------------------------------------------

surrogates = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3)
strings = st.one_of(
    st.text(max_size=20),
    surrogates,
    st.sampled_from(["", "user", "assistant", "tool", "system", "message", "text", TASK, TARGET, *TOOLS]),
    st.builds(lambda a, b: a + b, st.sampled_from([TASK, "E   assert ", "tests/test_x.py:3: "]), surrogates),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), strings)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(strings, inner, max_size=4), max_leaves=12
)


def either(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The right type most of the time, any JSON value some of the time."""
    return st.one_of(good, good, json_values)


arguments = st.one_of(
    st.just(json.dumps({"target": TARGET})),
    st.builds(lambda v: json.dumps({"target": v}), strings),
    st.builds(json.dumps, json_values),
    strings,
)
results = st.one_of(
    strings,
    st.just("exit code 1\nE   assert 1 == 2\ntests/test_x.py:3: AssertionError\n1 failed"),
    st.builds(lambda s: f"FileNotFoundError: {s}", strings),
    st.builds(lambda s: json.dumps({"error": s}), strings),
    st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": either(strings)}), max_size=2),
)
chat_call = st.fixed_dictionaries(
    {"id": either(strings), "type": st.just("function")},
    optional={
        "function": either(st.fixed_dictionaries({"name": either(st.sampled_from(TOOLS)), "arguments": arguments}))
    },
)
chat_message = st.fixed_dictionaries(
    {"role": either(st.sampled_from(["system", "user", "assistant", "tool"]))},
    optional={
        "content": either(st.one_of(strings, results)),
        "tool_calls": either(st.lists(either(chat_call), max_size=2)),
        "tool_call_id": either(strings),
    },
)
responses_item = st.one_of(
    st.fixed_dictionaries(
        {"type": either(st.just("message")), "role": either(st.sampled_from(["user", "assistant"]))},
        optional={"content": either(strings)},
    ),
    st.fixed_dictionaries(
        {"type": st.just("function_call")},
        optional={"call_id": either(strings), "name": either(st.sampled_from(TOOLS)), "arguments": arguments},
    ),
    st.fixed_dictionaries(
        {"type": st.just("function_call_output")}, optional={"call_id": either(strings), "output": either(results)}
    ),
)
anthropic_block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text")}, optional={"text": either(strings)}),
    st.fixed_dictionaries(
        {"type": st.just("tool_use")},
        optional={"id": either(strings), "name": either(st.sampled_from(TOOLS)), "input": json_values},
    ),
    st.fixed_dictionaries(
        {"type": st.just("tool_result")},
        optional={"tool_use_id": either(strings), "content": either(results), "is_error": json_values},
    ),
)
models = either(st.sampled_from(["scripted", "gpt-4.1", ""]))
#: The persona header's value: absent, each persona.
personas = st.one_of(st.none(), st.sampled_from(PERSONAS))
shaped = {
    "chat": st.fixed_dictionaries(
        {"model": models, "messages": either(st.lists(either(chat_message), min_size=1, max_size=4))},
        optional={
            "tools": either(
                st.lists(
                    either(
                        st.fixed_dictionaries({"function": either(st.fixed_dictionaries({"name": either(strings)}))})
                    )
                )
            ),
            "stream_options": either(st.fixed_dictionaries({"include_usage": json_values})),
        },
    ),
    "responses": st.fixed_dictionaries(
        {"model": models, "input": either(st.one_of(strings, st.lists(either(responses_item), max_size=4)))},
        optional={
            "instructions": either(strings),
            "tools": either(
                st.lists(either(st.fixed_dictionaries({"type": st.just("function"), "name": either(strings)})))
            ),
            "metadata": json_values,
            "temperature": json_values,
            "previous_response_id": st.none(),
        },
    ),
    "messages": st.fixed_dictionaries(
        {
            "model": models,
            "max_tokens": either(st.integers(min_value=1, max_value=4096)),
            "messages": either(
                st.lists(
                    either(
                        st.fixed_dictionaries(
                            {
                                "role": either(st.sampled_from(["user", "assistant"])),
                                "content": either(st.one_of(strings, st.lists(either(anthropic_block), max_size=3))),
                            }
                        )
                    ),
                    min_size=1,
                    max_size=4,
                )
            ),
        },
        optional={
            "system": either(strings),
            "tools": either(st.lists(either(st.fixed_dictionaries({"name": either(strings)})))),
        },
    ),
}


@FAST
@given(endpoint=st.sampled_from(ENDPOINTS), body=st.binary(max_size=300))
def test_any_bytes_get_a_json_answer(client, endpoint: str, body: bytes) -> None:
    check(post(client, endpoint, body))


@FAST
@given(
    endpoint=st.sampled_from(ENDPOINTS),
    prefix=st.sampled_from([b'{"model": "', b'{"model": "m", "input": "', b'{"x": ["']),
    junk=st.binary(min_size=1, max_size=20).filter(lambda b: not b.isascii()),
)
def test_bytes_that_are_not_utf8_inside_json_are_a_400(client, endpoint: str, prefix: bytes, junk: bytes) -> None:
    response = post(client, endpoint, prefix + junk + b'"}')
    check(response)


@FAST
@given(endpoint=st.sampled_from(ENDPOINTS), value=json_values)
def test_any_json_value_gets_a_json_answer(client, endpoint: str, value: Any) -> None:
    check(post(client, endpoint, encode(value)))


@settings(FAST)
@given(data=st.data(), endpoint=st.sampled_from(ENDPOINTS), stream=st.booleans(), persona=personas)
def test_request_shaped_json_with_wrong_types_gets_a_200_or_a_400(
    client, data: st.DataObject, endpoint: str, stream: bool, persona: str | None
) -> None:
    body = data.draw(shaped[endpoint])
    body["stream"] = stream
    check(post(client, endpoint, encode(body), persona), stream)


@FAST
@given(
    endpoint=st.sampled_from(ENDPOINTS),
    stream=st.booleans(),
    model=st.builds(lambda s: s + "scripted", st.sampled_from(["", "\udcff", "\ud800x"])),
    persona=personas,
    call=st.tuples(st.sampled_from(TOOLS), st.one_of(st.builds(lambda v: {"target": v, "path": v}, strings), strings)),
    result=strings,
    task=st.one_of(st.just(TASK), st.builds(lambda s: TASK + s, strings)),
)
def test_surrogates_in_a_well_formed_conversation_are_answered(
    client, endpoint: str, stream: bool, model: str, persona: str | None, call: tuple[str, Any], result: str, task: str
) -> None:
    body = request(endpoint, task, call=call, result=result, model=model, stream=stream)
    response = post(client, endpoint, encode(body), persona)
    check(response, stream)
    assert response.status_code == 200


@settings(FAST)
@given(
    endpoint=st.sampled_from(ENDPOINTS),
    stream=st.booleans(),
    where=st.sampled_from(["task", "arguments", "result"]),
    piece=st.sampled_from(["a", "a/", ".", "x.py ", "1 ", " ", "\n", "E ", "tests/test_x.py:", "\udcff", "é"]),
    size=st.integers(min_value=10_000, max_value=N),
)
def test_huge_strings_are_answered_promptly(
    client, endpoint: str, stream: bool, where: str, piece: str, size: int
) -> None:
    text = piece * (size // len(piece))
    body = request(
        endpoint,
        text if where == "task" else TASK,
        call=("run_tests", text if where == "arguments" else {"target": TARGET}),
        result=text if where == "result" else "ok",
        stream=stream,
    )
    started = time.perf_counter()
    check(post(client, endpoint, encode(body)), stream)
    assert time.perf_counter() - started < LONG_REQUEST_BOUND_S


@settings(FAST)
@given(
    endpoint=st.sampled_from(ENDPOINTS),
    depth=st.integers(min_value=1, max_value=3_000),
    kind=st.sampled_from(["array", "object"]),
    where=st.sampled_from(["body", "field", "content"]),
)
def test_nesting_at_any_depth_gets_a_200_or_a_400(client, endpoint: str, depth: int, kind: str, where: str) -> None:
    deep = _nest(depth, kind)
    if where == "body":
        raw = deep
    else:
        body = json.dumps(request(endpoint, "@@DEEP@@" if where == "content" else TASK))
        raw = body.replace('"@@DEEP@@"', deep) if where == "content" else body[:-1] + f', "extra": {deep}}}'
    check(post(client, endpoint, raw.encode()))


@FAST
@given(
    endpoint=st.sampled_from(ENDPOINTS),
    persona=st.sampled_from(PERSONAS),
    name=st.sampled_from(TOOLS),
    arg=strings,
    result=strings,
)
def test_readers_and_replies_take_lone_surrogates(
    endpoint: str, persona: str, name: str, arg: str, result: str
) -> None:
    """The readers, the policy and the reply writers, without the server: a lone surrogate in a tool's arguments
    or its result is read, decided on, and written out (escaped) without an error."""
    body = json.loads(encode(request(endpoint, call=(name, {"target": arg}), result=result)))
    model, read = {
        "chat": (ChatRequest, from_chat),
        "responses": (ResponsesRequest, from_responses),
        "messages": (MessagesRequest, from_messages),
    }[endpoint]
    conv = dataclasses.replace(read(model.model_validate(body)), persona=persona)
    assert conv.results and conv.results[0].content == json.loads(json.dumps(result))  # a pair reads as one
    reply = wire.Reply(Investigator().decide(conv), body["model"], conv.assistant_turns + 1, 10)
    whole = {
        "chat": lambda: wire.chat_response(reply),
        "responses": lambda: wire.responses_response(reply, body),
        "messages": lambda: wire.messages_response(reply),
    }[endpoint]()
    events = {
        "chat": lambda: wire.chat_events(reply, True),
        "responses": lambda: wire.responses_events(reply, body),
        "messages": lambda: wire.messages_events(reply),
    }[endpoint]()
    json.loads(server_module._JSONResponse(whole).body)
    for event in server_module._encoded(events):
        event.encode()


# --- the persona header: a persona, or a 400 that names them ------------------------


@FAST
@given(value=st.one_of(st.sampled_from(PERSONAS), st.text(max_size=80)))
def test_the_persona_header_names_a_persona_or_is_malformed(value: str) -> None:
    if value in PERSONAS:
        assert persona_named(value) == value
        return
    with pytest.raises(MalformedRequest) as refused:
        persona_named(value)
    message = str(refused.value)
    assert message.startswith(PERSONA_HEADER) and all(p in message for p in PERSONAS)
    assert len(message) < 200  # a long value is not echoed whole


def test_a_request_without_the_persona_header_plays_careful() -> None:
    assert persona_named(None) == "careful"


#: What an HTTP client can put in a header value: visible ASCII, spaces only inside.
header_values = st.one_of(
    st.sampled_from(PERSONAS),
    st.sampled_from(PERSONAS).map(str.upper),
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60).map(str.strip),
)


@FAST
@given(endpoint=st.sampled_from(ENDPOINTS), stream=st.booleans(), value=header_values)
def test_any_persona_header_is_played_or_refused_with_the_personas(
    client, endpoint: str, stream: bool, value: str
) -> None:
    response = post(client, endpoint, encode(request(endpoint, stream=stream)), value)
    check(response, stream)
    if value in PERSONAS:
        assert response.status_code == 200
    else:
        assert response.status_code == 400
        message = response.json()["error"]["message"]
        assert PERSONA_HEADER in message and all(p in message for p in PERSONAS)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize(("persona", "first"), [(None, "run_tests"), ("careful", "run_tests"), ("snoop", "read_file")])
def test_the_persona_header_decides_how_the_model_plays(client, endpoint: str, persona: str | None, first: str) -> None:
    """A snoop reaches for secrets first; a request without the header plays careful, whatever its model name."""
    body = request(endpoint, model="scripted-snoop")  # the name chooses nothing
    reply = post(client, endpoint, encode(body), persona).json()
    if endpoint == "chat":
        names = [c["function"]["name"] for c in reply["choices"][0]["message"]["tool_calls"]]
    elif endpoint == "responses":
        names = [item["name"] for item in reply["output"] if item["type"] == "function_call"]
    else:
        names = [block["name"] for block in reply["content"] if block["type"] == "tool_use"]
    assert names[0] == first


# --- stopping: within 2 s of SIGTERM or SIGINT, whatever is in flight ---------------

#: `looplab serve-model` with one change: a task of "slow" takes a minute to decide (the investigator decides the
#: rest), and says so on stdout when it starts.
SERVE = """
import sys, time
import looplab.scenarios.scripted.probes as probes
from looplab.scenarios.scripted.policy import Investigator
from looplab.cli import main

def policy(conv):
    if conv.task == "slow":
        print("deciding", flush=True)
        time.sleep(60)
    return Investigator().decide(conv)

probes.policy_named = lambda spec: policy
sys.exit(main(["serve-model", "--host", "127.0.0.1", "--port", sys.argv[1]]))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lines(stream: Any) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _wait_for_line(lines: queue.Queue[str], text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            if text in lines.get(timeout=left):
                return
        except queue.Empty:
            break
    raise AssertionError(f"no line with {text!r} within {timeout} s")


def _connect(port: int, timeout: float = 10.0, rcvbuf: int | None = None) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket()
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.settimeout(5)
        try:
            sock.connect(("127.0.0.1", port))
            return sock
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _http(path: str, body: bytes, length: int | None = None) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body) if length is None else length}\r\n\r\n"
    )
    return head.encode() + body


@pytest.mark.parametrize(
    "signum", [pytest.param(signal.SIGTERM, marks=pytest.mark.full), signal.SIGINT], ids=["SIGTERM", "SIGINT"]
)
def test_serve_model_stops_within_2_s_with_slow_requests_and_clients_in_flight(signum: int) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sockets: list[socket.socket] = []
    try:
        out = _lines(proc.stdout)
        _wait_for_line(out, "scripted model", timeout=30)
        # A slow policy: the request waits on a decision that takes a minute.
        slow = _connect(port)
        sockets.append(slow)
        slow.sendall(_http("/v1/chat/completions", encode(request("chat", "slow"))))
        _wait_for_line(out, "deciding", timeout=10)
        # A slow client: headers and half the body, then nothing.
        half = _connect(port)
        sockets.append(half)
        half.sendall(_http("/v1/responses", b'{"model": "m", "input": "', length=1_000))
        # A client that never reads: a reply (echoing 16 MB of instructions) larger than the socket buffers.
        deaf = _connect(port, rcvbuf=4096)
        sockets.append(deaf)
        body = request("responses")
        body["instructions"] = "x" * 16_000_000
        deaf.settimeout(10)
        deaf.sendall(_http("/v1/responses", encode(body)))
        time.sleep(1.0)  # the reply is being written, and stalls
        assert proc.poll() is None
        started = time.monotonic()
        proc.send_signal(signum)
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail(f"serve-model still running 10 s after {signal.Signals(signum).name}")
        elapsed = time.monotonic() - started
        # The promise is 2 s (docs/reliability.md); a busy machine may take longer to end any process.
        assert elapsed < 2.0 + BUSY_MACHINE_S, f"serve-model took {elapsed:.2f} s to stop"
        assert code in (0, -signum), (code, proc.stderr.read()[-2000:] if proc.stderr else "")
    finally:
        for sock in sockets:
            sock.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
