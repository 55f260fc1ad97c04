"""DSPy's HTTP layer, lm15 (vendored in DSPy), with the run's model boundary in its transport.

`dspy.LM` takes an engine object: `engine()` builds lm15's own, for one provider and endpoint, and a run
gives it a `RecordedTransport`, whose every request passes the run's recorder as the SDK clients'
transports do (adapters/boundary/recorder.py): gated before it is sent, recorded with its reply. A bare loop gets
the same engine on lm15's plain transport. Given an engine, DSPy does not choose one on every call, as it
does for `engine="lm15"` or `"auto"`.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import cache
from typing import Any

from dspy._vendor.lm15.transports import (
    ReadTimeout,
    StdlibTransport,
    TransportError,
    TransportRequest,
    TransportResponse,
)
from dspy.clients.engines.lm15_engine import LM15Engine
from dspy.lm15 import RouterConfig

from looplab.adapters.boundary.deadline import DEADLINE_PASSED
from looplab.adapters.contract.model import Api
from looplab.adapters.runners._litellm import GEMINI_API_VERSION
from looplab.adapters.session import RunSession

#: The provider prefix of a "provider/model" string DSPy hands lm15, for each wire API.
LM15_PROVIDER: dict[Api, str] = {"chat": "openai", "messages": "anthropic", "gemini": "gemini"}


def lm15_base_url(provider: str, base_url: str | None) -> str | None:
    """`base_url` as lm15 takes it for `provider`: a Gemini one with the API version added, which google-genai (and so
    a google model's base URL) leaves out; None is lm15's default endpoint."""
    if base_url and provider == "gemini":
        return f"{base_url.rstrip('/')}/{GEMINI_API_VERSION}"
    return base_url


@contextmanager
def engine(
    provider: str, base_url: str | None, api_key: str, transport: StdlibTransport | None = None
) -> Iterator[LM15Engine]:
    """lm15's chat engine for `provider` ("openai": Chat Completions, "anthropic": Messages, "gemini":
    generateContent) at `base_url` (as lm15 takes it: `lm15_base_url`).

    DSPy only borrows an engine (`LM.close` leaves it open): it is closed here, with its transport.
    """
    wire = _wire(provider)
    urls = {wire: base_url} if base_url else None
    built = LM15Engine(RouterConfig(api_keys={wire: api_key}, base_urls=urls, transport=transport), model_type="chat")
    try:
        yield built
    finally:
        built.close()  # closes the transport lm15 built; one given stays the giver's
        if transport is not None:
            transport.close()


@cache
def _wire(provider: str) -> str:
    """lm15's name for `provider`'s chat endpoint, as DSPy resolves a "provider/model" string: e.g. openai-chat."""
    return LM15Engine(RouterConfig(env={}), model_type="chat").resolve(f"{provider}/model").provider


class RecordedTransport(StdlibTransport):
    """lm15's HTTP transport with every request through `session`'s recorder, bounded by the run's deadline.

    lm15's timeouts apply to each read, so a reply that dribbles never trips them: at the deadline a timer
    shuts every connection the transport opened, the read in flight fails, the recorder records what
    arrived and the run stops as `timeout` (as the httpx transports' deadline does, adapters/boundary/recorder.py).
    """

    def __init__(self, session: RunSession) -> None:
        seconds = session.limits.max_seconds
        connect = min(10.0, seconds)
        super().__init__(connect_timeout=connect, read_timeout=seconds, write_timeout=seconds, pool_timeout=seconds)
        self.recorder = session.recorder
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._expired = False
        self._deadline = threading.Timer(max(session.remaining_s(), 0.0), self._cut)
        self._deadline.daemon = True
        self._deadline.start()
        session.when_cancelled(self._cut)  # a cancelled run's exchange is cut as at its deadline

    def _open(self, *args: Any, **kwargs: Any) -> Any:
        """lm15's new connection, kept so the deadline can shut it (at once if the deadline has passed)."""
        conn = super()._open(*args, **kwargs)
        with self._lock:
            self._sockets.append(conn.sock)
            expired = self._expired
        if expired:
            _shut(conn.sock)
        return conn

    def _body(self, response: TransportResponse) -> Iterator[bytes]:
        with self._said_as_the_deadline():
            yield from response

    @contextmanager
    def _said_as_the_deadline(self) -> Iterator[None]:
        """A read the deadline's shut connection broke off fails as a timeout saying so, as the httpx transports'."""
        try:
            yield
        except (TransportError, OSError) as exc:
            if self._expired:
                raise ReadTimeout(DEADLINE_PASSED) from exc
            raise

    def _cut(self) -> None:
        with self._lock:
            self._expired, sockets = True, list(self._sockets)
        self.recorder.out_of_time = True
        for sock in sockets:
            _shut(sock)

    def close(self) -> None:
        self._deadline.cancel()
        super().close()

    def stream(self, request: TransportRequest) -> TransportResponse:
        """Send `request` unless the gate refuses it (`StopRun`); its reply is recorded when its body ends."""
        recorder, url, body = self.recorder, request.url, request.body
        request.headers = list(recorder.outgoing(dict(request.headers)).items())
        with recorder.exchange(url, body) as exchange, self._said_as_the_deadline():
            response = super().stream(request)
        reply = exchange.tee(response.status, dict(response.headers), self._body(response))

        def release(_consumed: bool) -> None:  # lm15 closes a response it stops reading: record what came
            reply.finish()
            response.close()

        return TransportResponse(
            status=response.status,
            reason=response.reason,
            headers=response.headers,
            http_version=response.http_version,
            chunks=iter(reply),
            release=release,
        )


def _shut(sock: socket.socket) -> None:
    """End both directions of `sock`: a read blocked on it returns at once (closing alone would not wake it)."""
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
