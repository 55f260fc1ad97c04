"""An ASGI app served on 127.0.0.1 from a daemon thread, to the run's token holder only: looplab's loopback servers.

The socket is bound before the app is wrapped, so the port is known (and taken) at once; the
server starts within a bounded wait and stops within uvicorn's graceful bound plus a join timeout.

Every request passes `adapters.loopback.LoopbackGuard` first. Any local user can still open
connections, so the server also bounds what a connection costs it, whatever the peer does:

- at most `connection_limit()` connections are open (`MAX_CONNECTIONS`, fewer under a low
  file-descriptor limit). A newcomer beyond that closes the oldest connection that has not
  presented the token, busy or idle: the newcomer itself only when every other open one has. So
  idle or stalled strangers cannot lock the token holder out, and the holder's own connections
  are never closed to make room (uvicorn's `limit_concurrency` is not used: it answers the holder
  503 while strangers hold the connections);
- a connection must deliver a complete request head within `HEAD_TIMEOUT_S` of opening or of its
  previous response (partial data does not extend it, as it does uvicorn's keep-alive timer);
  a head over `MAX_HEAD_BYTES` is a 400;
- asyncio accepts at most `ACCEPT_BATCH` connections a turn of its loop (a quarter of the limit,
  at most). That is also how many times it tries `accept()` once file descriptors run out
  (then it waits 1 s), and when they do, the server closes the connections that have not
  presented the token, so the next accept finds room;
- what it logs (uvicorn's warnings and errors, the loop's errors) is at most `LOG_LINES` records
  every `LOG_WINDOW_S` seconds for the whole process, the next one saying how many were left out;
  a loop error is one line (an error inside the app keeps its traceback).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from looplab.adapters.boundary.loopback import LoopbackCheck, LoopbackGuard

LOOPBACK = "127.0.0.1"
#: Seconds uvicorn gives open connections to finish when it stops.
GRACEFUL_SHUTDOWN_S = 1.0
START_TIMEOUT_S = 5.0
STOP_TIMEOUT_S = 5.0
#: Open connections a server keeps at most (a run's child needs a handful).
MAX_CONNECTIONS = 64
#: Seconds a connection may take to deliver a complete request head, from opening or from its last response.
HEAD_TIMEOUT_S = 5.0
#: Bytes a request head may have (h11's default, made explicit).
MAX_HEAD_BYTES = 16 * 1024
#: Connections accepted per turn of the event loop: well under `MAX_CONNECTIONS`, so one burst of strangers
#: cannot push out a connection that arrived before them before its request head is read.
ACCEPT_BATCH = 16
#: Connections the kernel queues until they are accepted: a burst waits there instead of having its SYNs dropped.
LISTEN_BACKLOG = 1024
#: At most this many log lines every `LOG_WINDOW_S` seconds, from all of this process's loopback servers.
LOG_LINES = 5
LOG_WINDOW_S = 10.0


def connection_limit() -> int:
    """How many connections a server keeps open: `MAX_CONNECTIONS`, or a quarter of a lower file-descriptor limit."""
    try:
        import resource
    except ImportError:  # no such limit to respect (Windows)
        return MAX_CONNECTIONS
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return MAX_CONNECTIONS if soft == resource.RLIM_INFINITY else max(4, min(MAX_CONNECTIONS, soft // 4))


class LogBudget(logging.Filter):
    """At most `lines` records every `window_s` seconds pass; the first after a gap says how many were left out."""

    def __init__(
        self, lines: int = LOG_LINES, window_s: float = LOG_WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.lines, self.window_s, self._clock = lines, window_s, clock
        self._lock = threading.Lock()
        self._window_start = -window_s
        self._passed = self._left_out = 0

    def filter(self, record: logging.LogRecord) -> bool:
        with self._lock:
            now = self._clock()
            if now - self._window_start >= self.window_s:
                self._window_start, self._passed = now, 0
            if self._passed >= self.lines:
                self._left_out += 1
                return False
            self._passed += 1
            left_out, self._left_out = self._left_out, 0
        if left_out:
            record.msg, record.args = f"{record.getMessage()} ({left_out} more lines left out before this one)", None
        return True


#: The loopback servers' log: uvicorn's handlers (it is a child of `uvicorn.error`), within one `LogBudget`.
log = logging.getLogger("uvicorn.error.loopback")
log.addFilter(LogBudget())


class LoopbackServer:
    """Serves `app` on 127.0.0.1 (port 0: a free one) from a daemon thread, to holders of `token`; a context manager.

    Requests without the token, or with a `Host` or `Origin` not this server's, are refused before
    `app` sees them (`LoopbackGuard`); connections are bounded as the module says.
    """

    def __init__(
        self, app: ASGIApp, token: str, port: int = 0, *, lifespan: str = "off", name: str = "looplab-server"
    ) -> None:
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
        # without it every keep-alive response waits ~40 ms on a delayed ACK.
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((LOOPBACK, port))
        self.port: int = self._sock.getsockname()[1]
        check, limit = LoopbackCheck(token, self.port), connection_limit()
        config = uvicorn.Config(
            LoopbackGuard(app, check),
            http=functools.partial(_Connection, check=check, limit=limit),  # type: ignore[arg-type]
            loop="asyncio",  # the event loop whose accept errors are measured above
            ws="none",
            proxy_headers=False,
            log_level="warning",
            access_log=False,
            lifespan=lifespan,
            backlog=max(1, min(ACCEPT_BATCH, limit // 4)),
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
        self._server = _Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name=name, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> LoopbackServer:
        self._thread.start()
        tick = threading.Event()
        for _ in range(int(START_TIMEOUT_S / 0.01)):
            if self._server.started:
                return self
            if not self._thread.is_alive():
                break
            tick.wait(0.01)
        self.stop()
        raise RuntimeError(f"the loopback server did not start on port {self.port}")

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=STOP_TIMEOUT_S)
        self._sock.close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Server(uvicorn.Server):
    """uvicorn's server, its loop's errors answered by `_loop_error` and the kernel's queue `LISTEN_BACKLOG` long."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        asyncio.get_running_loop().set_exception_handler(self._loop_error)
        await super().startup(sockets=sockets)
        for sock in sockets or []:
            # asyncio listened with `backlog`, which is also how many it accepts a turn; only the queue grows.
            sock.listen(LISTEN_BACKLOG)

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """One budgeted line per loop error; when accepting ran out of descriptors, room made for the next accept."""
        error = context.get("exception")
        # accept() failed with EMFILE, ENFILE, ENOBUFS or ENOMEM (asyncio's only errors with a listening socket).
        if isinstance(error, OSError) and context.get("socket") is not None:
            dropped = 0
            for connection in list(self.server_state.connections):
                if isinstance(connection, _Connection) and not connection.trusted and connection.drop():
                    dropped += 1
            log.warning("accepting a connection failed (%s); closed %d without the token; retry in 1 s", error, dropped)
            return
        why = f": {type(error).__name__}: {error}" if error is not None else ""
        log.error("%s%s", context.get("message", "event loop error"), why)


#: Opening order of connections, across servers: the oldest stranger is the one closed first.
_opened = itertools.count()


class _Connection(H11Protocol):
    """uvicorn's HTTP/1.1 connection, bounded: a deadline for each request head, room made for newcomers.

    `trusted` once a request on it presented the token and this server's `Host`; such a connection
    is never closed to make room.
    """

    def __init__(self, *args: Any, check: LoopbackCheck, limit: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logger = log  # budgeted: a stranger can make uvicorn warn once per request
        self.trusted = False
        self.opened = next(_opened)
        self._check, self._limit = check, limit
        self._head_due: asyncio.TimerHandle | None = None
        self._checked: object = None  # the request scope whose headers were last checked

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()
        self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_due is not None:
            self._head_due.cancel()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if not self.trusted and self.scope is not None and self.scope is not self._checked:  # a new request head
            self._checked = self.scope
            self.trusted = self._check.refusal(self.headers) is None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._await_head()

    def drop(self) -> bool:
        """Reset the connection, so its descriptor is free at once even if its peer reads nothing; False if closing."""
        if self.transport.is_closing():
            return False
        self.transport.abort()
        return True

    def _await_head(self) -> None:
        """From now, a request head is due within `HEAD_TIMEOUT_S` (a request in progress when it is due is spared)."""
        if self._head_due is not None:
            self._head_due.cancel()
        if not self.transport.is_closing():
            self._head_due = self.loop.call_later(HEAD_TIMEOUT_S, self._head_overdue)

    def _head_overdue(self) -> None:
        self._head_due = None
        if self.cycle is None or self.cycle.response_complete:  # no request in progress: none arrived in time
            self.drop()

    def _make_room(self) -> None:
        """Beyond the limit, close the oldest open connection that has not presented the token (maybe this one)."""
        open_now = [c for c in self.connections if isinstance(c, _Connection) and not c.transport.is_closing()]
        if len(open_now) > self._limit:
            stranger = min((c for c in open_now if not c.trusted), key=lambda c: c.opened, default=None)
            if stranger is not None:
                stranger.drop()
