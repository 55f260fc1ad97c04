"""The model proxy: a child's requests recorded, gated and paced as in-process, its key never the provider's."""

from __future__ import annotations

import contextlib
import json
import socket
import string
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.types import ASGIApp, Receive, Scope, Send

from looplab.adapters.boundary import proxy_server
from looplab.adapters.boundary.proxy import ModelProxy
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.contract.runner import Probe
from looplab.adapters.session import RunSession
from looplab.scenarios.scripted.faults import BROKEN, HANG, KEEP_ALIVE, HttpFaults
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Guard, Workspace
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


@settings(deadline=None)
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
    monkeypatch.setattr(proxy_server, "MAX_REQUEST_BYTES", 1000)
    with ModelProxy(session) as proxy:
        reply = _post(proxy, "/chat/completions", {**CHAT, "padding": "x" * 1000})
        chunked = _post_chunked(proxy, json.dumps({**CHAT, "padding": "x" * 1000}).encode())
    assert reply.status_code == chunked.status_code == 413 and not session.recorder.calls


def _post_chunked(proxy: ModelProxy, body: bytes, parts: int = 3) -> httpx.Response:
    step = max(1, -(-len(body) // parts))
    pieces = (body[i : i + step] for i in range(0, len(body), step))  # a generator: httpx sends it chunked
    headers = {"authorization": f"Bearer {proxy.token}", "content-type": "application/json"}
    return httpx.post(f"{proxy.openai_base_url}/chat/completions", content=pieces, headers=headers, timeout=10)


@settings(deadline=None)
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


# --- what anyone on loopback may send -------------------------------------------------------------------


def _raw_request(proxy: ModelProxy, head_extra: str, body: bytes) -> tuple[int, bytes]:
    """One POST with `head_extra` header lines and `body` as sent, over a plain socket: the status and the rest."""
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as raw:
        head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n"
        head += f"Authorization: Bearer {proxy.token}\r\n{head_extra}\r\n"
        raw.sendall(head.encode("latin-1") + body)
        raw.shutdown(socket.SHUT_WR)  # a body that says it is longer than what came ends here
        reply = b""
        while chunk := raw.recv(65536):
            reply += chunk
    status = int(reply.split(b" ", 2)[1])
    return status, reply.split(b"\r\n\r\n", 1)[1]


def _not_a_length(text: str) -> bool:
    return not (text.isascii() and text.strip().isdigit())


#: Content-Length values HTTP does not spell (Python's int() would take some: "+5", "1_0", " 5", "٣").
BAD_LENGTHS = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=12).filter(
    lambda t: t.strip() and _not_a_length(t) and t == t.strip()
) | st.sampled_from(["abc", "+5", "-1", "1_0", "0x10", "5 5", "1e3", "\u00b2"])


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(length=BAD_LENGTHS)
def test_a_content_length_that_is_not_a_number_gets_a_400_and_no_traceback(
    model_server: ScriptedModelServer, length: str, capfd: pytest.CaptureFixture[str]
) -> None:
    for session in _session(model_server):
        with ModelProxy(session) as proxy:
            status, body = _raw_request(proxy, f"Content-Length: {length}\r\n", json.dumps(CHAT).encode())
        assert status == 400 and "Content-Length is not a whole number" in json.loads(body)["error"]["message"]
        assert not session.recorder.calls and not session.recorder.failed  # nothing was forwarded
    assert capfd.readouterr().err == ""


def _chunked(parts: list[bytes], sizes: list[str], after: list[bytes]) -> bytes:
    """Chunks as sent: each size line, its data, and what follows the data (a line break, or not)."""
    framed = zip(sizes, parts, after, strict=True)
    return b"".join(b"%s\r\n%s%s" % (size.encode("latin-1"), part, end) for size, part, end in framed)


#: Chunked framings that do not frame: a size that is not hexadecimal, data longer or shorter than its size
#: says, a body that stops before its last chunk.
BAD_CHUNKS = st.one_of(
    st.builds(
        lambda part, size: _chunked([part], [size], [b"\r\n"]) + b"0\r\n\r\n",
        st.binary(min_size=1, max_size=20),
        st.sampled_from(["xyz", "0x5", "+5", "-1", "1_0", " ", "g", "\u00e9"]),
    ),
    st.builds(
        lambda part, extra: _chunked([part + extra], [f"{len(part):x}"], [b"\r\n"]) + b"0\r\n\r\n",
        st.binary(min_size=1, max_size=20),
        st.binary(min_size=1, max_size=5).filter(lambda b: not b.startswith((b"\r\n", b"\n"))),
    ),
    st.builds(
        lambda part, missing: _chunked([part], [f"{len(part) + missing:x}"], [b""]),
        st.binary(min_size=1, max_size=20),
        st.integers(min_value=1, max_value=50),
    ),
    st.builds(lambda part: _chunked([part], [f"{len(part):x}"], [b"\r\n"]), st.binary(min_size=1, max_size=20)),
)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BAD_CHUNKS)
def test_a_malformed_chunked_body_gets_a_400_with_the_reason_and_no_traceback(
    model_server: ScriptedModelServer, body: bytes, capfd: pytest.CaptureFixture[str]
) -> None:
    for session in _session(model_server):
        with ModelProxy(session) as proxy:
            status, reply = _raw_request(proxy, "Transfer-Encoding: chunked\r\n", body)
        assert status == 400, reply
        reason = json.loads(reply)["error"]["message"]
        assert reason.startswith("looplab: ") and ("chunk" in reason or "body" in reason)
        assert not session.recorder.calls and not session.recorder.failed
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    ("head", "reason"),
    [
        ("Content-Length: 5\r\nContent-Length: 6\r\n", "2 different Content-Length headers"),
        ("Transfer-Encoding: gzip, chunked\r\n", "only a chunked Transfer-Encoding"),
        ("Content-Length: 500\r\n", "the body ended after"),
    ],
)
def test_other_framings_it_cannot_read_get_a_400_naming_them(
    session: RunSession, head: str, reason: str, capfd: pytest.CaptureFixture[str]
) -> None:
    with ModelProxy(session) as proxy:
        status, reply = _raw_request(proxy, head, b"{}")
    assert status == 400 and reason in json.loads(reply)["error"]["message"]
    assert capfd.readouterr().err == ""


#: Idle and half-sent connections opened by anyone (no token): well under this process's descriptor limit.
STRANGERS = 300


def test_hundreds_of_idle_connections_do_not_keep_the_child_from_the_model(
    session: RunSession, capfd: pytest.CaptureFixture[str]
) -> None:
    import resource
    import threading
    import time

    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 4 * STRANGERS
    threads_before = threading.active_count()
    with ModelProxy(session) as proxy:
        strangers = []
        try:
            for i in range(STRANGERS):  # nothing, half a request line, or a head that never ends
                sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
                sock.sendall([b"", b"POST /v1/chat/compl", b"POST /v1/chat/completions HTTP/1.1\r\nHost: x"][i % 3])
                strangers.append(sock)
            started = time.monotonic()
            reply = _post(proxy, "/chat/completions", CHAT)
            answered_in = time.monotonic() - started
            held_threads = threading.active_count() - threads_before
        finally:
            for sock in strangers:
                sock.close()
    assert reply.status_code == 200 and answered_in < 2.0
    # Connections are bounded, so are the threads serving them: not one per stranger.
    assert held_threads <= proxy_server.MAX_CONNECTIONS + 10  # and a few a dropped stranger's thread takes to end
    assert capfd.readouterr().err == ""


def test_a_connection_that_never_finishes_its_request_head_is_dropped(
    session: RunSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    monkeypatch.setattr(proxy_server, "HEAD_TIMEOUT_S", 0.5)
    with ModelProxy(session) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as slow:
            started = time.monotonic()
            for byte in b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n":  # one byte every 0.1 s
                try:
                    slow.sendall(bytes([byte]))
                except OSError:  # dropped: the proxy shut the connection
                    break
                slow.settimeout(0.1)
                try:
                    if slow.recv(1) == b"":
                        break
                except TimeoutError:
                    continue
            dropped_after = time.monotonic() - started
        assert _post(proxy, "/chat/completions", CHAT).status_code == 200
    assert dropped_after < 0.5 + 2 * proxy_server.REAP_EVERY_S + 0.5


def test_an_exchange_in_flight_when_the_run_ends_is_recorded_as_it_stood() -> None:
    """A runner that exits while the model is still answering: closing the proxy cuts the exchange and records it
    before the run concludes, rather than leaving it to a read timeout nobody waits for."""
    import threading
    import time

    faults: list[HttpFaults] = []

    def wrap(app: ASGIApp) -> ASGIApp:
        faults.append(HttpFaults(app, then=HANG))
        return faults[0]

    with ScriptedModelServer(wrap=wrap) as server:
        for session in _session(server):
            with ModelProxy(session) as proxy:
                asking = threading.Thread(target=_post, args=(proxy, "/chat/completions", CHAT), daemon=True)
                asking.start()
                waited = time.monotonic()
                while not faults[0].served and time.monotonic() - waited < 5:
                    time.sleep(0.01)
            closed_in = time.monotonic() - waited
            (attempt,) = session.recorder.failed
            assert (
                attempt.status is None and "RunEnded: looplab: the run ended during the model exchange" in attempt.error
            )
            assert session.stop is None and closed_in < 2  # not the deadline's: the run's stop is decided as ever
            asking.join(10)


@pytest.mark.parametrize("through", ["proxy", "in-process transport"])
def test_a_streamed_reply_spends_its_step_from_its_status_on_so_its_tools_meet_the_cutoff(through: str) -> None:
    """A framework may run a tool as soon as its block of a streamed reply arrives, before the reply ends and is
    recorded (Claude Code does): the last allowed call's tools must meet the Guard's cutoff all the same."""
    faults: list[HttpFaults] = []

    def wrap(app: ASGIApp) -> ASGIApp:
        faults.append(HttpFaults(app, then=KEEP_ALIVE))  # a 200 event stream that never ends
        return faults[0]

    with ScriptedModelServer(wrap=wrap) as server:
        for session in _session(server, max_steps=1):
            with contextlib.ExitStack() as stack:
                if through == "proxy":
                    proxy = stack.enter_context(ModelProxy(session))
                    url, client = f"{proxy.openai_base_url}/chat/completions", httpx.Client(timeout=10)
                    headers = {"authorization": f"Bearer {proxy.token}"}
                else:
                    url, client = f"{server.openai_base_url}/chat/completions", session.recorder.http_client(httpx)
                    headers = {"authorization": "Bearer provider-secret"}
                stack.enter_context(client)
                assert session.budget.steps_spent() is None
                with client.stream("POST", url, json={**CHAT, "stream": True}, headers=headers) as reply:
                    assert reply.status_code == 200
                    next(reply.iter_raw())  # the stream has begun; it has not ended
                    assert session.recorder.replies_begun == 1 and not session.recorder.calls
                    tool = session.guard.call("read_file", {"path": "billing/discount.py"}, "call-1")
                assert tool.outcome == "skipped" and "max_steps=1 model calls made" in tool.result
                assert not session.guard.records  # nothing ran
            # Once recorded (an answered call or an attempt that got none, as the transport reads a reply closed
            # early), the reply is counted by what it was and no longer as one arriving.
            assert session.recorder.replies_begun == len(session.recorder.calls)
