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
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import secrets
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from looplab.adapters.boundary.loopback import LoopbackCheck
from looplab.adapters.boundary.recorder import DEADLINE_PASSED, Exchange
from looplab.adapters.boundary.serving import HEAD_TIMEOUT_S, LOOPBACK, MAX_CONNECTIONS, STOP_TIMEOUT_S
from looplab.adapters.contract.errors import LooplabException, StopRun
from looplab.adapters.contract.model import PROVIDER_OF_API, ModelServerUrls, gemini_error
from looplab.adapters.contract.wire_apis import GEMINI, WIRE_APIS
from looplab.shared_tools.live import WAIT_SLICE_S

if TYPE_CHECKING:
    from looplab.adapters.boundary.recorder import ModelRecorder
    from looplab.adapters.contract.limits import Limits
    from looplab.adapters.contract.model import ModelSpec


class ProxiedRun(Protocol):
    """What the proxy reads of the run it serves (the session; the boundary knows no more of it than this)."""

    model: ModelSpec
    recorder: ModelRecorder
    limits: Limits

    def remaining_s(self) -> float:
        """Seconds left of the run's `max_seconds`."""
        ...

    def expire(self) -> None:
        """Stop the run as `timeout` (raises)."""
        ...


__all__ = [
    "API_OF_PATH",
    "ProxiedRun",
    "CHUNK_SIZE",
    "CONTENT_LENGTH",
    "DEFAULT_BASE_URLS",
    "DROPPED_REQUEST",
    "DROPPED_RESPONSE",
    "DeadlineTimeout",
    "GEMINI_METHODS",
    "IDLE_TIMEOUT_S",
    "MAX_CHUNK_LINE",
    "MAX_REQUEST_BYTES",
    "MAX_TRAILERS",
    "ModelProxy",
    "POLL_S",
    "REAP_EVERY_S",
    "RunEnded",
]

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
#: The largest request body relayed; a model request is kilobytes to a few megabytes.
MAX_REQUEST_BYTES = 64 * 2**20
#: How often the serving thread looks up to see whether it should stop: a run that ends waits for it, and every run
#: reaching the model through the proxy (a child process, some runners on Messages) starts and stops one. 200 idle
#: wake-ups a second cost less than the 25 ms a stop waited on average at 0.05 s.
POLL_S = 0.005
#: Seconds an idle keep-alive connection is held open for the child's next request.
IDLE_TIMEOUT_S = 30.0
#: How often the serving loop looks for connections past their bound.
REAP_EVERY_S = 0.25
#: The longest chunk-size line (size and extensions) and the most trailer lines a chunked body may have.
MAX_CHUNK_LINE = 1024
MAX_TRAILERS = 64
#: A chunk size as HTTP spells it: hexadecimal digits only (`int(x, 16)` would take "0x1f", "+1" or "1_0").
CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
#: A Content-Length as HTTP spells it: decimal digits only.
CONTENT_LENGTH = re.compile(r"[0-9]{1,20}")


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
        self._server = _Server((LOOPBACK, 0), _Handler)
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
            self.session.expire()
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

    def relay(self, handler: _Handler) -> None:
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
        handler: _Handler,
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
                    if upstream.sock is None:  # connected here, before the deadline can cut it (see `_Handler.cut`)
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


class _ChildGone(OSError):
    """The child closed its connection mid-reply: what was received is recorded as it stands."""


class DeadlineTimeout(LooplabException, TimeoutError):
    """The run's deadline cut the exchange short (its upstream connection was shut)."""

    def __init__(self) -> None:
        super().__init__(DEADLINE_PASSED)


class RunEnded(LooplabException, ConnectionAbortedError):
    """The run ended (its runner exited) with the exchange in flight: cut short, recorded as it stood."""

    def __init__(self) -> None:
        super().__init__("looplab: the run ended during the model exchange")


class _Unframed(Exception):
    """A request body that cannot be read as HTTP frames it (or one too large): refused with `status`."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def _refused(why: str) -> tuple[int, dict[str, Any]]:
    """What the child gets for a request the run's limits refuse: a 403 naming the limit (clients do not retry it)."""
    return _error(403, f"looplab refused the request: {why}", kind="looplab_limit")


def _chunks(reply: http.client.HTTPResponse, received: list[bytes], handler: _Handler) -> Iterator[bytes]:
    """A streamed reply as it arrives, kept in `received` for the record; one that was cut short fails."""
    while chunk := reply.read1(65536):
        received.append(chunk)
        yield chunk
    if handler.cut:
        raise handler.cut()


@dataclass
class _Connection:
    """What the server knows of one connection: enough to bound how long and how many it holds."""

    sock: socket.socket
    #: When it began waiting for its next request head (when it connected, or got its last reply).
    since: float
    #: Whether a request on it has shown the run's token (then it may idle `IDLE_TIMEOUT_S` between requests).
    trusted: bool = False
    #: Whether a request on it is being answered (a whole head came): never dropped then.
    busy: bool = False
    dropped: bool = False

    def drop(self) -> None:
        """Shut the socket: the thread serving it sees the end of its input and finishes."""
        self.dropped = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


def _tls_context() -> ssl.SSLContext:
    """The context the SDKs verify providers with: certifi's bundle where it is installed (httpx brings it)."""
    try:
        import certifi
    except ImportError:  # pragma: no cover - httpx depends on certifi
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


class _Server(ThreadingHTTPServer):
    """One thread per connection; each accepted socket sends without Nagle's delay, and is dropped on close."""

    daemon_threads = True
    block_on_close = False
    #: Connections the kernel queues before they are accepted (socketserver's default is 5): a burst of strangers
    #: must not fill the queue, or the child's connection waits a second for its retried handshake.
    request_queue_size = 128
    proxy: ModelProxy

    def __init__(self, *args: Any) -> None:
        self._open: dict[socket.socket, _Connection] = {}
        self._open_lock = threading.Lock()
        self._reaped_at = time.monotonic()
        #: The handlers with an exchange upstream in flight.
        self._watched: set[_Handler] = set()
        #: Why every exchange from now on is cut short, once the run's deadline has passed or the proxy is closing.
        self._cut: type[OSError] | None = None
        self._uncut = threading.Condition(self._open_lock)
        super().__init__(*args)

    def server_bind(self) -> None:  # the plain bind: the parent's looks up the host's name, which can be slow
        self.socket.bind(self.server_address)
        self.server_address = self.socket.getsockname()

    def process_request(self, request: Any, client_address: Any) -> None:
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._open_lock:
            held = [c for c in self._open.values() if not c.dropped]
            strangers = [c for c in held if not c.trusted and not c.busy]
            full = len(held) >= MAX_CONNECTIONS
            if full and strangers:
                min(strangers, key=lambda c: c.since).drop()
            if not full or strangers:
                self._open[request] = _Connection(request, time.monotonic())
        if full and not strangers:  # every connection held is the child's: the newcomer is turned away
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def connection(self, request: socket.socket) -> _Connection:
        """The record of the connection `request` (made when it was accepted)."""
        with self._open_lock:
            return self._open.get(request) or _Connection(request, time.monotonic())

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def service_actions(self) -> None:
        """Drop, every `REAP_EVERY_S`, the connections that have waited too long for a whole request head."""
        now = time.monotonic()
        if now - self._reaped_at < REAP_EVERY_S:
            return
        self._reaped_at = now
        with self._open_lock:
            for held in self._open.values():
                bound = IDLE_TIMEOUT_S if held.trusted else HEAD_TIMEOUT_S
                if not held.busy and not held.dropped and now - held.since > bound:
                    held.drop()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed is dropped; one whose peer went away or timed out says nothing (anyone may
        connect), anything else one line."""
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            print(f"looplab model proxy: dropped a connection: {type(error).__name__}: {error}", file=sys.stderr)

    def watch(self, handler: _Handler) -> None:
        """`handler` is about to exchange with the upstream: cut it with the others (now, if they have been cut)."""
        with self._open_lock:
            if self._cut is not None:
                handler.cut_upstream(self._cut)
            self._watched.add(handler)

    def unwatch(self, handler: _Handler) -> None:
        with self._open_lock:
            self._watched.discard(handler)
            self._uncut.notify_all()

    def cut_all(self, why: type[OSError]) -> None:
        """Cut short, failing with `why`, every exchange in flight and any that starts from now on: the run's time
        is up, or the proxy is closing."""
        with self._open_lock:
            self._cut = self._cut or why
            for handler in self._watched:
                handler.cut_upstream(self._cut)

    def wait_uncut(self, timeout: float) -> None:
        """Wait, at most `timeout` seconds, until no exchange is in flight (each cut one has been recorded)."""
        with self._uncut:
            self._uncut.wait_for(lambda: not self._watched, timeout)

    def shutdown(self) -> None:
        """Stop `serve_forever` now rather than at its next poll: ask, then wake its `select` with a connection.

        `BaseServer.shutdown` only sets its request flag (name-mangled, `_BaseServer__shutdown_request`) and
        waits for the loop to look; a run of a proxy-only runner would wait up to `POLL_S` at its end.
        """
        self._BaseServer__shutdown_request = True  # read by serve_forever after select returns
        with contextlib.suppress(OSError):
            socket.create_connection(self.server_address[:2], timeout=STOP_TIMEOUT_S).close()
        super().shutdown()

    def drop_connections(self) -> None:
        with self._open_lock:
            for held in self._open.values():
                held.drop()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S
    server: _Server

    upstream: http.client.HTTPConnection | None = None
    #: Whether the current reply's status line has gone out: after it, an error can only close the connection.
    replied = False
    #: What cut the current exchange short, if anything did (its upstream connection was shut): the error it fails with.
    cut: type[OSError] | None = None
    #: Whether the current request is Gemini's: its errors then go in Gemini's shape, which google-genai reads.
    gemini = False
    held: _Connection

    def setup(self) -> None:
        super().setup()
        self.held = self.server.connection(self.request)

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        finally:
            self.held.busy, self.held.since = False, time.monotonic()

    def parse_request(self) -> bool:
        whole = super().parse_request()
        self.held.busy = whole  # a whole head came: it is answered, whoever sent it
        return whole

    def shown_token(self) -> None:
        """The request showed the run's token: the connection may idle as the child's between requests."""
        self.held.trusted = True

    def cut_upstream(self, why: type[OSError]) -> None:
        """Cut the exchange in flight short, to fail with `why`: a blocked read of the reply ends at once."""
        self.cut = why
        if self.upstream is not None and (sock := self.upstream.sock) is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def do_POST(self) -> None:
        self.replied, self.cut = False, None
        self.gemini = self.path.split("?")[0].endswith(GEMINI_METHODS)
        self.server.proxy.relay(self)

    def drop_upstream(self) -> None:
        if self.upstream is not None:
            self.upstream.close()
            self.upstream = None

    def finish(self) -> None:
        self.drop_upstream()
        super().finish()

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST

    def log_message(self, format: str, *args: Any) -> None:  # the run's record is the log, not stderr
        pass

    def read_body(self) -> bytes:
        """The request body, sized or chunked; `_Unframed` (400, or 413 when it is larger than looplab relays)
        when HTTP's framing cannot tell where it ends."""
        encodings = self.headers.get_all("transfer-encoding") or []
        codings = [c.strip(" \t").lower() for value in encodings for c in value.split(",")]
        if codings:  # it overrides any Content-Length
            if codings != ["chunked"]:
                raise _Unframed(400, f"looplab reads only a chunked Transfer-Encoding, not {', '.join(codings)!r}")
            return self._read_chunked()
        # Only HTTP's own whitespace around a value: str.strip() would also take a form feed or a NEL off "5\x0c".
        lengths = {v.strip(" \t") for v in self.headers.get_all("content-length") or []}
        if len(lengths) > 1:
            raise _Unframed(400, f"the request has {len(lengths)} different Content-Length headers")
        text = lengths.pop() if lengths else "0"
        if not CONTENT_LENGTH.fullmatch(text):
            raise _Unframed(400, f"Content-Length is not a whole number of bytes: {text[:40]!r}")
        length = int(text)
        if length > MAX_REQUEST_BYTES:
            raise _Unframed(413, f"looplab relays request bodies up to {MAX_REQUEST_BYTES} bytes")
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            raise _Unframed(400, f"the body ended after {len(body)} of its {length} bytes")
        return body

    def _read_chunked(self) -> bytes:
        parts, size = [], 0
        while True:
            line = self.rfile.readline(MAX_CHUNK_LINE)
            if not line.endswith(b"\n"):
                raise _Unframed(400, f"a chunk-size line is cut off or longer than {MAX_CHUNK_LINE} bytes")
            digits = line.split(b";", 1)[0].strip()
            if not CHUNK_SIZE.fullmatch(digits):
                raise _Unframed(400, f"a chunk size is not a hexadecimal number: {digits[:40]!r}")
            length = int(digits, 16)
            if length == 0:
                break
            size += length
            if size > MAX_REQUEST_BYTES:
                raise _Unframed(413, f"looplab relays request bodies up to {MAX_REQUEST_BYTES} bytes")
            data = self.rfile.read(length)
            if len(data) < length:
                raise _Unframed(400, f"the chunked body ended {len(data)} bytes into a chunk of {length}")
            parts.append(data)
            if self.rfile.readline(3) not in (b"\r\n", b"\n"):
                raise _Unframed(400, "a chunk is longer than its size says (no line break after its data)")
        for _ in range(MAX_TRAILERS):
            line = self.rfile.readline(8192)
            if line in (b"\r\n", b"\n"):
                return b"".join(parts)
            if not line.endswith(b"\n"):
                raise _Unframed(400, "the chunked body's trailer is cut off")
        raise _Unframed(400, f"the chunked body has more than {MAX_TRAILERS} trailer lines")

    def send_whole(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self._start(status, [*headers, ("Content-Length", str(len(body)))])
        self._write(body)

    def send_stream(
        self, status: int, headers: list[tuple[str, str]], chunks: Iterator[bytes], before_end: Callable[[], None]
    ) -> None:
        """Relay `chunks` as they come; `before_end` runs once they are all read, before the child sees the end."""
        self._start(status, [*headers, ("Transfer-Encoding", "chunked")])
        for chunk in chunks:
            self._write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        before_end()
        self._write(b"0\r\n\r\n")

    def _start(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.replied = True
        self.send_response_only(status)
        for name, value in headers:
            self.send_header(name, value)
        self._write(None)

    def _write(self, data: bytes | None) -> None:
        """Send to the child (`None`: the headers); a child that has gone is `_ChildGone`, not a model failure."""
        try:
            self.end_headers() if data is None else self.wfile.write(data)
        except OSError as exc:
            raise _ChildGone(str(exc)) from exc

    def send_json(self, status: int, body: dict[str, Any], extra: list[tuple[str, str]] = ()) -> None:  # type: ignore[assignment]
        if self.gemini and isinstance(error := body.get("error"), dict):
            body = gemini_error(status, error["message"])
        self.send_whole(status, [("Content-Type", "application/json"), *extra], json.dumps(body).encode())


def _error(status: int, message: str, kind: str | None = None) -> tuple[int, dict[str, Any]]:
    """An error the OpenAI and Anthropic SDKs both read: OpenAI's `{"error": {...}}` with Anthropic's `"type": "error"`
    beside it (a Gemini request's goes in Gemini's shape: `_Handler.send_json`).

    The type follows the status as the providers spell it: a client that reads the type (DSPy does) must
    see a gateway error as a server's, which it retries, not as its own request's fault.
    """
    kind = kind or ("api_error" if status >= 500 else "invalid_request_error")
    return status, {"type": "error", "error": {"type": kind, "message": message, "code": None}}
