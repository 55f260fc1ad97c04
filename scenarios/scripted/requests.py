"""What reached the scripted model: an ASGI layer that keeps every HTTP request before passing it on unchanged.

`ScriptedModelServer(wrap=log.wrap)` puts a `RequestLog` in front of the model, so a test can check what a framework
sent (its bodies, headers and paths) independently of looplab's recorder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


@dataclass(frozen=True)
class SeenRequest:
    """One request as it arrived: method, path, headers (names lower-case) and raw body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON; None for an empty one."""
        return json.loads(self.body) if self.body else None


class RequestLog:
    """Keeps every HTTP request in `seen`, in arrival order; the app behind it gets each one as it came."""

    def __init__(self) -> None:
        self.seen: list[SeenRequest] = []
        self.app: ASGIApp | None = None

    def wrap(self, app: ASGIApp) -> RequestLog:
        """This log in front of `app` (the scripted model server's `wrap=`)."""
        self.app = app
        return self

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None, "RequestLog.wrap(app) first"
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        while True:  # bounded by the request: its last body message says `more_body` false
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        body = b"".join(m.get("body", b"") for m in messages)
        self.seen.append(SeenRequest(scope["method"], scope["path"], headers, body))
        replay = iter(messages)

        async def again() -> Message:
            return next(replay, None) or await receive()

        await self.app(scope, again, send)

    def posts(self) -> list[SeenRequest]:
        """The POSTs (model requests; a framework's other calls, such as a model lookup, are GETs)."""
        return [r for r in self.seen if r.method == "POST"]

    def bodies(self) -> list[Any]:
        """The POSTs' bodies as JSON."""
        return [r.json() for r in self.posts()]

    def of(self, *methods: str) -> list[Any]:
        """The JSON bodies of the POSTs to these Gemini methods (`models/NAME:METHOD`)."""
        return [r.json() for r in self.posts() if r.path.rpartition(":")[2] in methods]
