"""Model exchanges bound to the run's deadline: every connect, send and read waits at most the time left.

An endpoint that dribbles its reply or keeps a stream alive with comments never trips a per-read timeout; bound
here, the exchange fails at the deadline instead, is recorded as an attempt that got no answer, and the run stops
as `timeout`. httpx builds its connection pool without a way to pass a network backend, so the pool's
(httpcore's, or httpcore2's) is wrapped in place with one whose waits are bounded.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any, Protocol

from looplab.shared_tools.live import WAIT_SLICE_S

__all__ = ["DEADLINE_PASSED"]

#: What an exchange cut short by the run's deadline fails with (as a timeout of the HTTP layer).
DEADLINE_PASSED = "looplab: the run's deadline passed during the model exchange"


class Deadlined(Protocol):
    """What a bounded backend reads and marks: the recorder of the run whose deadline bounds it."""

    #: Set once the run's deadline has cut an exchange short.
    out_of_time: bool

    def time_left(self) -> float:
        """Seconds left in the run."""
        ...


def bind_to_deadline(transport: Any, recorder: Deadlined, *, is_async: bool) -> None:
    """Have every connect, send and read under `transport` (an httpx or httpx2 one) wait at most the run's time left.

    httpx builds its connection pool without a way to pass a network backend, so the pool's is wrapped in place.
    """
    pool = transport._pool
    if not hasattr(pool, "_network_backend"):  # pragma: no cover - a release that moved it: fail, never run unbound
        raise RuntimeError(f"cannot bind {type(pool).__module__} to the run's deadline: no _network_backend")
    core = sys.modules[type(pool).__module__.split(".")[0]]
    sync_backend, async_backend = _deadline_backends(core)
    pool._network_backend = (async_backend if is_async else sync_backend)(pool._network_backend, recorder)


def _wait_for(recorder: Deadlined, timeout: float | None, timed_out: type[Exception]) -> tuple[float, bool]:
    """How long one network operation may wait: its own timeout or the run's time left, whichever is shorter, and
    whether the deadline is the shorter. None left: the exchange fails now with `timed_out`."""
    left = recorder.time_left()
    if left <= 0:
        recorder.out_of_time = True
        raise timed_out(DEADLINE_PASSED)
    return (left, True) if timeout is None or left < timeout else (timeout, False)


def _read_slice(recorder: Deadlined, timeout: float | None) -> tuple[float, bool]:
    """How long the next slice of a read may wait, and whether it is the read's last: a read waiting on the model
    looks again at the run's time left every `WAIT_SLICE_S` (a cancelled run has none), so a cancel cuts it within
    a slice. A read that timed out received nothing, so the next slice simply reads again."""
    bound = min(recorder.time_left(), timeout if timeout is not None else float("inf"))
    return (bound, True) if bound <= WAIT_SLICE_S else (WAIT_SLICE_S, False)


def _cut(recorder: Deadlined, timed_out: type[Exception]) -> Exception:
    recorder.out_of_time = True
    return timed_out(DEADLINE_PASSED)


class _Stream:
    """A network stream of `core` whose every wait is bounded by the run's time left (see `_wait_for`)."""

    core: ModuleType

    def __init__(self, inner: Any, recorder: Deadlined) -> None:
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
        core = self.core
        while True:  # in slices: see `_read_slice`
            wait, last = _read_slice(self.recorder, timeout)
            try:
                return self._bounded(wait, core.ReadTimeout, lambda wait: self.inner.read(max_bytes, wait))
            except core.ReadTimeout:
                if last:
                    raise
                timeout = None if timeout is None else timeout - wait

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._bounded(timeout, self.core.WriteTimeout, lambda wait: self.inner.write(buffer, wait))

    def close(self) -> None:
        self.inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        tls = self._bounded(
            timeout, self.core.ConnectTimeout, lambda wait: self.inner.start_tls(ssl_context, server_hostname, wait)
        )
        return type(self)(tls, self.recorder)

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class _Backend:
    """A network backend of `core` whose connections wait at most the run's time left, and are `stream`s."""

    core: ModuleType
    stream: type[_Stream]

    def __init__(self, inner: Any, recorder: Deadlined) -> None:
        self.inner, self.recorder = inner, recorder

    def _connect(self, connect: Callable[[float], Any], timeout: float | None) -> Any:
        timed_out = self.core.ConnectTimeout
        wait, deadline = _wait_for(self.recorder, timeout, timed_out)
        try:
            return self.stream(connect(wait), self.recorder)
        except timed_out as exc:
            if deadline:
                raise _cut(self.recorder, timed_out) from exc
            raise

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
        return self._connect(lambda wait: self.inner.connect_tcp(host, port, wait, *args, **kwargs), timeout)

    def connect_unix_socket(self, path: str, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
        return self._connect(lambda wait: self.inner.connect_unix_socket(path, wait, *args, **kwargs), timeout)

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class _AsyncStream:
    """`_Stream`, for an async backend."""

    core: ModuleType

    def __init__(self, inner: Any, recorder: Deadlined) -> None:
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
        core = self.core
        while True:  # in slices: see `_read_slice`
            wait, last = _read_slice(self.recorder, timeout)
            try:
                return await self._bounded(wait, core.ReadTimeout, lambda wait: self.inner.read(max_bytes, wait))
            except core.ReadTimeout:
                if last:
                    raise
                timeout = None if timeout is None else timeout - wait

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._bounded(timeout, self.core.WriteTimeout, lambda wait: self.inner.write(buffer, wait))

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> Any:
        tls = await self._bounded(
            timeout, self.core.ConnectTimeout, lambda wait: self.inner.start_tls(ssl_context, server_hostname, wait)
        )
        return type(self)(tls, self.recorder)

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class _AsyncBackend:
    """`_Backend`, async."""

    core: ModuleType
    stream: type[_AsyncStream]

    def __init__(self, inner: Any, recorder: Deadlined) -> None:
        self.inner, self.recorder = inner, recorder

    async def _connect(self, connect: Callable[[float], Any], timeout: float | None) -> Any:
        timed_out = self.core.ConnectTimeout
        wait, deadline = _wait_for(self.recorder, timeout, timed_out)
        try:
            return self.stream(await connect(wait), self.recorder)
        except timed_out as exc:
            if deadline:
                raise _cut(self.recorder, timed_out) from exc
            raise

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
        return await self._connect(lambda wait: self.inner.connect_tcp(host, port, wait, *args, **kwargs), timeout)

    async def connect_unix_socket(self, path: str, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
        return await self._connect(lambda wait: self.inner.connect_unix_socket(path, wait, *args, **kwargs), timeout)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


@cache
def _deadline_backends(core: ModuleType) -> tuple[type, type]:
    """Network backends of `core` (httpcore or httpcore2), sync and async, that wrap another and bound its waits
    by the run's deadline (see `_wait_for`); made once per module."""
    ns = {"core": core}
    stream = type("Stream", (_Stream, core.NetworkStream), ns)
    async_stream = type("AsyncStream", (_AsyncStream, core.AsyncNetworkStream), ns)
    backend = type("Backend", (_Backend, core.NetworkBackend), {**ns, "stream": stream})
    async_backend = type("AsyncBackend", (_AsyncBackend, core.AsyncNetworkBackend), {**ns, "stream": async_stream})
    return backend, async_backend
