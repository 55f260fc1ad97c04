"""The model boundary for a runner in another process: a recording proxy on loopback.

A runner that is not Python (a TypeScript loop), or a framework that builds its own HTTP client,
cannot take looplab's recording transport. It gets this proxy's base URL instead, and a per-run
token as its API key. Every request goes through the run's own `ModelRecorder`, so it is
recorded, gated (a request past `max_steps`, the deadline or the dollar budget is refused with a
403 whose body names the limit, and is never forwarded) and paced exactly as in-process. The
provider's key stays here: the proxy swaps the run's token for it on the way out.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from adapters.base import PROVIDER_OF_API, StopRun
from adapters.loopback import LoopbackGuard
from adapters.serving import LoopbackServer

if TYPE_CHECKING:
    from adapters.base import RunSession

#: Where each provider's API lives when the model spec names no base URL.
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
#: The three model endpoints, by the path a client asks for (with or without `/v1`).
API_OF_PATH = {"chat/completions": "chat", "responses": "responses", "messages": "messages"}
#: Request headers not passed on: the hop's own, and the run's token (the provider's key replaces it).
DROPPED_REQUEST = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "upgrade", "accept-encoding"}
    | {"authorization", "x-api-key", "proxy-authorization", "origin", "cookie"}
)
DROPPED_RESPONSE = frozenset({"content-length", "connection", "keep-alive", "transfer-encoding", "content-encoding"})


class ModelProxy:
    """One run's recording model proxy on 127.0.0.1; a context manager, gone when the run ends.

    `openai_base_url` and `anthropic_base_url` are what a child's SDK takes as its base URL, and
    `token` its API key (sent as `Authorization: Bearer` or `x-api-key`, as the SDKs do).
    """

    def __init__(self, session: RunSession, token: str | None = None) -> None:
        self.session = session
        self.token = token or secrets.token_urlsafe(32)
        model = session.model
        self._upstream = (model.base_url or DEFAULT_BASE_URLS[model.provider]).rstrip("/")
        self._client: httpx.AsyncClient | None = None

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            # Built in the server's own loop, closed there: its connections belong to that loop.
            plain = self._upstream.startswith("http://")
            timeout = httpx.Timeout(session.limits.max_seconds, connect=min(10.0, session.limits.max_seconds))
            self._client = session.recorder.http_client(httpx, is_async=True, tls=not plain, timeout=timeout)
            try:
                yield
            finally:
                await self._client.aclose()

        routes = [
            Route(f"{prefix}/{path}", self._forward, methods=["POST"]) for prefix in ("/v1", "") for path in API_OF_PATH
        ]
        app = Starlette(routes=routes, lifespan=lifespan)
        self._server = LoopbackServer(
            lambda port: LoopbackGuard(app, self.token, port), lifespan="on", name="looplab-model-proxy"
        )

    @property
    def openai_base_url(self) -> str:
        return f"{self._server.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self._server.url

    def __enter__(self) -> ModelProxy:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    def _target(self, path: str) -> str | None:
        """The upstream URL for a request path, or None when the run's model does not speak that API."""
        suffix = path.removeprefix("/v1").lstrip("/")
        api = API_OF_PATH.get(suffix)
        if api is None or PROVIDER_OF_API[api] != self.session.model.provider:
            return None
        return f"{self._upstream}/{suffix}" if api != "messages" else f"{self._upstream}/v1/messages"

    def _headers(self, request: Request) -> dict[str, str]:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in DROPPED_REQUEST}
        key = self.session.model.key()
        if self.session.model.provider == "anthropic":
            headers["x-api-key"] = key
        else:
            headers["authorization"] = f"Bearer {key}"
        return headers

    async def _forward(self, request: Request) -> Response:
        target = self._target(request.url.path)
        if target is None:
            model = self.session.model.label
            return _error(404, f"looplab: this run's model is {model}; {request.url.path} is not one of its endpoints")
        body = await request.body()
        assert self._client is not None  # the lifespan built it before the first request
        outgoing = self._client.build_request("POST", target, content=body, headers=self._headers(request))
        try:
            reply = await self._client.send(outgoing, stream=True)
        except StopRun as stop:  # the gate refused it: nothing was forwarded
            return _error(403, f"looplab refused the request: {stop.detail}", kind="looplab_limit")
        except httpx.HTTPError as exc:  # recorded as a failed attempt; the child sees a gateway error
            return _error(502, f"looplab could not reach the model: {type(exc).__name__}: {exc}")
        headers = {k: v for k, v in reply.headers.items() if k.lower() not in DROPPED_RESPONSE}
        if not reply.headers.get("content-type", "").startswith("text/event-stream"):
            try:  # a whole reply: one body, no chunked relay
                content = await reply.aread()
            finally:
                await reply.aclose()
            return Response(content, status_code=reply.status_code, headers=headers)
        return StreamingResponse(
            reply.aiter_raw(), status_code=reply.status_code, headers=headers, background=BackgroundTask(reply.aclose)
        )


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    """An error both SDK families read: OpenAI's `{"error": {...}}` with Anthropic's `"type": "error"` beside it."""
    body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message, "code": None}}
    return JSONResponse(body, status_code=status)
