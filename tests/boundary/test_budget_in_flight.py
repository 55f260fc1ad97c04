"""Agents that send at once share one budget: a request counts against it from the moment it goes, not only once
it is answered, so children running side by side cannot pass `max_steps` or `max_tokens` together.

Counted at the scripted model's own door, in front of which nothing of looplab's runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looplab.adapters.boundary.budget import forecast_input_tokens
from looplab.adapters.boundary.proxy import ModelProxy
from looplab.adapters.contract.errors import StopRun
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.contract.runner import Probe
from looplab.adapters.session import RunSession
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Guard, Workspace
from tests.conftest import FIXTURE_REPO
from tests.late_model import LateModel
from tests.tiers import scaled_examples

#: Each reply this late: every sender's request is out before the first is answered.
REPLY_S = 0.3
CHAT = {"model": "scripted", "messages": [{"role": "user", "content": "Why does tests/test_invoice.py fail?"}]}
BODY = json.dumps(CHAT).encode()


@contextlib.contextmanager
def _session(server: ScriptedModelServer, limits: Limits) -> Iterator[RunSession]:
    spec = ModelSpec("openai", "scripted", base_url=server.openai_base_url, api_key="k")  # type: ignore[arg-type]
    with Workspace(FIXTURE_REPO) as ws:
        yield RunSession(Guard(ws), limits, spec, Probe(knob="test", value=None))


def _send_at_once(senders: int, send: Callable[[], str]) -> list[str]:
    """`senders` threads each sending one request, released together; what each got: "answered", or the stop."""
    start, got = threading.Barrier(senders), [""] * senders

    def one(n: int) -> None:
        start.wait(timeout=10)
        try:
            got[n] = send()
        except StopRun as stop:  # the gate refused it in this sender's thread
            got[n] = f"refused: {stop.detail}"

    threads = [threading.Thread(target=one, args=(n,)) for n in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return got


@settings(max_examples=scaled_examples(0.2), deadline=None)
@given(
    max_steps=st.integers(1, 3),
    extra=st.integers(1, 3),
    via=st.sampled_from(["recording client", "proxy"]),
    by_tokens=st.booleans(),
)
def test_requests_sent_at_once_never_pass_the_budget_together(
    max_steps: int, extra: int, via: str, by_tokens: bool
) -> None:
    door: list[LateModel] = []
    per_request = forecast_input_tokens(len(BODY))
    # The same bound said two ways: N model calls, or the tokens of N requests' input (and none of their output).
    limits = Limits(max_tokens=per_request * max_steps + 1) if by_tokens else Limits(max_steps=max_steps)
    with ScriptedModelServer(wrap=lambda app: door.append(LateModel(app, REPLY_S)) or door[-1]) as server:
        with _session(server, limits) as session:
            if via == "proxy":
                with ModelProxy(session) as proxy:
                    url, headers = (
                        f"{proxy.openai_base_url}/chat/completions",
                        {"authorization": f"Bearer {proxy.token}"},
                    )

                    def send() -> str:
                        reply = httpx.post(url, content=BODY, headers=headers, timeout=20)
                        return (
                            "answered" if reply.status_code == 200 else f"refused: {reply.json()['error']['message']}"
                        )

                    got = _send_at_once(max_steps + extra, send)
            else:
                with session.recorder.http_client(httpx, tls=False) as client:

                    def send() -> str:
                        client.post(f"{server.openai_base_url}/chat/completions", content=BODY).raise_for_status()
                        return "answered"

                    got = _send_at_once(max_steps + extra, send)
            assert door[0].requests == len(session.recorder.calls) == got.count("answered") == max_steps, got
            limit = "max_tokens" if by_tokens else "max_steps"
            assert all(g.startswith("refused: ") and limit in g for g in got if g != "answered"), got
            assert session.recorder.in_flight.requests == 0  # every request answered or refused holds nothing


def test_a_request_that_gets_no_answer_gives_its_step_back() -> None:
    """A failed attempt does not count against max_steps: once it fails, the step it held is free again."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nobody = closed.getsockname()[1]  # a port nothing listens on once this socket is closed
    with ScriptedModelServer() as server:
        with _session(server, Limits(max_steps=1)) as session:
            with session.recorder.http_client(httpx, tls=False) as client:
                with pytest.raises(httpx.ConnectError):
                    client.post(f"http://127.0.0.1:{nobody}/v1/chat/completions", content=BODY)
                assert session.recorder.in_flight.requests == 0 and len(session.recorder.failed) == 1
                assert client.post(f"{server.openai_base_url}/chat/completions", content=BODY).status_code == 200
            assert session.budget.refusal() == (StopReason.MAX_STEPS, "max_steps=1 model calls made")


async def _send_side_by_side(client: httpx.AsyncClient, url: str, senders: int) -> list[str]:
    """`senders` requests sent at once on one event loop, as a framework that cancels the siblings of a call that
    raises runs them (Microsoft Agent Framework's concurrent function calls): what each got."""

    async def one() -> str:
        (await client.post(url, content=BODY)).raise_for_status()
        return "answered"

    tasks = [asyncio.ensure_future(one()) for _ in range(senders)]
    try:
        return list(await asyncio.gather(*tasks))
    except StopRun:
        for task in tasks:
            task.cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        return [
            "answered" if d == "answered" else "cancelled" if isinstance(d, asyncio.CancelledError) else "refused"
            for d in done
        ]


@settings(max_examples=scaled_examples(0.2), deadline=None)
@given(max_steps=st.integers(1, 3), extra=st.integers(1, 3))
def test_a_refused_async_request_waits_for_the_requests_under_way_so_a_cancelling_framework_keeps_their_replies(
    max_steps: int, extra: int
) -> None:
    door: list[LateModel] = []
    with ScriptedModelServer(wrap=lambda app: door.append(LateModel(app, REPLY_S)) or door[-1]) as server:
        with _session(server, Limits(max_steps=max_steps)) as session:

            async def main() -> list[str]:
                async with session.recorder.http_client(httpx, is_async=True, tls=False) as client:
                    url = f"{server.openai_base_url}/chat/completions"
                    return await _send_side_by_side(client, url, max_steps + extra)

            got = asyncio.run(main())
            assert got.count("answered") == len(session.recorder.calls) == door[0].requests == max_steps, got
            assert session.recorder.failed == [] and session.recorder.in_flight.requests == 0


def test_a_request_cancelled_under_way_is_an_attempt_that_got_no_answer_and_holds_nothing() -> None:
    door: list[LateModel] = []
    with ScriptedModelServer(wrap=lambda app: door.append(LateModel(app, REPLY_S)) or door[-1]) as server:
        with _session(server, Limits(max_steps=2)) as session:

            async def main() -> None:
                async with session.recorder.http_client(httpx, is_async=True, tls=False) as client:
                    url = f"{server.openai_base_url}/chat/completions"
                    sent = asyncio.ensure_future(client.post(url, content=BODY))
                    while not door[0].requests:  # bounded by the wait_for below
                        await asyncio.sleep(0.005)
                    sent.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await sent

            asyncio.run(asyncio.wait_for(main(), timeout=10))
            assert session.recorder.calls == [] and session.recorder.in_flight.requests == 0
            assert [a.error.split(":")[0] for a in session.recorder.failed] == ["CancelledError"]
