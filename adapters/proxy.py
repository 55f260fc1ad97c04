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
"""

from __future__ import annotations

import contextlib
import http.client
import json
import secrets
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from adapters.base import PROVIDER_OF_API, ModelServerUrls, StopRun
from adapters.loopback import LoopbackCheck
from adapters.serving import LOOPBACK, STOP_TIMEOUT_S

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
#: The largest request body relayed; a model request is kilobytes to a few megabytes.
MAX_REQUEST_BYTES = 64 * 2**20
#: How often the serving thread looks up to see whether it should stop: a run that ends waits for it, and every run
#: reaching the model through the proxy (a child process, some runners on Messages) starts and stops one. 200 idle
#: wake-ups a second cost less than the 25 ms a stop waited on average at 0.05 s.
POLL_S = 0.005
#: Seconds an idle keep-alive connection is held open for the child's next request.
IDLE_TIMEOUT_S = 30.0


class ModelProxy(ModelServerUrls):
    """One run's recording model proxy on 127.0.0.1; a context manager, gone when the run ends.

    `openai_base_url` and `anthropic_base_url` are what a child's SDK takes as its base URL, and
    `token` its API key (sent as `Authorization: Bearer` or `x-api-key`, as the SDKs do).
    """

    def __init__(self, session: RunSession, token: str | None = None) -> None:
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

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def __enter__(self) -> ModelProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving, drop the child's open connections and the upstream ones; bounded."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=STOP_TIMEOUT_S)
        self._server.server_close()
        self._server.drop_connections()

    def _target(self, path: str) -> str | None:
        """The upstream URL for a request path, or None when the run's model does not speak that API."""
        suffix = path.split("?")[0].removeprefix("/v1").lstrip("/")
        api = API_OF_PATH.get(suffix)
        if api is None or PROVIDER_OF_API[api] != self.session.model.provider:
            return None
        return f"{self._upstream}/{suffix}" if api != "messages" else f"{self._upstream}/v1/messages"

    def _headers(self, incoming: list[tuple[str, str]]) -> dict[str, str]:
        """The child's headers as sent on: the hop's own dropped, the model spec's added, the provider's key in."""
        kept = {k: v for k, v in incoming if k.lower() not in DROPPED_REQUEST}
        headers = self.session.recorder.outgoing(kept)
        key = self.session.model.key()
        if self.session.model.provider == "anthropic":
            headers["x-api-key"] = key
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
            return handler.send_json(status, {"error": {"type": kind, "message": why}}, extra)
        body = handler.read_body()
        if body is None:
            return handler.send_json(*_error(413, f"looplab relays request bodies up to {MAX_REQUEST_BYTES} bytes"))
        if handler.command != "POST" or (target := self._target(handler.path)) is None:
            asked, model = f"{handler.command} {handler.path}", self.session.model.label
            return handler.send_json(*_error(404, f"looplab: this run's model is {model}; {asked} is not its endpoint"))
        try:
            exchange = self.session.recorder.exchange(target, body)
        except StopRun as stop:  # the gate refused it: nothing was forwarded
            return handler.send_json(*_error(403, f"looplab refused the request: {stop.detail}", kind="looplab_limit"))
        upstream = handler.upstream = handler.upstream or self._connect()
        path = urlsplit(target).path + _query(handler.path)
        try:
            with exchange:
                upstream.request("POST", path, body=body, headers=self._headers(incoming))
                reply = upstream.getresponse()
        except (OSError, http.client.HTTPException) as exc:  # a failed attempt; the child sees a gateway error
            handler.drop_upstream()
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
                handler.send_stream(reply.status, headers, _chunks(reply, received), before_end=record)
            else:  # a whole reply: one body, no chunked relay
                received.append(reply.read())
                record()
                handler.send_whole(reply.status, headers, received[0])
        except _ChildGone:
            handler.close_connection = True
        except (OSError, http.client.HTTPException) as exc:  # the reply broke off: a failed attempt
            error, handler.close_connection = exc, True
            if isinstance(exc, http.client.IncompleteRead):
                received.append(exc.partial)
            if not handler.replied:
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


def _chunks(reply: http.client.HTTPResponse, received: list[bytes]) -> Iterator[bytes]:
    """A streamed reply as it arrives, kept in `received` for the record."""
    while chunk := reply.read1(65536):
        received.append(chunk)
        yield chunk


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
    proxy: ModelProxy

    def __init__(self, *args: Any) -> None:
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(*args)

    def server_bind(self) -> None:  # the plain bind: the parent's looks up the host's name, which can be slow
        self.socket.bind(self.server_address)
        self.server_address = self.socket.getsockname()

    def process_request(self, request: Any, client_address: Any) -> None:
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

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
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S
    server: _Server

    upstream: http.client.HTTPConnection | None = None
    #: Whether the current reply's status line has gone out: after it, an error can only close the connection.
    replied = False

    def do_POST(self) -> None:
        self.replied = False
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

    def read_body(self) -> bytes | None:
        """The request body (sized or chunked), or None when it is larger than looplab relays."""
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            parts, size = [], 0
            while (length := int(self.rfile.readline(100).split(b";")[0].strip() or b"0", 16)) > 0:
                size += length
                if size > MAX_REQUEST_BYTES:
                    self.close_connection = True
                    return None
                parts.append(self.rfile.read(length))
                self.rfile.readline(10)
            while self.rfile.readline(8192).strip():  # trailers
                pass
            return b"".join(parts)
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_REQUEST_BYTES:
            self.close_connection = True
            return None
        return self.rfile.read(length) if length > 0 else b""

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
        self.send_whole(status, [("Content-Type", "application/json"), *extra], json.dumps(body).encode())


def _error(status: int, message: str, kind: str | None = None) -> tuple[int, dict[str, Any]]:
    """An error both SDK families read: OpenAI's `{"error": {...}}` with Anthropic's `"type": "error"` beside it.

    The type follows the status as the providers spell it: a client that reads the type (DSPy does) must
    see a gateway error as a server's, which it retries, not as its own request's fault.
    """
    kind = kind or ("api_error" if status >= 500 else "invalid_request_error")
    return status, {"type": "error", "error": {"type": kind, "message": message, "code": None}}
