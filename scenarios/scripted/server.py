"""The scripted model behind a loopback HTTP server, in the three wire formats.

Starlette routes, uvicorn serving, sse-starlette streaming. Runners reach it
the way they reach a provider: only `base_url` changes.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar

import uvicorn
from pydantic import BaseModel, ValidationError
from sse_starlette.sse import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scenarios.scripted import wire
from scenarios.scripted.conversation import (
    ChatRequest,
    Conversation,
    MessagesRequest,
    ResponsesRequest,
    from_chat,
    from_messages,
    from_responses,
)
from scenarios.scripted.policy import Decision, Investigator

MODEL_NAME = "scripted-investigator"
Policy = Callable[[Conversation], Decision]
Dialect = Literal["openai", "anthropic"]
M = TypeVar("M", bound=BaseModel)


class BadRequest(Exception):
    """A request the server refuses with a 400 and this message."""


def _error(dialect: Dialect, message: str, status: int = 400) -> JSONResponse:
    if dialect == "anthropic":
        body: dict[str, Any] = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    else:
        body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
    return JSONResponse(body, status_code=status)


def _parse(model: type[M], raw: bytes) -> tuple[M, dict[str, Any]]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    try:
        return model.model_validate(data), data
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise BadRequest(f"invalid request: {problems}") from None


def _stream(events: Iterator[wire.Event]) -> EventSourceResponse:
    def encoded() -> Iterator[ServerSentEvent]:
        for name, payload in events:
            yield ServerSentEvent(payload if isinstance(payload, str) else json.dumps(payload), event=name, sep="\n")

    return EventSourceResponse(encoded(), ping=None, sep="\n")


def create_app(policy: Policy | None = None) -> Starlette:
    """The ASGI app; `policy` decides each turn (default: the `Investigator`)."""
    decide = policy or Investigator().decide

    def reply_for(conv: Conversation, model: str, raw: bytes) -> wire.Reply:
        return wire.Reply(decide(conv), model or MODEL_NAME, conv.assistant_turns + 1, wire.estimate_tokens(raw))

    def endpoint(
        model: type[M],
        read: Callable[[Any], Conversation],
        dialect: Dialect,
        whole: Callable[[wire.Reply, Any, dict[str, Any]], dict[str, Any]],
        events: Callable[[wire.Reply, Any, dict[str, Any]], Iterator[wire.Event]],
    ) -> Callable[[Request], Any]:
        async def handle(request: Request) -> Response:
            raw = await request.body()
            try:
                req, data = _parse(model, raw)
                # In a worker thread: a slow policy (a stand-in for a slow model) must not block the server.
                reply = await run_in_threadpool(reply_for, read(req), req.model, raw)
            except BadRequest as exc:
                return _error(dialect, str(exc))
            return _stream(events(reply, req, data)) if req.stream else JSONResponse(whole(reply, req, data))

        return handle

    chat = endpoint(
        ChatRequest,
        from_chat,
        "openai",
        lambda reply, req, data: wire.chat_response(reply),
        lambda reply, req, data: wire.chat_events(reply, bool((req.stream_options or {}).get("include_usage"))),
    )
    responses = endpoint(
        ResponsesRequest,
        from_responses,
        "openai",
        lambda reply, req, data: wire.responses_response(reply, data),
        lambda reply, req, data: wire.responses_events(reply, data),
    )
    messages = endpoint(
        MessagesRequest,
        from_messages,
        "anthropic",
        lambda reply, req, data: wire.messages_response(reply),
        lambda reply, req, data: wire.messages_events(reply),
    )

    async def models(request: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "looplab"}]}
        )

    routes = []
    for prefix in ("/v1", ""):
        routes += [
            Route(f"{prefix}/chat/completions", chat, methods=["POST"]),
            Route(f"{prefix}/responses", responses, methods=["POST"]),
            Route(f"{prefix}/messages", messages, methods=["POST"]),
            Route(f"{prefix}/models", models, methods=["GET"]),
        ]
    return Starlette(routes=routes)


class ScriptedModelServer:
    """Serves the scripted model on 127.0.0.1 from a background thread.

    Use as a context manager; `openai_base_url` and `anthropic_base_url` are
    what the SDKs take as `base_url`.
    """

    def __init__(self, policy: Policy | None = None, port: int = 0) -> None:
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
        # without it every keep-alive response waits ~40 ms on a delayed ACK.
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(
            create_app(policy), log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def start(self) -> ScriptedModelServer:
        self._thread.start()
        for _ in range(500):
            if self._server.started:
                return self
            if not self._thread.is_alive():
                break
            threading.Event().wait(0.01)
        raise RuntimeError(f"scripted model server did not start on port {self.port}")

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
        self._sock.close()

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
