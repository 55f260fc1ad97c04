"""HTTP faults in front of the scripted model: error statuses, broken or missing replies, then the model's answers.

An ASGI wrapper, so the same runners meet a failing endpoint the way they would meet a provider's
500 or 429 (a status, a JSON error body in the dialect's shape, and `retry-after` headers that
let the SDKs retry at once), a reply that breaks off (`BROKEN`: headers, a few bytes, then the
connection closes), one that never comes (`HANG`), or one that starts and never ends: a JSON body one byte at
a time (`DRIBBLE`) or an event stream of keep-alive comments (`KEEP_ALIVE`), each piece `DRIBBLE_INTERVAL_S`
apart, so that no single read waits long; `SlowReplies` makes every reply take as long as a real model's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, Literal

from starlette.types import ASGIApp, Receive, Scope, Send

from looplab.adapters.contract.model import gemini_error
from looplab.adapters.contract.wire_apis import GEMINI, MODEL_PATHS

__all__ = ["SlowReplies"]

_GEMINI_PATHS = GEMINI.suffixes
#: A reply that starts (200, headers, a few bytes) and then breaks off.
BROKEN = "broken"
#: A reply that never comes.
HANG = "hang"
#: A 200 JSON reply whose body comes one byte every `DRIBBLE_INTERVAL_S` and never ends.
DRIBBLE = "dribble"
#: A 200 event stream that sends only `: keep-alive` comment lines, every `DRIBBLE_INTERVAL_S`, and never ends.
KEEP_ALIVE = "keep-alive"
Fault = int | Literal["broken", "hang", "dribble", "keep-alive"]
#: Seconds between the pieces of a reply that dribbles.
DRIBBLE_INTERVAL_S = 0.5
#: The most pieces such a reply sends (a minute's worth) before it gives up on a client that still listens.
DRIBBLE_PIECES = 120


class HttpFaults:
    """Answers model requests with `faults` in order (200: pass it on), then with `then` (None: pass on).

    `served` lists what it did with each model request, in order: what the endpoint saw.
    """

    def __init__(self, app: ASGIApp, faults: Sequence[Fault] = (), *, then: Fault | None = None) -> None:
        self.app, self.then = app, then
        self._schedule = list(faults)
        self.served: list[Fault] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].endswith(MODEL_PATHS):
            await self.app(scope, receive, send)
            return
        status = self._schedule.pop(0) if self._schedule else self.then
        if status is None or status == 200:
            self.served.append(200)
            await self.app(scope, receive, send)
            return
        while (await receive()).get("more_body"):  # read the request through before answering
            pass
        self.served.append(status)
        if status == HANG:
            await asyncio.sleep(3600)  # cancelled when the server stops
        elif status in (DRIBBLE, KEEP_ALIVE):
            await _dribble(status, receive, send)
        elif status == BROKEN:
            start = {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4096")]}
            await send(start)
            await send({"type": "http.response.body", "body": b'{"id": "cut', "more_body": True})
            raise ConnectionResetError("injected fault: the reply broke off")  # the server closes the connection
        else:
            await _error(send, status, gemini=scope["path"].endswith(_GEMINI_PATHS))


async def _dribble(fault: Fault, receive: Receive, send: Send) -> None:
    """A 200 reply that never ends, in pieces `DRIBBLE_INTERVAL_S` apart, until the client hangs up."""
    if fault == DRIBBLE:  # a long body announced, then one byte of it at a time
        headers = [(b"content-type", b"application/json"), (b"content-length", b"1000000")]
        pieces = [bytes([byte]) for byte in b'{"id": "' + b"x" * DRIBBLE_PIECES][:DRIBBLE_PIECES]
    else:
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        pieces = [b": keep-alive\n\n"] * DRIBBLE_PIECES
    hung_up = asyncio.ensure_future(receive())  # the next message after the body is the client's disconnect
    try:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for piece in pieces:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            await asyncio.wait([hung_up], timeout=DRIBBLE_INTERVAL_S)
            if hung_up.done():
                return
    finally:
        hung_up.cancel()


async def _error(send: Send, status: int, gemini: bool = False) -> None:
    kind = "rate_limit_error" if status == 429 else "api_error"
    message = f"injected fault: HTTP {status}"
    # One body the OpenAI and Anthropic SDKs both read: OpenAI's {"error": {...}} with Anthropic's "type" beside it;
    # Gemini's own on its paths.
    shape = (
        gemini_error(status, message)
        if gemini
        else {"type": "error", "error": {"type": kind, "message": message, "code": None}}
    )
    body = json.dumps(shape).encode()
    headers: list[tuple[bytes, Any]] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"0"),
        (b"retry-after-ms", b"1"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class SlowReplies:
    """Every model reply waits `seconds` before it starts, as a real model's does; nothing else changes.

    The wait is an asyncio sleep: the server answers any number of requests at once, each after `seconds`.
    """

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app, self.seconds = app, seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].endswith(MODEL_PATHS):
            await asyncio.sleep(self.seconds)
        await self.app(scope, receive, send)
