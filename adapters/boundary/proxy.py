"""The model boundary for a runner in another process: a recording proxy on loopback.

A runner that is not Python (a TypeScript loop), or a framework that builds its own HTTP client,
cannot take looplab's recording transport. It gets this proxy's base URL instead, and a per-run
token as its API key. Every request goes through the run's own `ModelRecorder`, so it is
recorded, gated (a request past `max_steps`, the deadline or the dollar budget is refused with a
403 whose body names the limit, and is never forwarded) and paced exactly as in-process. The
provider's key stays here: the proxy swaps the run's token for it on the way out, and adds the
model spec's extra headers (the scripted model's persona among them) as the in-process transport does.

It is served by the standard library's threaded HTTP server, one thread per connection, and relays
with a blocking client, rather than by the ASGI stack the other loopback servers use: an async
relay (uvicorn, Starlette, an async client) measured 0.8 ms a request on loopback before recording
anything, a blocking one 0.2 ms, and this sits on every model call a child makes.

What it holds, whatever either side sends:

- the run's deadline: every exchange in flight when the run's time runs out has its upstream connection
  shut (however the upstream dribbles its reply, per-read timeouts never fire); the attempt is recorded
  with what arrived, the child gets the 403 a request past the deadline gets (or, mid-stream, a closed
  connection), and the run stops as `timeout`;
- a body it cannot frame (`Content-Length: abc`, two lengths, a chunk size that is not hexadecimal, a
  chunk longer or shorter than it says, a body that ends early) gets a 400 naming what is wrong, and the
  connection is closed: nothing is forwarded and nothing is printed;
- connections from anyone: a connection that has not sent a whole request head within `HEAD_TIMEOUT_S`
  of connecting (or of its last reply, before it has ever shown the token) is dropped, and at most
  `MAX_CONNECTIONS` are held: a new one past that drops the oldest that has never shown the token, so
  idle or half-sent connections cannot crowd out the child (the same two bounds as every loopback server's,
  from `adapters.serving`).

The relay (what a request goes through, here) and the HTTP server it sits behind (`proxy_server`: the bounded
connections and the body framing) are two modules.
"""

from __future__ import annotations

import http.client
import secrets
import ssl
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from looplab.adapters.boundary.deadline import DEADLINE_PASSED
from looplab.adapters.boundary.loopback import LoopbackCheck
from looplab.adapters.boundary.proxy_server import RelayHandler, RelayServer, _ChildGone, _Unframed
from looplab.adapters.boundary.recorder import Exchange
from looplab.adapters.boundary.serving import LOOPBACK, STOP_TIMEOUT_S
from looplab.adapters.contract.errors import LooplabException, StopRun
from looplab.adapters.contract.model import PROVIDER_OF_API, ModelServerUrls
from looplab.adapters.contract.wire_apis import GEMINI, WIRE_APIS
from looplab.shared_tools.live import WAIT_SLICE_S

if TYPE_CHECKING:
    from looplab.adapters.boundary.budget import RunBudget
    from looplab.adapters.boundary.recorder import ModelRecorder
    from looplab.adapters.contract.limits import Limits
    from looplab.adapters.contract.model import ModelSpec


class ProxiedRun(Protocol):
    """What the proxy reads of the run it serves (the session; the boundary knows no more of it than this)."""

    model: ModelSpec
    recorder: ModelRecorder
    budget: RunBudget
    limits: Limits

    def remaining_s(self) -> float:
        """Seconds left of the run's `max_seconds`."""
        ...


__all__ = ["ModelProxy"]

#: Where each provider's API lives when the model spec names no base URL.
DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "google": "https://generativelanguage.googleapis.com",
}
#: Three model endpoints, by the path a client asks for (with or without `/v1`); Gemini's by `GEMINI_METHODS`.
API_OF_PATH = {api.path: api.name for api in WIRE_APIS if api.path}
#: How a Gemini request's path ends (`/v1beta/models/NAME:generateContent`): it goes upstream as it came.
GEMINI_METHODS = GEMINI.suffixes
#: Request headers not passed on: the hop's own, and the run's token (the provider's key replaces it).
DROPPED_REQUEST = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "upgrade", "accept-encoding"}
    | {"authorization", "x-api-key", "x-goog-api-key", "proxy-authorization", "origin", "cookie"}
)
DROPPED_RESPONSE = frozenset({"content-length", "connection", "keep-alive", "transfer-encoding", "content-encoding"})
#: How often the serving thread looks up to see whether it should stop: a run that ends waits for it, and every run
#: reaching the model through the proxy (a child process, some runners on Messages) starts and stops one. 200 idle
#: wake-ups a second cost less than the 25 ms a stop waited on average at 0.05 s.
POLL_S = 0.005


class ModelProxy(ModelServerUrls):
    """One run's recording model proxy on 127.0.0.1; a context manager, gone when the run ends.

    `openai_base_url`, `anthropic_base_url` and `gemini_base_url` are what a child's SDK takes as its base URL,
    and `token` its API key (sent as `Authorization: Bearer`, `x-api-key` or `x-goog-api-key`, as the SDKs do).
    """

    def __init__(self, session: ProxiedRun, token: str | None = None) -> None:
        self.session = session
        self.token = token or secrets.token_urlsafe(32)
        model = session.model
        self._upstream = (model.base_url or DEFAULT_BASE_URLS[model.provider]).rstrip("/")
        self._upstream_parts = urlsplit(self._upstream)
        self._tls: ssl.SSLContext | None = None
        self._server = RelayServer((LOOPBACK, 0), RelayHandler)
        self._server.proxy = self
        self.port: int = self._server.server_address[1]
        self._check = LoopbackCheck(self.token, self.port)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(POLL_S,), name="looplab-model-proxy", daemon=True
        )
        self._closing = threading.Event()
        self._watchdog = threading.Thread(target=self._watch_deadline, name="looplab-model-proxy-deadline", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def __enter__(self) -> ModelProxy:
        self._thread.start()
        self._watchdog.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving, drop the child's open connections and the upstream ones; bounded.

        An exchange still in flight (the runner ended, or gave up on its request, while the model was still
        answering) is cut first and recorded as it stood, so the run's record has it when the run concludes.
        """
        self._closing.set()
        self._server.cut_all(DeadlineTimeout if self.session.remaining_s() <= 0 else RunEnded)
        self._server.wait_uncut(STOP_TIMEOUT_S)
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=STOP_TIMEOUT_S)
        if self._watchdog.is_alive():
            self._watchdog.join(timeout=STOP_TIMEOUT_S)
        self._server.server_close()
        self._server.drop_connections()

    def _watch_deadline(self) -> None:
        """At the run's deadline (or its cancel), cut every exchange in flight (and any that starts after it)."""
        while (left := self.session.remaining_s()) > 0:  # in slices: a cancelled run has no time left
            if self._closing.wait(min(left, WAIT_SLICE_S)):
                return
        self._server.cut_all(DeadlineTimeout)

    def _expire(self) -> str:
        """The run stops as `timeout` (the deadline cut an exchange): why, for the child's refusal."""
        try:
            self.session.budget.expire()
        except StopRun as stop:
            return stop.detail
        return f"max_seconds={self.session.limits.max_seconds:g} elapsed"  # pragma: no cover - expire always raises

    def _target(self, path: str) -> str | None:
        """The upstream URL for a request path, or None when the run's model does not speak that API."""
        route = path.split("?")[0]
        if route.endswith(GEMINI_METHODS):
            return f"{self._upstream}{route}" if self.session.model.provider == "google" else None
        suffix = route.removeprefix("/v1").lstrip("/")
        api = API_OF_PATH.get(suffix)
        if api is None or PROVIDER_OF_API[api] != self.session.model.provider:
            return None
        # Anthropic's base URL has no `/v1`, OpenAI's has it.
        return f"{self._upstream}/{suffix}" if api != "messages" else f"{self._upstream}/v1/{suffix}"

    def _headers(self, incoming: list[tuple[str, str]]) -> dict[str, str]:
        """The child's headers as sent on: the hop's own dropped, the model spec's added, the provider's key in."""
        kept = {k: v for k, v in incoming if k.lower() not in DROPPED_REQUEST}
        headers = self.session.recorder.outgoing(kept)
        key = self.session.model.key()
        if self.session.model.provider == "anthropic":
            headers["x-api-key"] = key
        elif self.session.model.provider == "google":
            headers["x-goog-api-key"] = key
        else:
            headers["authorization"] = f"Bearer {key}"
        return headers

    def relay(self, handler: RelayHandler) -> None:
        """Answer one request: refused, not found, or forwarded through the recorder and relayed back."""
        incoming = handler.headers.items()
        refusal = self._check.refusal([(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in incoming])
        if refusal is not None:
            status, why = refusal
            kind = "unauthorized" if status == 401 else "forbidden"
            extra = [("WWW-Authenticate", "Bearer")] if status == 401 else []
            handler.close_connection = True  # a stranger gets one answer per connection, and no idle time after it
            return handler.send_json(status, {"error": {"type": kind, "message": why}}, extra)
        handler.shown_token()
        try:
            body = handler.read_body()
        except _Unframed as unframed:  # what follows on the connection cannot be told apart: it is closed
            handler.close_connection = True
            return handler.send_json(*_error(unframed.status, f"looplab: {unframed}"))
        if handler.command != "POST" or (target := self._target(handler.path)) is None:
            asked, model = f"{handler.command} {handler.path}", self.session.model.label
            return handler.send_json(*_error(404, f"looplab: this run's model is {model}; {asked} is not its endpoint"))
        try:
            exchange = self.session.recorder.exchange(target, body, stop_at_deadline=False)
        except StopRun as stop:  # the gate refused it: nothing was forwarded
            return handler.send_json(*_refused(stop.detail))
        upstream = handler.upstream = handler.upstream or self._connect()
        self._server.watch(handler)
        try:
            self._forward(handler, exchange, upstream, urlsplit(target).path + _query(handler.path), body, incoming)
        finally:
            self._server.unwatch(handler)

    def _forward(
        self,
        handler: RelayHandler,
        exchange: Exchange,
        upstream: http.client.HTTPConnection,
        path: str,
        body: bytes,
        incoming: list[tuple[str, str]],
    ) -> None:
        """Send one gated request upstream and relay its reply, recorded; cut at the run's deadline."""
        try:
            with exchange:
                try:
                    if upstream.sock is None:  # connected here, before the deadline can cut it (see `RelayHandler.cut`)
                        upstream.timeout = max(self.session.remaining_s(), 0.001)  # a socket not yet made: no cut
                        upstream.connect()
                        # Then each read waits as long as it did: the deadline's cut, not a read timeout, ends it.
                        upstream.sock.settimeout(self.session.limits.max_seconds)
                    if handler.cut:
                        raise handler.cut()
                    upstream.request("POST", path, body=body, headers=self._headers(incoming))
                    reply = upstream.getresponse()
                except (OSError, http.client.HTTPException) as exc:
                    if handler.cut and not isinstance(exc, handler.cut):
                        raise handler.cut() from exc
                    raise
        except (OSError, http.client.HTTPException) as exc:  # a failed attempt; the child sees a gateway error
            handler.drop_upstream()
            if handler.cut is DeadlineTimeout:
                return handler.send_json(*_refused(self._expire()))
            return handler.send_json(*_error(502, f"looplab could not reach the model: {type(exc).__name__}: {exc}"))
        headers = [(k, v) for k, v in reply.getheaders() if k.lower() not in DROPPED_RESPONSE]
        received: list[bytes] = []
        error: Exception | None = None

        def record() -> None:
            # Before the child sees the reply end: it may call a tool at once, and the Guard's cutoff must
            # already count this model call. Only the first record counts.
            exchange.whole(reply.status, reply.headers, b"".join(received), error)

        try:
            if reply.getheader("content-type", "").startswith("text/event-stream"):
                exchange.reply_begins(reply.status)  # the child may act on the stream's first blocks
                handler.send_stream(reply.status, headers, _chunks(reply, received, handler), before_end=record)
            else:  # a whole reply: one body, no chunked relay
                received.append(reply.read())
                if handler.cut:  # a body without a length ends where the cut shut the connection
                    raise handler.cut()
                record()
                handler.send_whole(reply.status, headers, received[0])
        except _ChildGone:
            handler.close_connection = True
        except (OSError, http.client.HTTPException) as exc:  # the reply broke off: a failed attempt
            error, handler.close_connection = exc, True
            if isinstance(exc, http.client.IncompleteRead):
                received.append(exc.partial)
            if handler.cut:  # however the shut connection surfaced, the cut broke the reply off
                error = exc if isinstance(exc, handler.cut) else handler.cut()
                record()  # before the child hears of it: the run's record is whole when it ends
                if handler.cut is DeadlineTimeout:
                    refusal = _refused(self._expire())
                    if not handler.replied:
                        handler.send_json(*refusal)
            elif not handler.replied:
                handler.send_json(*_error(502, f"looplab: the model's reply broke off: {type(exc).__name__}: {exc}"))
        finally:
            if error is not None or not reply.isclosed():
                handler.drop_upstream()
            record()

    def _connect(self) -> http.client.HTTPConnection:
        """A keep-alive connection to the upstream, for one child connection's requests in turn."""
        parts, timeout = self._upstream_parts, self.session.limits.max_seconds
        if parts.scheme == "http":
            return http.client.HTTPConnection(parts.hostname or LOOPBACK, parts.port, timeout=timeout)
        if self._tls is None:
            self._tls = _tls_context()
        return http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=timeout, context=self._tls)


def _query(path: str) -> str:
    """The query string of a request path, kept on the way out (some compatible servers take parameters there)."""
    return "?" + path.split("?", 1)[1] if "?" in path else ""


class DeadlineTimeout(LooplabException, TimeoutError):
    """The run's deadline cut the exchange short (its upstream connection was shut)."""

    def __init__(self) -> None:
        super().__init__(DEADLINE_PASSED)


class RunEnded(LooplabException, ConnectionAbortedError):
    """The run ended (its runner exited) with the exchange in flight: cut short, recorded as it stood."""

    def __init__(self) -> None:
        super().__init__("looplab: the run ended during the model exchange")


def _refused(why: str) -> tuple[int, dict[str, Any]]:
    """What the child gets for a request the run's limits refuse: a 403 naming the limit (clients do not retry it)."""
    return _error(403, f"looplab refused the request: {why}", kind="looplab_limit")


def _chunks(reply: http.client.HTTPResponse, received: list[bytes], handler: RelayHandler) -> Iterator[bytes]:
    """A streamed reply as it arrives, kept in `received` for the record; one that was cut short fails."""
    while chunk := reply.read1(65536):
        received.append(chunk)
        yield chunk
    if handler.cut:
        raise handler.cut()


def _tls_context() -> ssl.SSLContext:
    """The context the SDKs verify providers with: certifi's bundle where it is installed (httpx brings it)."""
    try:
        import certifi
    except ImportError:  # pragma: no cover - httpx depends on certifi
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


def _error(status: int, message: str, kind: str | None = None) -> tuple[int, dict[str, Any]]:
    """An error the OpenAI and Anthropic SDKs both read: OpenAI's `{"error": {...}}` with Anthropic's `"type": "error"`
    beside it (a Gemini request's goes in Gemini's shape: `RelayHandler.send_json`).

    The type follows the status as the providers spell it: a client that reads the type (DSPy does) must
    see a gateway error as a server's, which it retries, not as its own request's fault.
    """
    kind = kind or ("api_error" if status >= 500 else "invalid_request_error")
    return status, {"type": "error", "error": {"type": kind, "message": message, "code": None}}
