"""The scripted model answering late and counting the model requests that reach it: the door a test counts at."""

from __future__ import annotations

import threading

from starlette.types import ASGIApp, Receive, Scope, Send

from looplab.scenarios.scripted.faults import SlowReplies

__all__ = ["LateModel"]


class LateModel:
    """The scripted model (an ASGI app) with each reply `seconds` late, counting the requests it was sent in
    `requests`: nothing of looplab's stands between it and the count."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app, self.requests = SlowReplies(app, seconds), 0
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            with self._lock:
                self.requests += 1
        await self.app(scope, receive, send)
