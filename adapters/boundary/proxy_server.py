"""The proxy's HTTP side: a threaded server on loopback whose connections are bounded, and a handler that reads a
request body only as HTTP frames it and writes the reply the relay hands it.

What it holds, whatever a client sends: a body it cannot frame (`Content-Length: abc`, two lengths, a chunk size
that is not hexadecimal, a chunk longer or shorter than it says, a body that ends early) is refused (400, or 413
past `MAX_REQUEST_BYTES`); a connection that has not sent a whole request head within `HEAD_TIMEOUT_S` of
connecting (or of its last reply, before it has ever shown the token) is dropped, and at most `MAX_CONNECTIONS`
are held: a new one past that drops the oldest that has never shown the token.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from looplab.adapters.boundary.serving import HEAD_TIMEOUT_S, MAX_CONNECTIONS, STOP_TIMEOUT_S
from looplab.adapters.contract.model import gemini_error
from looplab.adapters.contract.wire_apis import GEMINI

#: The largest request body relayed; a model request is kilobytes to a few megabytes.
MAX_REQUEST_BYTES = 64 * 2**20
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


class Relay(Protocol):
    """What the server hands each request to (the proxy)."""

    def relay(self, handler: RelayHandler) -> None:
        """Answer the request `handler` has read the head of."""
        ...


class _ChildGone(OSError):
    """The child closed its connection mid-reply: what was received is recorded as it stands."""


class _Unframed(Exception):
    """A request body that cannot be read as HTTP frames it (or one too large): refused with `status`."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


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


class RelayServer(ThreadingHTTPServer):
    """One thread per connection; each accepted socket sends without Nagle's delay, and is dropped on close."""

    daemon_threads = True
    block_on_close = False
    #: Connections the kernel queues before they are accepted (socketserver's default is 5): a burst of strangers
    #: must not fill the queue, or the child's connection waits a second for its retried handshake.
    request_queue_size = 128
    proxy: Relay

    def __init__(self, *args: Any) -> None:
        self._open: dict[socket.socket, _Connection] = {}
        self._open_lock = threading.Lock()
        self._reaped_at = time.monotonic()
        #: The handlers with an exchange upstream in flight.
        self._watched: set[RelayHandler] = set()
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

    def watch(self, handler: RelayHandler) -> None:
        """`handler` is about to exchange with the upstream: cut it with the others (now, if they have been cut)."""
        with self._open_lock:
            if self._cut is not None:
                handler.cut_upstream(self._cut)
            self._watched.add(handler)

    def unwatch(self, handler: RelayHandler) -> None:
        """`handler`'s exchange with the upstream is over (recorded, whether or not it was cut)."""
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
        """Shut every connection held (the proxy is closing)."""
        with self._open_lock:
            for held in self._open.values():
                held.drop()


class RelayHandler(BaseHTTPRequestHandler):
    """One connection's requests, each handed to the relay (`server.proxy`), with the upstream connection kept
    for its next one."""

    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S
    server: RelayServer

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
        """Any request, whatever its method: the relay answers it."""
        self.replied, self.cut = False, None
        self.gemini = self.path.split("?")[0].endswith(GEMINI.suffixes)
        self.server.proxy.relay(self)

    def drop_upstream(self) -> None:
        """Close the upstream connection: the next request makes a new one."""
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
        """Send a reply with its whole body."""
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
        """Send `body` as JSON (an error in Gemini's shape for a Gemini request, which google-genai reads)."""
        if self.gemini and isinstance(error := body.get("error"), dict):
            body = gemini_error(status, error["message"])
        self.send_whole(status, [("Content-Type", "application/json"), *extra], json.dumps(body).encode())
