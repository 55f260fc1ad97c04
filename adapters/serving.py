"""An ASGI app served on 127.0.0.1 from a daemon thread: how looplab's loopback servers run.

The socket is bound before the app is built, so the port is known (and taken) at once; the
server starts within a bounded wait and stops within uvicorn's graceful bound plus a join timeout.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import uvicorn
from starlette.types import ASGIApp

LOOPBACK = "127.0.0.1"
#: Seconds uvicorn gives open connections to finish when it stops.
GRACEFUL_SHUTDOWN_S = 1.0
START_TIMEOUT_S = 5.0
STOP_TIMEOUT_S = 5.0


class LoopbackServer:
    """Serves an app on 127.0.0.1 (port 0: a free one) from a daemon thread; a context manager.

    `build(port)` makes the app once the port is bound (an app that checks its own `Host` header
    needs to know it).
    """

    def __init__(
        self, build: Callable[[int], ASGIApp], port: int = 0, *, lifespan: str = "off", name: str = "looplab-server"
    ) -> None:
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
        # without it every keep-alive response waits ~40 ms on a delayed ACK.
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((LOOPBACK, port))
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(
            build(self.port),
            log_level="warning",
            access_log=False,
            lifespan=lifespan,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
        self._server = uvicorn.Server(config)
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
