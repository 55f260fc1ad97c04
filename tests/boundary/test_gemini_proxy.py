"""Gemini's API through the model proxy a child process reaches its model by: recorded, gated, its key swapped."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from google import genai
from google.genai import errors, types

from looplab.adapters.boundary.proxy import ModelProxy
from looplab.adapters.contract.errors import StopRun
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.contract.runner import Probe
from looplab.adapters.session import RunSession
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Guard, Workspace
from tests.boundary.clients import closed_at_end
from tests.boundary.test_proxy import _Headers
from tests.conftest import FIXTURE_REPO, TASK


def _session(url: str, provider: str = "google", **limits: float) -> Iterator[RunSession]:
    spec = ModelSpec(provider, "scripted", base_url=url, api_key="provider-secret")  # type: ignore[arg-type]
    with Workspace(FIXTURE_REPO) as ws:
        yield RunSession(Guard(ws), Limits(**limits), spec, Probe(knob="test", value=None))


def _child(proxy: ModelProxy) -> genai.Client:
    """google-genai as a child process builds it: the proxy's URL, the run's token as its key, its own HTTP client
    (closed when the test ends)."""
    client = genai.Client(api_key=proxy.token, http_options=types.HttpOptions(base_url=proxy.gemini_base_url))
    closed_at_end(client)
    return client


@pytest.mark.parametrize("stream", [False, True])
def test_a_gemini_call_through_the_proxy_is_recorded_and_the_key_swapped(stream: bool) -> None:
    seen: list[_Headers] = []
    with ScriptedModelServer(wrap=lambda app: seen.append(_Headers(app)) or seen[0]) as server:
        for session in _session(server.gemini_base_url):
            with ModelProxy(session) as proxy:
                client = _child(proxy)
                if stream:
                    chunks = list(client.models.generate_content_stream(model="scripted", contents=TASK))
                    assert chunks[-1].usage_metadata and chunks[-1].usage_metadata.candidates_token_count
                else:
                    assert client.models.generate_content(model="scripted", contents=TASK).text
            (call,) = session.recorder.calls
            assert (call.endpoint, call.streamed, call.finish_reason) == ("generateContent", stream, "STOP")
            assert call.input_tokens > 0 and call.output_tokens > 0 and not call.usage_estimated
            assert call.url.endswith(":streamGenerateContent" if stream else ":generateContent")
    (headers,) = seen[0].seen
    assert headers["x-goog-api-key"] == "provider-secret" and proxy.token not in headers.values()


def test_a_call_past_the_cap_is_refused_in_geminis_shape_and_the_sdk_says_why(
    model_server: ScriptedModelServer,
) -> None:
    for session in _session(model_server.gemini_base_url, max_steps=1):
        with ModelProxy(session) as proxy:
            client = _child(proxy)
            client.models.generate_content(model="scripted", contents=TASK)
            with pytest.raises(errors.ClientError) as raised:
                client.models.generate_content(model="scripted", contents=TASK)
        assert (raised.value.code, raised.value.status) == (403, "PERMISSION_DENIED")
        assert raised.value.message == "looplab refused the request: max_steps=1 model calls made"
        assert len(session.recorder.calls) == 1 and not session.recorder.failed  # the refused call went nowhere


def test_in_process_the_gate_stops_the_run_through_the_sdk(model_server: ScriptedModelServer) -> None:
    """The recording transport inside google-genai: the gate's stop passes the SDK's error handling untouched."""
    for session in _session(model_server.gemini_base_url, max_steps=1):
        http = session.recorder.http_client(httpx)
        client = genai.Client(
            api_key="unused", http_options=types.HttpOptions(base_url=model_server.gemini_base_url, httpx_client=http)
        )
        closed_at_end(http, client)
        client.models.generate_content(model="scripted", contents=TASK)
        with pytest.raises(StopRun) as raised:
            client.models.generate_content(model="scripted", contents=TASK)
        assert "max_steps=1" in raised.value.detail and len(session.recorder.calls) == 1


def test_a_gemini_path_for_a_model_of_another_provider_is_a_404_in_geminis_shape(
    model_server: ScriptedModelServer,
) -> None:
    for session in _session(model_server.openai_base_url, "openai"):
        with ModelProxy(session) as proxy:
            client = _child(proxy)
            with pytest.raises(errors.ClientError) as raised:
                client.models.generate_content(model="scripted", contents=TASK)
        assert (raised.value.code, raised.value.status) == (404, "NOT_FOUND")
        assert "this run's model is openai:scripted" in (raised.value.message or "")
        assert not session.recorder.calls


@pytest.mark.parametrize("token", ["", "wrong"])
def test_a_gemini_request_without_the_runs_token_is_refused(model_server: ScriptedModelServer, token: str) -> None:
    for session in _session(model_server.gemini_base_url):
        with ModelProxy(session) as proxy:
            reply = httpx.post(
                f"{proxy.gemini_base_url}/v1beta/models/scripted:generateContent",
                json={"contents": [{"role": "user", "parts": [{"text": TASK}]}]},
                headers={"x-goog-api-key": token},
                timeout=10,
            )
        assert reply.status_code == 401 and reply.json()["error"]["status"] == "UNAUTHENTICATED"
        assert not session.recorder.calls
