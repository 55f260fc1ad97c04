"""The model boundary: one recorder for every model request of every runner.

It sits in the HTTP client the provider SDK uses (a transport wrapper), so it
sees the same bytes for the scripted model and for a real provider. The
current `openai` and `anthropic` SDKs take an `httpx2` client and older ones
an `httpx` client; the two share an API, so one wrapper is built per module.

In a run, every connect, send and read of a model exchange waits at most the time left in the run (the
network layer under the client is bound to the run's deadline), so an endpoint that dribbles its reply or
keeps a stream alive with comments cannot hold the run past `max_seconds`: the exchange fails there, is
recorded as an attempt that got no answer, and the run stops as `timeout`.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from types import ModuleType
from typing import Any

import pydantic_core

from looplab.adapters.boundary.pacing import Pacer, retry_after_s
from looplab.adapters.contract.pricing import Pricing
from looplab.adapters.contract.trace import Attempt, ModelCall
from looplab.adapters.contract.wire_apis import ENDPOINT_OF_SUFFIX
from looplab.shared_tools.live import WAIT_SLICE_S
from looplab.shared_tools.records import clean, preview

__all__ = [
    "DEADLINE_PASSED",
    "ENDPOINTS",
    "ERROR_CHARS",
    "Exchange",
    "ExchangeInfo",
    "ModelRecorder",
    "ReplyTee",
    "SSE_START",
    "forecast_input_tokens",
    "http_module_for",
    "parse_exchange",
    "read_json",
]

#: How much of a failed attempt's error body the record keeps: enough for a server's list of validation
#: errors, whose decisive line (llama-cpp-python's "messages[2] ... content") comes after the first few hundred.
ERROR_CHARS = 2000

#: Endpoint kind by URL path suffix, for the four wire formats (Gemini's two methods are one endpoint, streamed or not).
ENDPOINTS = ENDPOINT_OF_SUFFIX


@dataclass
class ModelRecorder:
    """Records every model request that passes its transports: each answered call, and each attempt that was not.

    `calls` are the answered model calls (what `max_steps` counts); `failed` every attempt that got
    no answer (an error status, a broken connection, a timeout), in order; `pending` those since the
    last answered call, which the next answered call takes as its retries.
    """

    clock: Callable[[], float]
    #: The model's price; None when it has none, and then every cost is unknown (None).
    pricing: Pricing | None = None
    #: Called with the request's size before each model request is sent; it may raise to refuse it.
    gate: Callable[[int], None] | None = None
    #: Told of every 429's retry-after, so every run in flight holds back, not only the one that got it.
    pacer: Pacer | None = None
    #: Added to every request sent, replacing a header of the same name (the model spec's `headers`).
    headers: Mapping[str, str] = field(default_factory=dict)
    #: Seconds left in the run (None: no deadline); every wait of a model exchange is bounded by it.
    time_left: Callable[[], float] | None = None
    #: Called once the deadline has cut an exchange short and it is recorded; it raises the run's stop.
    expire: Callable[[], None] | None = None
    #: The tools a reply's text names, for a runner whose loop reads tool calls from text (the runner's
    #: `tools_named_in_text`); read only from a reply that requests no tool natively. None: text requests nothing.
    tools_named_in_text: Callable[[str], list[str]] | None = None
    #: The agents of a run with more than one: each name and what its requests alone carry (`Delegate.marker`);
    #: a request carrying none of them is `main_agent`'s. Empty: one agent, and no call names one.
    agents: Mapping[str, bytes] = field(default_factory=dict)
    main_agent: str | None = None
    calls: list[ModelCall] = field(default_factory=list)
    failed: list[Attempt] = field(default_factory=list)
    pending: list[Attempt] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        #: Whether the run's deadline has cut an exchange short (here, or at the proxy's relay).
        self.out_of_time = False
        #: Replies whose 2xx status has come and whose body is not yet recorded (see `replies_begun`).
        self._answering = 0

    @property
    def cost_usd(self) -> float | None:
        """Dollars spent on answered calls; None when the model has no price."""
        return None if self.pricing is None else sum(c.cost_usd or 0.0 for c in self.calls)

    def http_client(self, http: ModuleType, *, is_async: bool = False, tls: bool = True, **kwargs: Any) -> Any:
        """A `Client` (or `AsyncClient`) of `http` (the `httpx` or `httpx2` module) that records.

        `tls=False` for a plain-http endpoint: the transport then skips building an SSL context (loading
        the CA bundle costs tens of milliseconds per client, for a connection that never uses it).
        """
        sync_cls, async_cls = _transport_classes(http)
        kwargs.setdefault("timeout", http.Timeout(600.0, connect=10.0))
        verify = {} if tls else {"verify": False}
        inner = http.AsyncHTTPTransport(**verify) if is_async else http.HTTPTransport(**verify)
        if self.time_left is not None:
            _bind_to_deadline(inner, self, is_async=is_async)
        if is_async:
            return http.AsyncClient(transport=async_cls(self, inner), **kwargs)
        return http.Client(transport=sync_cls(self, inner), **kwargs)

    def agent_of(self, request_body: bytes) -> str | None:
        """Which agent sent a request: the one whose marker it carries, else the main one (None with one agent)."""
        if not self.agents:
            return None
        return next((name for name, marker in self.agents.items() if marker in request_body), self.main_agent)

    @property
    def replies_begun(self) -> int:
        """The answered calls and the 2xx replies still arriving: what the Guard's cutoff counts (`max_steps`).

        A framework may run a tool as soon as its block of a streamed reply arrives, before the reply ends and
        is recorded (Claude Code does); counted from its status on, the call spends its step before that tool
        can reach the Guard. A reply that then breaks off is an attempt that got no answer and counts no more.
        """
        with self._lock:
            return len(self.calls) + self._answering

    @property
    def tokens(self) -> int:
        """Input plus output tokens of the answered calls (what `max_tokens` counts)."""
        return sum(c.input_tokens + c.output_tokens for c in self.calls)

    def forecast_cost(self, request_bytes: int) -> float | None:
        """A call's likely cost: its input tokens forecast from its size, the largest reply so far out."""
        if self.pricing is None:
            return None
        output = max((c.output_tokens for c in self.calls), default=0)
        return self.pricing.cost(forecast_input_tokens(request_bytes), output)

    def outgoing(self, headers: Mapping[str, str]) -> dict[str, str]:
        """`headers` as a relay sends them on (boundary/proxy.py): with `self.headers` in place of any of the same
        name, whatever its case, as the recording transport does."""
        replaced = {name.lower() for name in self.headers}
        return {k: v for k, v in headers.items() if k.lower() not in replaced} | dict(self.headers)

    def exchange(self, url: str, body: bytes, *, stop_at_deadline: bool = True) -> Exchange:
        """A request about to go out to `url`, gated now (the gate may raise to refuse it): see `Exchange`.

        `stop_at_deadline=False` for a caller that ends the run itself when the deadline cuts the exchange
        short (the proxy's relay answers its child first); otherwise the failure is recorded and `expire` raises.
        """
        return Exchange(self, url, body, stop_at_deadline)

    def _record(
        self,
        url: str,
        request_body: bytes,
        status: int,
        response_body: bytes,
        started: float,
        error: Exception | None = None,
    ) -> None:
        endpoint = _endpoint(url)
        if endpoint is None:  # model listings, token counting: not model calls
            return
        latency = self.clock() - started
        if error is not None or not 200 <= status < 300:
            message = _error_message(response_body)
            if error is not None:
                message = f"the reply broke off after {len(response_body)} bytes: {type(error).__name__}: {error}"
            self._failed(endpoint, status, message, len(request_body), len(response_body), started)
            return
        info = parse_exchange(endpoint, response_body, self.tools_named_in_text)
        # What the model sent is text from outside: it must still serialize (no lone surrogates).
        info.tool_calls_requested = [clean(str(name)) for name in info.tool_calls_requested]
        info.finish_reason = clean(str(info.finish_reason)) if info.finish_reason is not None else None
        if info.usage_unusable or (not info.input_tokens and not info.output_tokens):
            # No usage reported (e.g. a stream without include_usage), or a count no budget can trust (negative,
            # not an integer): estimate, and say so.
            info.cached_input_tokens = info.cache_write_tokens = 0
            info.input_tokens, info.output_tokens = (
                forecast_input_tokens(len(request_body)),
                -(-len(response_body) // 8),
            )
            info.usage_estimated = True
        with self._lock:
            call = ModelCall(
                index=len(self.calls) + 1,
                endpoint=endpoint,
                url=url,
                status=status,
                request_bytes=len(request_body),
                response_bytes=len(response_body),
                started_at=round(started, 6),
                latency_s=round(latency, 6),
                cost_usd=None
                if self.pricing is None
                else self.pricing.cost(
                    info.input_tokens, info.output_tokens, info.cached_input_tokens, info.cache_write_tokens
                ),
                failed_attempts=self.pending,
                agent=self.agent_of(request_body),
                **info.__dict__,
            )
            self.calls.append(call)
            self.pending = []

    def _failed(
        self, endpoint: str, status: int | None, error: str, request_bytes: int, response_bytes: int, started: float
    ) -> None:
        """An attempt that got no answer: kept under the step it was for."""
        with self._lock:
            attempt = Attempt(
                step=len(self.calls) + 1,
                attempt=len(self.pending) + 1,
                endpoint=endpoint,
                status=status,
                error=clean(error),
                request_bytes=request_bytes,
                response_bytes=response_bytes,
                started_at=round(started, 6),
                latency_s=round(self.clock() - started, 6),
            )
            self.pending.append(attempt)
            self.failed.append(attempt)


def _prepare(recorder: ModelRecorder, request: Any) -> None:
    """The recorder's headers on the request, and the reply asked for uncompressed: the boundary reads usage,
    finish reason and tool calls out of its bytes."""
    request.headers.update(recorder.headers)  # httpx headers: a name replaces its namesake in any case
    request.headers["accept-encoding"] = "identity"


def _error_message(body: bytes) -> str:
    """The server's message from an error body (`{"error": {"message": ...}}` in every dialect), trimmed."""
    data = read_json(body)
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
    text = message if isinstance(message, str) else body.decode("utf-8", errors="replace")
    return preview(" ".join(text.split()), ERROR_CHARS)


@lru_cache(maxsize=256)
def forecast_input_tokens(request_bytes: int) -> int:
    """A request's input tokens before it is answered: one per 4 bytes, rounded up (JSON and its escapes make a
    request's bytes outnumber its text's characters, so this errs high for text)."""
    return -(-request_bytes // 4)


def _endpoint(url: str) -> str | None:
    path = url.split("?")[0]
    return next((kind for suffix, kind in ENDPOINTS.items() if path.endswith(suffix)), None)


def http_module_for(sdk: ModuleType) -> ModuleType:
    """The HTTP client module (`httpx2` or `httpx`) an SDK such as `openai` or `anthropic` is built on."""
    base = sys.modules.get(f"{sdk.__name__}._base_client") or __import__(f"{sdk.__name__}._base_client", fromlist=["_"])
    for name in ("httpx2", "httpx"):
        if isinstance(getattr(base, name, None), ModuleType):
            return getattr(base, name)
    raise RuntimeError(f"cannot tell which HTTP client {sdk.__name__} uses")


class ReplyTee:
    """A reply's body passing through, kept, and reported when it ends, breaks off or is closed.

    What every recording transport shares (the httpx ones here, and any a runner builds on another HTTP client):
    `done(body, error)` is called with the bytes so far and the error that broke the body off, if one did
    (`Exchange` keeps the first).
    """

    def __init__(self, inner: Any, done: Callable[[bytes, Exception | None], None]) -> None:
        self.inner, self.done, self.chunks = inner, done, []

    def finish(self, error: Exception | None = None) -> None:
        """Report the body as it stands."""
        self.done(b"".join(self.chunks), error)

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self.inner:
                self.chunks.append(chunk)
                yield chunk
        except Exception as exc:  # the reply broke off: an attempt that got no answer
            self.finish(exc)
            raise
        self.finish()


class Exchange:
    """One model request through the recorder, the sequence every transport and the relay (boundary/proxy.py) follow.

    Made just before the request goes out, which gates it: the gate may raise to refuse it. Sent inside
    `with exchange:`, a failure with no response is recorded as an attempt that got no answer, and raised on.
    Its reply is then recorded once, whichever comes first: `whole()` for a body read whole (or broken off),
    or the end of a `tee()` the body passes through.
    """

    def __init__(self, recorder: ModelRecorder, url: str, body: bytes, stop_at_deadline: bool = True) -> None:
        if recorder.gate is not None and _endpoint(url) is not None:
            recorder.gate(len(body))
        self.recorder, self.url, self.body, self.started = recorder, url, body, recorder.clock()
        self.stop_at_deadline = stop_at_deadline
        self.recorded = False
        self.answering = False

    def __enter__(self) -> Exchange:
        return self

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> None:
        if isinstance(error, Exception) and (endpoint := _endpoint(self.url)) is not None:
            self.recorded = True
            message = f"{type(error).__name__}: {error}"
            self.recorder._failed(endpoint, None, message, len(self.body), 0, self.started)
            self._stop_if_out_of_time()

    def reply_begins(self, status: int) -> None:
        """The reply's status has come, its body not yet: a 2xx one counts in `replies_begun` until recorded."""
        with self.recorder._lock:
            if 200 <= status < 300 and not self.recorded and not self.answering:
                self.answering = True
                self.recorder._answering += 1

    def whole(self, status: int, headers: Any, body: bytes, error: Exception | None = None) -> None:
        """The reply (or what came before `error` broke it off): recorded, and a 429's retry-after told to the pacer."""
        with self.recorder._lock:  # recorded and no longer arriving at one moment: counted once throughout
            if self.recorded:
                return
            self.recorded = True
            try:
                self.recorder._record(self.url, self.body, status, body, self.started, error)
            finally:
                if self.answering:
                    self.answering = False
                    self.recorder._answering -= 1
        if status == 429 and self.recorder.pacer is not None and (wait := retry_after_s(headers)) is not None:
            self.recorder.pacer.hold(wait)
        if error is not None:
            self._stop_if_out_of_time()

    def _stop_if_out_of_time(self) -> None:
        """After a failure the deadline caused: the run's stop, raised in place of the failure (no retry)."""
        if self.stop_at_deadline and self.recorder.out_of_time and self.recorder.expire is not None:
            self.recorder.expire()

    def tee(self, status: int, headers: Any, chunks: Any, kind: type[ReplyTee] = ReplyTee) -> ReplyTee:
        """The reply's body passing through `kind`, recorded when it ends, breaks off or is closed."""
        self.reply_begins(status)
        return kind(chunks, lambda body, error: self.whole(status, headers, body, error))


@cache
def _transport_classes(http: ModuleType) -> tuple[type, type]:
    """Recording transport classes for one HTTP module, built once."""

    class _Tee(ReplyTee, http.SyncByteStream):
        def close(self) -> None:
            self.finish()
            self.inner.close()

    class _AsyncTee(ReplyTee, http.AsyncByteStream):
        async def __aiter__(self) -> Any:
            try:
                async for chunk in self.inner:
                    self.chunks.append(chunk)
                    yield chunk
            except Exception as exc:
                self.finish(exc)
                raise
            self.finish()

        async def aclose(self) -> None:
            self.finish()
            await self.inner.aclose()

    def _reply(exchange: Exchange, response: Any, tee: type[ReplyTee]) -> Any:
        """The response handed on with its body recorded as it passes (an error one is read at once by the caller:
        an SDK may close it unread before retrying)."""
        response.stream = exchange.tee(response.status_code, response.headers, response.stream, tee)
        return response

    class RecordingTransport(http.BaseTransport):
        def __init__(self, recorder: ModelRecorder, inner: Any) -> None:
            self.recorder, self.inner = recorder, inner

        def handle_request(self, request: Any) -> Any:
            request.read()
            _prepare(self.recorder, request)
            with self.recorder.exchange(str(request.url), request.content) as exchange:
                response = self.inner.handle_request(request)
            reply = _reply(exchange, response, _Tee)
            if not 200 <= response.status_code < 300:
                reply.read()
            return reply

        def close(self) -> None:
            self.inner.close()

    class AsyncRecordingTransport(http.AsyncBaseTransport):
        def __init__(self, recorder: ModelRecorder, inner: Any) -> None:
            self.recorder, self.inner = recorder, inner

        async def handle_async_request(self, request: Any) -> Any:
            await request.aread()
            _prepare(self.recorder, request)
            with self.recorder.exchange(str(request.url), request.content) as exchange:
                response = await self.inner.handle_async_request(request)
            reply = _reply(exchange, response, _AsyncTee)
            if not 200 <= response.status_code < 300:
                await reply.aread()
            return reply

        async def aclose(self) -> None:
            await self.inner.aclose()

    return RecordingTransport, AsyncRecordingTransport


#: What an exchange cut short by the run's deadline fails with (as a timeout of the HTTP layer).
DEADLINE_PASSED = "looplab: the run's deadline passed during the model exchange"


def _bind_to_deadline(transport: Any, recorder: ModelRecorder, *, is_async: bool) -> None:
    """Have every connect, send and read under `transport` (an httpx or httpx2 one) wait at most the run's time left.

    httpx builds its connection pool without a way to pass a network backend, so the pool's is wrapped in place.
    """
    pool = transport._pool
    if not hasattr(pool, "_network_backend"):  # pragma: no cover - a release that moved it: fail, never run unbound
        raise RuntimeError(f"cannot bind {type(pool).__module__} to the run's deadline: no _network_backend")
    core = sys.modules[type(pool).__module__.split(".")[0]]
    sync_backend, async_backend = _deadline_backends(core)
    pool._network_backend = (async_backend if is_async else sync_backend)(pool._network_backend, recorder)


def _wait_for(recorder: ModelRecorder, timeout: float | None, timed_out: type[Exception]) -> tuple[float, bool]:
    """How long one network operation may wait: its own timeout or the run's time left, whichever is shorter, and
    whether the deadline is the shorter. None left: the exchange fails now with `timed_out`."""
    assert recorder.time_left is not None
    left = recorder.time_left()
    if left <= 0:
        recorder.out_of_time = True
        raise timed_out(DEADLINE_PASSED)
    return (left, True) if timeout is None or left < timeout else (timeout, False)


def _read_slice(recorder: ModelRecorder, timeout: float | None) -> tuple[float, bool]:
    """How long the next slice of a read may wait, and whether it is the read's last: a read waiting on the model
    looks again at the run's time left every `WAIT_SLICE_S` (a cancelled run has none), so a cancel cuts it within
    a slice. A read that timed out received nothing, so the next slice simply reads again."""
    assert recorder.time_left is not None
    bound = min(recorder.time_left(), timeout if timeout is not None else float("inf"))
    return (bound, True) if bound <= WAIT_SLICE_S else (WAIT_SLICE_S, False)


def _cut(recorder: ModelRecorder, timed_out: type[Exception]) -> Exception:
    recorder.out_of_time = True
    return timed_out(DEADLINE_PASSED)


@cache
def _deadline_backends(core: ModuleType) -> tuple[type, type]:
    """Network backends of `core` (httpcore or httpcore2), sync and async, that wrap another and bound its waits
    by the run's deadline (see `_wait_for`); built once per module."""

    class Stream(core.NetworkStream):
        def __init__(self, inner: Any, recorder: ModelRecorder) -> None:
            self.inner, self.recorder = inner, recorder

        def _bounded(self, timeout: float | None, timed_out: type[Exception], operation: Callable[[float], Any]) -> Any:
            wait, deadline = _wait_for(self.recorder, timeout, timed_out)
            try:
                return operation(wait)
            except timed_out as exc:
                if deadline:
                    raise _cut(self.recorder, timed_out) from exc
                raise

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            while True:  # in slices: see `_read_slice`
                wait, last = _read_slice(self.recorder, timeout)
                try:
                    return self._bounded(wait, core.ReadTimeout, lambda wait: self.inner.read(max_bytes, wait))
                except core.ReadTimeout:
                    if last:
                        raise
                    timeout = None if timeout is None else timeout - wait

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._bounded(timeout, core.WriteTimeout, lambda wait: self.inner.write(buffer, wait))

        def close(self) -> None:
            self.inner.close()

        def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
            tls = self._bounded(
                timeout, core.ConnectTimeout, lambda wait: self.inner.start_tls(ssl_context, server_hostname, wait)
            )
            return Stream(tls, self.recorder)

        def get_extra_info(self, info: str) -> Any:
            return self.inner.get_extra_info(info)

    class Backend(core.NetworkBackend):
        def __init__(self, inner: Any, recorder: ModelRecorder) -> None:
            self.inner, self.recorder = inner, recorder

        def _connect(self, connect: Callable[[float], Any], timeout: float | None) -> Any:
            wait, deadline = _wait_for(self.recorder, timeout, core.ConnectTimeout)
            try:
                return Stream(connect(wait), self.recorder)
            except core.ConnectTimeout as exc:
                if deadline:
                    raise _cut(self.recorder, core.ConnectTimeout) from exc
                raise

        def connect_tcp(self, host: str, port: int, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
            return self._connect(lambda wait: self.inner.connect_tcp(host, port, wait, *args, **kwargs), timeout)

        def connect_unix_socket(self, path: str, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
            return self._connect(lambda wait: self.inner.connect_unix_socket(path, wait, *args, **kwargs), timeout)

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    class AsyncStream(core.AsyncNetworkStream):
        def __init__(self, inner: Any, recorder: ModelRecorder) -> None:
            self.inner, self.recorder = inner, recorder

        async def _bounded(
            self, timeout: float | None, timed_out: type[Exception], operation: Callable[[float], Any]
        ) -> Any:
            wait, deadline = _wait_for(self.recorder, timeout, timed_out)
            try:
                return await operation(wait)
            except timed_out as exc:
                if deadline:
                    raise _cut(self.recorder, timed_out) from exc
                raise

        async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            while True:  # in slices: see `_read_slice`
                wait, last = _read_slice(self.recorder, timeout)
                try:
                    return await self._bounded(wait, core.ReadTimeout, lambda wait: self.inner.read(max_bytes, wait))
                except core.ReadTimeout:
                    if last:
                        raise
                    timeout = None if timeout is None else timeout - wait

        async def write(self, buffer: bytes, timeout: float | None = None) -> None:
            await self._bounded(timeout, core.WriteTimeout, lambda wait: self.inner.write(buffer, wait))

        async def aclose(self) -> None:
            await self.inner.aclose()

        async def start_tls(
            self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
        ) -> Any:
            tls = await self._bounded(
                timeout, core.ConnectTimeout, lambda wait: self.inner.start_tls(ssl_context, server_hostname, wait)
            )
            return AsyncStream(tls, self.recorder)

        def get_extra_info(self, info: str) -> Any:
            return self.inner.get_extra_info(info)

    class AsyncBackend(core.AsyncNetworkBackend):
        def __init__(self, inner: Any, recorder: ModelRecorder) -> None:
            self.inner, self.recorder = inner, recorder

        async def _connect(self, connect: Callable[[float], Any], timeout: float | None) -> Any:
            wait, deadline = _wait_for(self.recorder, timeout, core.ConnectTimeout)
            try:
                return AsyncStream(await connect(wait), self.recorder)
            except core.ConnectTimeout as exc:
                if deadline:
                    raise _cut(self.recorder, core.ConnectTimeout) from exc
                raise

        async def connect_tcp(
            self, host: str, port: int, timeout: float | None = None, *args: Any, **kwargs: Any
        ) -> Any:
            return await self._connect(lambda wait: self.inner.connect_tcp(host, port, wait, *args, **kwargs), timeout)

        async def connect_unix_socket(self, path: str, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
            return await self._connect(
                lambda wait: self.inner.connect_unix_socket(path, wait, *args, **kwargs), timeout
            )

        async def sleep(self, seconds: float) -> None:
            await self.inner.sleep(seconds)

    return Backend, AsyncBackend


@dataclass
class ExchangeInfo:
    """What the recorder reads out of one request/response pair."""

    streamed: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    finish_reason: str | None = None
    tool_calls_requested: list[str] = field(default_factory=list)
    usage_estimated: bool = False
    #: A count in the reply's usage was not a non-negative integer (negative, a float, text): none of it is used.
    usage_unusable: bool = False
    #: The reply's text (Chat Completions, Messages and Gemini): where a text protocol names its tool.
    text: str = ""


#: How a server-sent-events body begins: a field or a comment line (a JSON body begins with "{").
SSE_START = re.compile(rb"\s*(?:event|data|id|retry)?:")


def parse_exchange(
    endpoint: str, response_body: bytes, tools_named_in_text: Callable[[str], list[str]] | None = None
) -> ExchangeInfo:
    """Tokens, finish reason and requested tools from a response, streamed (SSE) or not.

    `tools_named_in_text` reads the tools a reply's text names, for a runner whose loop takes its tool calls
    from text: applied only to a reply that requests no tool natively.
    """
    # Told from the reply's first bytes, which say what came on the wire: reading the request's "stream" flag
    # means scanning (or parsing) the whole conversation so far, which costs more than the rest of the record.
    info = ExchangeInfo(streamed=SSE_START.match(response_body) is not None)
    events = list(_sse_events(response_body)) if info.streamed else [read_json(response_body)]
    if endpoint == "generateContent" and isinstance(events[0], list) and not info.streamed:
        # streamGenerateContent without `alt=sse`: the chunks come as one JSON array.
        events, info.streamed = events[0], True
    reader = READERS[endpoint]
    for event in events:
        if isinstance(event, dict):
            reader(event, info)
    if tools_named_in_text is not None and not info.tool_calls_requested:
        info.tool_calls_requested = list(tools_named_in_text(info.text))
    return info


#: The most tokens one reply may report in one count: far past any model's context and output, and far short of
#: what turns a cost into an overflow. A count above it is not a count.
MAX_REPORTED_TOKENS = 10**12


def _count(info: ExchangeInfo, usage: Any, key: str) -> int:
    """The token count `usage[key]`: 0 when absent or null; one that is not a non-negative integer up to
    `MAX_REPORTED_TOKENS` (negative, a float, a string, true) counts 0 and marks the reply's usage unusable, so
    the recorder estimates the call's tokens from its bytes as for a reply without usage: no count a reply
    reports can lower what a budget has spent."""
    value = usage.get(key) if isinstance(usage, dict) else None
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_REPORTED_TOKENS:
        return value
    info.usage_unusable = True
    return 0


def _usage(info: ExchangeInfo, holder: Any, key: str) -> dict[str, Any]:
    """`holder[key]` when it is an object; anything else there (a list, a number) marks the usage unusable."""
    value = holder.get(key) if isinstance(holder, dict) else None
    if value is not None and not isinstance(value, dict):
        info.usage_unusable = True
    return value if isinstance(value, dict) else {}


def read_json(body: bytes) -> Any:
    """`body` as the standard `json` module reads it, or None where it reads nothing.

    pydantic-core's parser goes first: it reads a reply about three times as fast, and where it reads
    anything, it reads what `json` does. It refuses some text `json` takes (an escaped lone surrogate,
    a byte-order mark, nesting past 200 levels); `json` then decides.
    """
    try:
        return pydantic_core.from_json(body)
    except ValueError:
        pass
    try:
        return json.loads(body)
    except ValueError:
        return None


def _sse_events(body: bytes) -> Iterator[Any]:
    for line in body.decode("utf-8", errors="replace").splitlines():
        if line.startswith("data:") and (payload := line[5:].strip()) not in ("", "[DONE]"):
            yield read_json(payload.encode())


def _read_chat(event: dict[str, Any], info: ExchangeInfo) -> None:
    if usage := _usage(info, event, "usage"):
        info.input_tokens = _count(info, usage, "prompt_tokens")
        info.output_tokens = _count(info, usage, "completion_tokens")
        info.cached_input_tokens = _count(info, _usage(info, usage, "prompt_tokens_details"), "cached_tokens")
    for choice in event.get("choices") or []:
        message = choice.get("message") or choice.get("delta") or {}
        if isinstance(content := message.get("content"), str):
            info.text += content
        for call in message.get("tool_calls") or []:
            if name := (call.get("function") or {}).get("name"):
                info.tool_calls_requested.append(name)
        info.finish_reason = choice.get("finish_reason") or info.finish_reason


def _read_responses(event: dict[str, Any], info: ExchangeInfo) -> None:
    if event.get("object") == "response":
        response = event
    elif event.get("type") in ("response.completed", "response.incomplete", "response.failed"):
        response = event.get("response") or {}
    else:  # streamed deltas: the closing event repeats everything
        return
    usage = _usage(info, response, "usage")
    info.input_tokens = _count(info, usage, "input_tokens")
    info.output_tokens = _count(info, usage, "output_tokens")
    info.cached_input_tokens = _count(info, _usage(info, usage, "input_tokens_details"), "cached_tokens")
    calls = [item.get("name") for item in response.get("output") or [] if item.get("type") == "function_call"]
    info.tool_calls_requested = calls
    info.finish_reason = "tool_calls" if calls else response.get("status")


def _read_messages(event: dict[str, Any], info: ExchangeInfo) -> None:
    kind = event.get("type")
    message = event.get("message") if kind == "message_start" else event if kind == "message" else None
    if message:
        usage = _usage(info, message, "usage")
        # Anthropic's input_tokens leaves out the cached ones; looplab's input counts every input token.
        info.cached_input_tokens = _count(info, usage, "cache_read_input_tokens")
        info.cache_write_tokens = _count(info, usage, "cache_creation_input_tokens")
        info.input_tokens = _count(info, usage, "input_tokens") + info.cached_input_tokens + info.cache_write_tokens
        info.output_tokens = _count(info, usage, "output_tokens")
        info.finish_reason = message.get("stop_reason")
        for block in message.get("content") or []:
            if block.get("type") == "tool_use":
                info.tool_calls_requested.append(block.get("name"))
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                info.text += block["text"]
    elif kind == "content_block_start" and (event.get("content_block") or {}).get("type") == "tool_use":
        info.tool_calls_requested.append(event["content_block"].get("name"))
    elif kind == "content_block_delta" and isinstance(text := (event.get("delta") or {}).get("text"), str):
        info.text += text
    elif kind == "message_delta":
        info.finish_reason = (event.get("delta") or {}).get("stop_reason") or info.finish_reason
        info.output_tokens = _count(info, _usage(info, event, "usage"), "output_tokens") or info.output_tokens


def _read_gemini(event: dict[str, Any], info: ExchangeInfo) -> None:
    """One `GenerateContentResponse` (a whole reply or one streamed chunk: each chunk's usage is the reply's so far)."""
    if usage := _usage(info, event, "usageMetadata"):
        # promptTokenCount includes the cached tokens; thoughts are billed as output, beside the candidates.
        info.input_tokens = _count(info, usage, "promptTokenCount") + _count(info, usage, "toolUsePromptTokenCount")
        info.output_tokens = _count(info, usage, "candidatesTokenCount") + _count(info, usage, "thoughtsTokenCount")
        info.cached_input_tokens = _count(info, usage, "cachedContentTokenCount")
    candidates = event.get("candidates")
    for candidate in candidates[:1] if isinstance(candidates, list) else []:  # looplab asks for one candidate
        if not isinstance(candidate, dict):
            continue
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, dict):
                continue
            call = part.get("functionCall")
            if isinstance(call, dict) and isinstance(call.get("name"), str):
                info.tool_calls_requested.append(call["name"])
            elif isinstance(text := part.get("text"), str) and not part.get("thought"):
                info.text += text
        if isinstance(reason := candidate.get("finishReason"), str):
            info.finish_reason = reason


#: The reader of each endpoint's replies (a whole body, or each event of a stream).
READERS: dict[str, Callable[[dict[str, Any], ExchangeInfo], None]] = {
    "chat.completions": _read_chat,
    "responses": _read_responses,
    "messages": _read_messages,
    "generateContent": _read_gemini,
}
