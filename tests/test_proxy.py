"""The model proxy: a child's requests recorded, gated and paced as in-process, its key never the provider's."""

from __future__ import annotations

import json
import socket
import string
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.types import ASGIApp, Receive, Scope, Send

from adapters import proxy as proxy_module
from adapters.base import Limits, ModelSpec, Probe, RunSession, StopReason
from adapters.proxy import ModelProxy
from scenarios.scripted.faults import BROKEN, HttpFaults
from scenarios.scripted.server import ScriptedModelServer
from shared_tools import Guard, Workspace
from tests.conftest import FIXTURE_REPO

CHAT = {"model": "scripted", "messages": [{"role": "user", "content": "Why does tests/test_invoice.py fail?"}]}
MESSAGES = {**CHAT, "max_tokens": 256}
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]


def _session(server: ScriptedModelServer, provider: str = "openai", **limits: float) -> Iterator[RunSession]:
    url = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    spec = ModelSpec(provider, "scripted", base_url=url, api_key="provider-secret")  # type: ignore[arg-type]
    with Workspace(FIXTURE_REPO) as ws:
        yield RunSession(Guard(ws), Limits(**limits), spec, Probe(knob="test", value=None))


@pytest.fixture
def session(model_server: ScriptedModelServer) -> Iterator[RunSession]:
    yield from _session(model_server)


def _post(proxy: ModelProxy, path: str, body: dict, **headers: str) -> httpx.Response:
    base = proxy.openai_base_url if path != "/messages" else f"{proxy.anthropic_base_url}/v1"
    sent = {"authorization": f"Bearer {proxy.token}", "content-type": "application/json"} | headers
    return httpx.post(base + path, content=json.dumps(body).encode(), headers=sent, timeout=10)


def test_a_request_through_the_proxy_is_recorded_as_one_model_call(session: RunSession) -> None:
    with ModelProxy(session) as proxy:
        reply = _post(proxy, "/chat/completions", CHAT)
    assert reply.status_code == 200 and reply.json()["choices"]
    (call,) = session.recorder.calls
    assert call.endpoint == "chat.completions" and call.request_bytes == len(json.dumps(CHAT).encode())
    assert call.input_tokens > 0 and not call.usage_estimated


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages_pass_through_streamed_or_not(model_server: ScriptedModelServer, stream: bool) -> None:
    for session in _session(model_server, "anthropic"):
        with ModelProxy(session) as proxy:
            reply = _post(proxy, "/messages", {**MESSAGES, "stream": stream}, **{"x-api-key": proxy.token})
        assert reply.status_code == 200
        assert ("event: message_stop" in reply.text) if stream else reply.json()["type"] == "message"
        (call,) = session.recorder.calls
        assert call.endpoint == "messages" and call.streamed is stream


class _Headers:
    """Remembers the headers of every request that reaches the upstream server."""

    def __init__(self, app: ASGIApp) -> None:
        self.app, self.seen, self.names = app, [], []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
            self.names.append([k.decode() for k, _ in scope["headers"]])
        await self.app(scope, receive, send)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_provider_key_replaces_the_runs_token_on_the_way_out(provider: str) -> None:
    upstream: list[_Headers] = []
    with ScriptedModelServer(wrap=lambda app: upstream.append(_Headers(app)) or upstream[0]) as server:
        for session in _session(server, provider):
            with ModelProxy(session) as proxy:
                path, body = ("/chat/completions", CHAT) if provider == "openai" else ("/messages", MESSAGES)
                assert _post(proxy, path, body, **{"x-api-key": proxy.token}).status_code == 200
    (headers,) = upstream[0].seen
    if provider == "openai":
        assert headers["authorization"] == "Bearer provider-secret" and "x-api-key" not in headers
    else:
        assert headers["x-api-key"] == "provider-secret" and "authorization" not in headers
    assert proxy.token not in json.dumps(headers)


@pytest.mark.parametrize("child_sends", [None, "X-Looplab-Persona", "x-looplab-persona"])
def test_the_model_specs_headers_reach_the_upstream_in_place_of_the_childs(child_sends: str | None) -> None:
    """The proxy adds the spec's headers as the in-process transport does; one the child also sends, in any
    case, goes out once, with the spec's value."""
    upstream: list[_Headers] = []
    with ScriptedModelServer(wrap=lambda app: upstream.append(_Headers(app)) or upstream[0]) as server:
        spec = ModelSpec(
            "openai", "scripted", base_url=server.openai_base_url, headers={"x-looplab-persona": "snoop", "x-a": "1"}
        )
        with Workspace(FIXTURE_REPO) as ws:
            session = RunSession(Guard(ws), Limits(), spec, Probe(knob="test", value=None))
            with ModelProxy(session) as proxy:
                extra = {child_sends: "careful"} if child_sends else {}
                reply = _post(proxy, "/chat/completions", {**CHAT, "tools": TOOLS}, **extra)
    assert reply.status_code == 200
    first = reply.json()["choices"][0]["message"]["tool_calls"][0]["function"]
    assert json.loads(first["arguments"]) == {"path": "../../etc/passwd"}  # played as the snoop it was told to be
    (headers,), (names,) = upstream[0].seen, upstream[0].names
    assert headers["x-looplab-persona"] == "snoop" and headers["x-a"] == "1"
    assert names.count("x-looplab-persona") == 1


def test_past_max_steps_a_request_is_refused_with_the_limit_and_not_forwarded(model_server) -> None:
    for session in _session(model_server, max_steps=2):
        with ModelProxy(session) as proxy:
            statuses = [_post(proxy, "/chat/completions", CHAT).status_code for _ in range(2)]
            refused = _post(proxy, "/chat/completions", CHAT)
        assert statuses == [200, 200] and refused.status_code == 403
        assert "max_steps=2" in refused.json()["error"]["message"]
        assert len(session.recorder.calls) == 2 and not session.recorder.failed  # never forwarded
        assert session.stop is not None and session.stop.reason == StopReason.MAX_STEPS


def test_an_endpoint_of_the_other_provider_is_refused(session: RunSession) -> None:
    with ModelProxy(session) as proxy:
        reply = _post(proxy, "/messages", MESSAGES)
    assert reply.status_code == 404 and "openai:scripted" in reply.json()["error"]["message"]
    assert not session.recorder.calls


@settings(max_examples=25, deadline=None)
@given(token=st.text(alphabet=string.ascii_letters + string.digits + "-_.~+/=", max_size=64))
def test_a_request_without_the_runs_token_is_refused(model_server: ScriptedModelServer, token: str) -> None:
    for session in _session(model_server):
        with ModelProxy(session) as proxy:
            if token == proxy.token:
                return
            headers = {"authorization": f"Bearer {token}", "x-api-key": token} if token else {}
            reply = httpx.post(f"{proxy.openai_base_url}/chat/completions", json=CHAT, headers=headers, timeout=10)
        assert reply.status_code == 401 and not session.recorder.calls


@pytest.mark.parametrize("header", [{"host": "evil.example"}, {"origin": "http://evil.example"}, {"origin": "null"}])
def test_a_foreign_host_or_origin_is_refused(session: RunSession, header: dict[str, str]) -> None:
    with ModelProxy(session) as proxy:
        if "host" in header:
            header = {"host": f"{header['host']}:{proxy.openai_base_url.rsplit(':', 1)[1].split('/')[0]}"}
        reply = _post(proxy, "/chat/completions", CHAT, **header)
    assert reply.status_code == 403 and not session.recorder.calls


def test_the_proxy_listens_on_loopback_only_and_is_gone_when_the_run_ends(session: RunSession) -> None:
    with ModelProxy(session) as proxy:
        url = proxy.openai_base_url
        assert url.startswith("http://127.0.0.1:")
    with pytest.raises(httpx.TransportError):
        httpx.post(url + "/chat/completions", json=CHAT, timeout=2)


# --- faults on either side -----------------------------------------------------------------------------


def test_an_upstream_error_is_relayed_and_recorded_as_a_failed_attempt() -> None:
    with ScriptedModelServer(wrap=lambda app: HttpFaults(app, [500, BROKEN])) as server:
        for session in _session(server):
            with ModelProxy(session) as proxy:
                failed = _post(proxy, "/chat/completions", CHAT)
                broken = _post(proxy, "/chat/completions", CHAT)
                answered = _post(proxy, "/chat/completions", CHAT)
            assert (failed.status_code, broken.status_code, answered.status_code) == (500, 502, 200)
            assert "injected fault: HTTP 500" in failed.json()["error"]["message"]
            assert "broke off" in broken.json()["error"]["message"]
            (call,) = session.recorder.calls
            assert [(a.status, a.attempt) for a in call.failed_attempts] == [(500, 1), (200, 2)]
            assert "broke off" in call.failed_attempts[1].error


def test_an_unreachable_model_is_a_gateway_error_and_an_unanswered_attempt() -> None:
    with socket.socket() as closed:  # a port that was free a moment ago: nothing listens there
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    spec = ModelSpec("openai", "scripted", base_url=f"http://127.0.0.1:{port}/v1", api_key="provider-secret")
    with Workspace(FIXTURE_REPO) as ws:
        session = RunSession(Guard(ws), Limits(), spec, Probe(knob="test", value=None))
        with ModelProxy(session) as proxy:
            reply = _post(proxy, "/chat/completions", CHAT)
    assert reply.status_code == 502 and "could not reach the model" in reply.json()["error"]["message"]
    # A server's error, which clients retry (DSPy reads the type: an `invalid_request_error` it would not).
    assert reply.json()["error"]["type"] == "api_error"
    (attempt,) = session.recorder.failed
    assert attempt.status is None and "ConnectionRefusedError" in attempt.error and not session.recorder.calls


def test_a_child_that_hangs_up_mid_stream_leaves_the_proxy_serving(session: RunSession) -> None:
    with ModelProxy(session) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port)) as raw:
            body = json.dumps({**CHAT, "stream": True}).encode()
            head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n"
            head += f"Authorization: Bearer {proxy.token}\r\nContent-Length: {len(body)}\r\n\r\n"
            raw.sendall(head.encode() + body)
            assert raw.recv(12) == b"HTTP/1.1 200"  # then hang up with the stream unread
        after = _post(proxy, "/chat/completions", CHAT)
    assert after.status_code == 200
    assert len(session.recorder.calls) == 2 and not session.recorder.failed


def test_a_body_over_the_limit_is_refused_unread(session: RunSession, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proxy_module, "MAX_REQUEST_BYTES", 1000)
    with ModelProxy(session) as proxy:
        reply = _post(proxy, "/chat/completions", {**CHAT, "padding": "x" * 1000})
        chunked = _post_chunked(proxy, json.dumps({**CHAT, "padding": "x" * 1000}).encode())
    assert reply.status_code == chunked.status_code == 413 and not session.recorder.calls


def _post_chunked(proxy: ModelProxy, body: bytes, parts: int = 3) -> httpx.Response:
    step = max(1, -(-len(body) // parts))
    pieces = (body[i : i + step] for i in range(0, len(body), step))  # a generator: httpx sends it chunked
    headers = {"authorization": f"Bearer {proxy.token}", "content-type": "application/json"}
    return httpx.post(f"{proxy.openai_base_url}/chat/completions", content=pieces, headers=headers, timeout=10)


@settings(max_examples=30, deadline=None)
@given(body=st.binary(max_size=2000) | st.builds(lambda p: json.dumps({**CHAT, "pad": p}).encode(), st.text()))
def test_any_body_gets_the_same_answer_through_the_proxy_as_direct(
    model_server: ScriptedModelServer, body: bytes
) -> None:
    direct = httpx.post(
        f"{model_server.openai_base_url}/chat/completions", content=body, headers={"authorization": "Bearer x"}
    )
    for session in _session(model_server):
        with ModelProxy(session) as proxy:
            relayed = _post_chunked(proxy, body) if len(body) % 2 else _post_raw(proxy, body)
        assert relayed.status_code == direct.status_code
        assert (relayed.json()["choices"][0]["message"]["role"] if direct.status_code == 200 else relayed.content) == (
            direct.json()["choices"][0]["message"]["role"] if direct.status_code == 200 else direct.content
        )
        recorded = session.recorder.calls or session.recorder.failed
        assert len(recorded) == 1 and recorded[0].request_bytes == len(body)


def _post_raw(proxy: ModelProxy, body: bytes) -> httpx.Response:
    headers = {"authorization": f"Bearer {proxy.token}", "content-type": "application/json"}
    return httpx.post(f"{proxy.openai_base_url}/chat/completions", content=body, headers=headers, timeout=10)
