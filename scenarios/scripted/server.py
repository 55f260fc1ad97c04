"""The scripted model behind a loopback HTTP server, in the four wire formats.

Starlette routes, uvicorn serving, sse-starlette streaming. Runners reach it
the way they reach a provider: only `base_url` changes.

Whatever a client sends, the answer is a reply or the dialect's error JSON: a
request that is not what the endpoint takes (not JSON, the wrong shape, nested
too deep, numbers JSON has no spelling for) is a 400, a body over
`MAX_BODY_BYTES` a 413, and only a bug in the policy a 500. The persona to play
comes with each request, in its `x-looplab-persona` header (none: `careful`; an
unknown one: a 400 naming the personas), and the seed of a persona's chance in
its `x-looplab-seed` header (none: ""; one over `MAX_SEED_CHARS`: a 400).
Everything after the body is read runs in a daemon thread that a stopping server
abandons, so neither a slow policy nor a slow client holds up shutdown beyond
the graceful bound uvicorn is given (`GRACEFUL_SHUTDOWN_S`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Literal, TypeVar

import anyio.to_thread
import uvicorn
from pydantic import BaseModel, ValidationError
from sse_starlette.sse import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from looplab.adapters.contract.errors import LooplabException
from looplab.adapters.contract.model import ModelServerUrls, gemini_error
from looplab.adapters.contract.wire_apis import GEMINI, WIRE_API
from looplab.scenarios.scripted import fields, wire
from looplab.scenarios.scripted.conversation import (
    MAX_NESTING,
    PERSONA_HEADER,
    SEED_HEADER,
    ChatRequest,
    Conversation,
    GeminiRequest,
    MalformedRequest,
    MessagesRequest,
    ResponsesRequest,
    from_chat,
    from_gemini,
    from_messages,
    from_responses,
    nested_deeper_than,
    persona_named,
    seed_named,
)
from looplab.scenarios.scripted.policy import Decision, Investigator
from looplab.shared_tools.daemon import DaemonPool
from looplab.shared_tools.records import preview

__all__ = ["GRACEFUL_SHUTDOWN_S", "ScriptedModelServer", "create_app"]

MODEL_NAME = "scripted-investigator"
Policy = Callable[[Conversation], Decision]
Dialect = Literal["openai", "anthropic", "gemini"]
#: The two `generateContent` methods, after the model in a Gemini URL (`models/NAME:METHOD`): whether each streams.
GEMINI_METHODS = dict(GEMINI.methods)
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

#: Seconds that requests in flight get to finish once the server is told to stop; then they are cancelled.
GRACEFUL_SHUTDOWN_S = 1
#: A larger request body is refused with a 413 as soon as it is seen to be larger (a provider's limit is lower).
MAX_BODY_BYTES = 64 * 1024 * 1024
#: An error message quotes at most this many characters of whatever it quotes.
MAX_ERROR_CHARS = 500

log = logging.getLogger(__name__)


class BadRequest(LooplabException):
    """A request the server refuses with a 400 and this message."""


class TooLarge(LooplabException):
    """A request body over `MAX_BODY_BYTES`."""


class _JSONResponse(JSONResponse):
    """Starlette's JSON response, except that a lone surrogate a request carried (JSON may spell one, `"\\udcff"`,
    and some replies echo request text) goes back escaped instead of failing to encode as UTF-8."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


def _error(dialect: Dialect, message: str, status: int = 400) -> JSONResponse:
    message = preview(message, MAX_ERROR_CHARS)
    if dialect == "gemini":
        return _JSONResponse(gemini_error(status, message), status_code=status)
    if dialect == "anthropic":
        kind = {413: "request_too_large", 500: "api_error"}.get(status, "invalid_request_error")
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        kind = "server_error" if status >= 500 else "invalid_request_error"
        body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return _JSONResponse(body, status_code=status)


def _not_a_number(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number out of range: {text[:40]}")
    return value


def _parse(model: type[M], raw: bytes) -> tuple[M, dict[str, Any]]:
    """The body validated as `model`, and as plain JSON; anything else is a `BadRequest`.

    Python's JSON reader also takes NaN and Infinity (and overflows 1e999 to infinity); JSON has no such
    numbers, and a reply that echoes one could not be written, so they are refused here.
    """
    try:
        data = json.loads(raw, parse_constant=_not_a_number, parse_float=_finite)
    except RecursionError:
        raise BadRequest(f"request body nests deeper than {MAX_NESTING} levels") from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    if nested_deeper_than(data, MAX_NESTING):
        raise BadRequest(f"request body nests deeper than {MAX_NESTING} levels")
    try:
        return model.model_validate(data), data
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise BadRequest(f"invalid request: {problems}") from None


def _encoded(events: Iterator[wire.Event]) -> list[ServerSentEvent]:
    """The whole stream, written out before the response starts: a failure is still a status, not a cut stream."""
    return [
        ServerSentEvent(payload if isinstance(payload, str) else json.dumps(payload), event=name, sep="\n")
        for name, payload in events
    ]


def _stream(events: list[ServerSentEvent]) -> EventSourceResponse:
    async def send() -> AsyncIterator[ServerSentEvent]:
        for event in events:
            yield event

    return EventSourceResponse(send(), ping=None, sep="\n")


async def _body(request: Request) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


_POOL = DaemonPool("scripted-model")


async def _in_daemon_thread(fn: Callable[[bytes], T], arg: bytes) -> T:
    """`fn(arg)` in a daemon worker thread, awaited; if the waiting request is cancelled the work is abandoned.

    Not starlette's `run_in_threadpool`: its wait cannot be cancelled (a stopping server would wait for a slow
    policy to finish) and its threads are not daemons (the interpreter would wait for them at exit). Bounded
    by the same capacity limiter.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():  # the request was cancelled meanwhile
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        outcome: tuple[T | None, BaseException | None]
        try:
            outcome = (fn(arg), None)
        except BaseException as exc:  # handed to the request, which raises it
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop is closed: the server stopped and nobody waits for this answer
            pass

    async with anyio.to_thread.current_default_thread_limiter():
        _POOL.submit(work)
        return await done


def create_app(policy: Policy | None = None) -> Starlette:
    """The ASGI app; `policy` decides each turn (default: the `Investigator`)."""
    decide = policy or Investigator().decide

    def endpoint(
        model: type[M],
        read: Callable[[Any], Conversation],
        dialect: Dialect,
        whole: Callable[[wire.Reply, Any, dict[str, Any]], dict[str, Any] | list[dict[str, Any]]],
        events: Callable[[wire.Reply, Any, dict[str, Any]], Iterator[wire.Event]],
        fielded: Callable[[Any], fields.FieldRequest | None] = lambda req: None,
        located: Callable[[Request], dict[str, Any]] = lambda request: {},
    ) -> Callable[[Request], Any]:
        """`located` reads what a format puts in the URL rather than the body (Gemini's model and method):
        fields set on the parsed request; it raises `BadRequest` for a URL the format does not take."""

        def answer(
            raw: bytes, headers: tuple[str | None, str | None], where: dict[str, Any]
        ) -> Response | list[ServerSentEvent]:
            """The reply to a body (the events, for a stream), with the persona and seed `headers`: parsing, reading
            and deciding can each take a while on a large request, and a policy may be slow on purpose (a stand-in
            for a slow model)."""
            try:
                persona, seed = persona_named(headers[0]), seed_named(headers[1])
                req, data = _parse(model, raw)
                req = req.model_copy(update=where) if where else req
                field_request = fielded(req)  # DSPy's text-field protocol: the decision goes back as fields
                if field_request:
                    field_request = dataclasses.replace(field_request, persona=persona)
                    conv = field_request.conversation()
                else:
                    conv = dataclasses.replace(read(req), persona=persona, seed=seed)
            except (BadRequest, MalformedRequest) as exc:
                return _error(dialect, str(exc))
            if field_request:  # the field protocol rebuilds its conversations as it decides: each gets the seed
                decision = fields.reply(field_request, lambda asked: decide(dataclasses.replace(asked, seed=seed)))
            else:
                decision = decide(conv)
            reply = wire.Reply(decision, req.model or MODEL_NAME, conv.assistant_turns + 1, wire.estimate_tokens(raw))
            return _encoded(events(reply, req, data)) if req.stream else _JSONResponse(whole(reply, req, data))

        async def handle(request: Request) -> Response:
            try:
                raw = await _body(request)
            except TooLarge:
                return _error(dialect, f"request body is larger than {MAX_BODY_BYTES} bytes", 413)
            except ClientDisconnect:  # the client hung up before its request was read (a cancelled run): nobody to tell
                return Response(status_code=499)
            headers = request.headers.get(PERSONA_HEADER), request.headers.get(SEED_HEADER)
            try:
                where = located(request)
            except BadRequest as exc:
                return _error(dialect, str(exc), 404)
            try:
                reply = await _in_daemon_thread(lambda body: answer(body, headers, where), raw)
            except Exception as exc:  # a bug in the policy or the server, not in the request
                log.exception("scripted model failed on %s", request.url.path)
                return _error(dialect, f"the scripted model failed: {type(exc).__name__}: {exc}", 500)
            return _stream(reply) if isinstance(reply, list) else reply

        return handle

    chat = endpoint(
        ChatRequest,
        from_chat,
        "openai",
        lambda reply, req, data: wire.chat_response(reply),
        lambda reply, req, data: wire.chat_events(reply, bool((req.stream_options or {}).get("include_usage"))),
        fields.from_chat,
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
        fields.from_messages,
    )

    gemini = endpoint(
        GeminiRequest,
        from_gemini,
        "gemini",
        lambda reply, req, data: wire.gemini_chunks(reply) if req.json_array else wire.gemini_response(reply),
        lambda reply, req, data: wire.gemini_events(reply),
        fields.from_gemini,
        located=_gemini_target,
    )

    async def models(request: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "looplab"}]}
        )

    routes = []
    for prefix in ("/v1", ""):
        routes += [
            Route(f"{prefix}/{WIRE_API['chat'].path}", chat, methods=["POST"]),
            Route(f"{prefix}/{WIRE_API['responses'].path}", responses, methods=["POST"]),
            Route(f"{prefix}/{WIRE_API['messages'].path}", messages, methods=["POST"]),
            Route(f"{prefix}/models", models, methods=["GET"]),
        ]
    for prefix in ("/v1beta", "/v1", ""):
        routes.append(Route(f"{prefix}/models/{{target}}", gemini, methods=["POST"]))
    return Starlette(routes=routes)


def _gemini_target(request: Request) -> dict[str, Any]:
    """The model and method of a Gemini URL (`models/NAME:generateContent`, or `:streamGenerateContent`, which
    streams server-sent events with `?alt=sse` and one JSON array of the chunks without it)."""
    name, _, method = request.path_params["target"].rpartition(":")
    if method not in GEMINI_METHODS or not name:
        known = " or ".join(f"models/NAME{suffix}" for suffix in GEMINI.suffixes)
        raise BadRequest(
            f"models/{preview(request.path_params['target'], 100)} is not a method this server has: POST {known}"
        )
    streamed = GEMINI_METHODS[method]
    sse = streamed and request.query_params.get("alt") == "sse"
    return {"model": name, "stream": sse, "json_array": streamed and not sse}


class ScriptedModelServer(ModelServerUrls):
    """Serves the scripted model on 127.0.0.1 from a background thread.

    Use as a context manager; `openai_base_url`, `anthropic_base_url` and
    `gemini_base_url` are what the SDKs take as `base_url`.
    """

    def __init__(
        self, policy: Policy | None = None, port: int = 0, *, wrap: Callable[[ASGIApp], ASGIApp] | None = None
    ) -> None:
        """`wrap` puts something in front of the app (e.g. `HttpFaults`), as a proxy or a failing provider would."""
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
        # without it every keep-alive response waits ~40 ms on a delayed ACK.
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self.port: int = self._sock.getsockname()[1]
        app: ASGIApp = create_app(policy)
        config = uvicorn.Config(
            wrap(app) if wrap else app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

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
