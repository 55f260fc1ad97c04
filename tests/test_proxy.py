"""The model proxy: a child's requests recorded, gated and paced as in-process, its key never the provider's."""

from __future__ import annotations

import json
import string
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.types import ASGIApp, Receive, Scope, Send

from adapters.base import Limits, ModelSpec, Probe, RunSession, StopReason
from adapters.proxy import ModelProxy
from scenarios.scripted.server import ScriptedModelServer
from shared_tools import Guard, Workspace
from tests.conftest import FIXTURE_REPO

CHAT = {"model": "scripted", "messages": [{"role": "user", "content": "Why does tests/test_invoice.py fail?"}]}
MESSAGES = {**CHAT, "max_tokens": 256}


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
        self.app, self.seen = app, []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
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


@pytest.mark.parametrize(
    "header", [{"host": "evil.example"}, {"origin": "http://evil.example"}, {"origin": "null"}]
)
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
