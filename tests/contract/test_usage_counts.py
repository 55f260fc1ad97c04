"""A reply's token counts cannot lower what a budget has spent: every wire API reads them the same way.

A count that is missing reads 0; one that is negative, not an integer or past `MAX_REPORTED_TOKENS` makes the
reply's usage unusable, and the recorder estimates the call's tokens from its bytes, as it does for a reply that
reports none, and says so (`usage_estimated`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from looplab.adapters.boundary.wire import parse_exchange
from looplab.adapters.boundary.wire_reply import MAX_REPORTED_TOKENS
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.pricing import Pricing
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.testing.runs import run_runner

GOOD = st.integers(0, MAX_REPORTED_TOKENS)
BAD = (
    st.integers(max_value=-1)
    | st.integers(min_value=MAX_REPORTED_TOKENS + 1)
    | st.floats(allow_nan=True)
    | st.text(max_size=5)
    | st.booleans()
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)
COUNT = GOOD | BAD | st.none()


def _reply(endpoint: str, counts: dict[str, Any]) -> bytes:
    """A whole reply of `endpoint` whose usage holds `counts` (under the API's own names)."""
    if endpoint == "chat.completions":
        usage = {"prompt_tokens": counts["input"], "completion_tokens": counts["output"]}
        usage["prompt_tokens_details"] = {"cached_tokens": counts["cached"]}
        body: dict[str, Any] = {"choices": [{"message": {"content": "done"}, "finish_reason": "stop"}]}
        body["usage"] = usage
    elif endpoint == "responses":
        usage = {"input_tokens": counts["input"], "output_tokens": counts["output"]}
        usage["input_tokens_details"] = {"cached_tokens": counts["cached"]}
        body = {"object": "response", "status": "completed", "output": [], "usage": usage}
    elif endpoint == "messages":
        usage = {"input_tokens": counts["input"], "output_tokens": counts["output"]}
        usage["cache_read_input_tokens"] = counts["cached"]
        body = {"type": "message", "content": [{"type": "text", "text": "done"}], "usage": usage}
    else:
        usage = {"promptTokenCount": counts["input"], "candidatesTokenCount": counts["output"]}
        usage["cachedContentTokenCount"] = counts["cached"]
        body = {"candidates": [{"content": {"parts": [{"text": "done"}]}}], "usageMetadata": usage}
    return json.dumps(body).encode()


def _usable(value: Any) -> bool:
    return value is None or (type(value) is int and 0 <= value <= MAX_REPORTED_TOKENS)


@given(
    endpoint=st.sampled_from(["chat.completions", "responses", "messages", "generateContent"]),
    counts=st.fixed_dictionaries({"input": COUNT, "output": COUNT, "cached": COUNT}),
)
def test_every_wire_api_reads_a_count_that_is_not_a_non_negative_integer_as_unusable(
    endpoint: str, counts: dict[str, Any]
) -> None:
    info = parse_exchange(endpoint, _reply(endpoint, counts))
    read = (info.input_tokens, info.output_tokens, info.cached_input_tokens, info.cache_write_tokens)
    assert all(type(n) is int and 0 <= n <= 3 * MAX_REPORTED_TOKENS for n in read)
    assert info.usage_unusable is not all(map(_usable, counts.values()))


class _ReportedUsage:
    """Every model reply's usage replaced by `usage` (Chat Completions, whole replies)."""

    def __init__(self, app: ASGIApp, usage: dict[str, Any]) -> None:
        self.app, self.usage = app, usage

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            await self.app(scope, receive, send)
            return
        held: list[Message] = []

        async def hold(message: Message) -> None:
            held.append(message)

        await self.app(scope, receive, hold)
        start, body = held[0], b"".join(m.get("body", b"") for m in held[1:])
        reply = json.loads(body)
        reply["usage"] = self.usage
        body = json.dumps(reply).encode()
        headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
        await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": -1_000_000, "completion_tokens": 10},
        {"prompt_tokens": "12", "completion_tokens": 10},
        {"prompt_tokens": 12.5, "completion_tokens": 10},
    ],
    ids=["negative", "text", "float"],
)
@pytest.mark.parametrize("budget", [{"max_tokens": 2_500}, {"max_cost_usd": 0.0025}], ids=["tokens", "cost"])
def test_a_reply_reporting_unusable_usage_still_spends_the_budget(usage: dict[str, Any], budget: dict) -> None:
    """A negative count once took the budget back (8 requests, stopped by max_steps); a non-integer one ended the
    run with a ValidationError. Both now count as a reply without usage: its tokens estimated from its bytes."""
    with ScriptedModelServer(wrap=lambda app: _ReportedUsage(app, usage)) as server:
        limits = Limits(max_seconds=30, max_steps=8, **budget)
        result = run_runner("handrolled", server, limits, api="chat", pricing=Pricing(1.0, 1.0))
    calls = [s.model_call for s in result.trace.steps]
    assert result.stop_reason == StopReason.BUDGET, (result.stop_reason, result.stop_detail)
    assert calls and all(c.usage_estimated and c.input_tokens > 0 for c in calls)
    assert result.totals.model_calls < 8
