"""The recording transport: an httpx (or httpx2) transport that sends every request through the recorder.

The current `openai` and `anthropic` SDKs take an `httpx2` client and older ones an `httpx` client; the two share
an API, so the transport classes are made once per module, from the same code (`transport_classes`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from types import ModuleType
from typing import Any, Protocol


class Recording(Protocol):
    """What the transport uses of the recorder: its headers and the exchange every request goes through."""

    headers: Mapping[str, str]

    def exchange(self, url: str, body: bytes, *, stop_at_deadline: bool = True) -> Any:
        """A request about to go out to `url`, gated now (`Exchange`)."""
        ...

    async def settle(self, url: str, body: bytes) -> None:
        """Before an async request: the requests under way recorded first where the budget would refuse it."""
        ...


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

    def finish(self, error: BaseException | None = None) -> None:
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


class _Tee(ReplyTee):
    """A sync reply body, recorded when read to its end or closed."""

    def close(self) -> None:
        self.finish()
        self.inner.close()


class _AsyncTee(ReplyTee):
    """An async reply body, recorded when read to its end or closed."""

    async def __aiter__(self) -> Any:
        try:
            async for chunk in self.inner:
                self.chunks.append(chunk)
                yield chunk
        except GeneratorExit:  # the reader stopped early: `aclose` reports the body
            raise
        except BaseException as exc:  # broken off, or cancelled with its task: an attempt that got no answer
            self.finish(exc)
            raise
        self.finish()

    async def aclose(self) -> None:
        self.finish()
        await self.inner.aclose()


def _prepare(recorder: Recording, request: Any) -> None:
    """The recorder's headers on the request, and the reply asked for uncompressed: the boundary reads usage,
    finish reason and tool calls out of its bytes."""
    request.headers.update(recorder.headers)  # httpx headers: a name replaces its namesake in any case
    request.headers["accept-encoding"] = "identity"


def _reply(exchange: Any, response: Any, tee: type[ReplyTee]) -> Any:
    """The response handed on with its body recorded as it passes (an error one is read at once by the caller:
    an SDK may close it unread before retrying)."""
    response.stream = exchange.tee(response.status_code, response.headers, response.stream, tee)
    return response


class _Transport:
    """The sync recording transport around `inner` (a transport of the same HTTP module)."""

    tee: type[ReplyTee]

    def __init__(self, recorder: Recording, inner: Any) -> None:
        self.recorder, self.inner = recorder, inner

    def handle_request(self, request: Any) -> Any:
        request.read()
        _prepare(self.recorder, request)
        with self.recorder.exchange(str(request.url), request.content) as exchange:
            response = self.inner.handle_request(request)
        reply = _reply(exchange, response, self.tee)
        if not 200 <= response.status_code < 300:
            reply.read()
        return reply

    def close(self) -> None:
        self.inner.close()


class _AsyncTransport:
    """The async recording transport around `inner` (a transport of the same HTTP module)."""

    tee: type[ReplyTee]

    def __init__(self, recorder: Recording, inner: Any) -> None:
        self.recorder, self.inner = recorder, inner

    async def handle_async_request(self, request: Any) -> Any:
        await request.aread()
        _prepare(self.recorder, request)
        await self.recorder.settle(str(request.url), request.content)
        with self.recorder.exchange(str(request.url), request.content) as exchange:
            response = await self.inner.handle_async_request(request)
        reply = _reply(exchange, response, self.tee)
        if not 200 <= response.status_code < 300:
            await reply.aread()
        return reply

    async def aclose(self) -> None:
        await self.inner.aclose()


@cache
def transport_classes(http: ModuleType) -> tuple[type, type]:
    """The sync and async recording transport classes of one HTTP module (`httpx` or `httpx2`), made once: the
    transports above, as that module's transports, with reply bodies that are its byte streams."""
    tee = type("RecordingTee", (_Tee, http.SyncByteStream), {})
    async_tee = type("AsyncRecordingTee", (_AsyncTee, http.AsyncByteStream), {})
    sync_cls = type("RecordingTransport", (_Transport, http.BaseTransport), {"tee": tee})
    async_cls = type("AsyncRecordingTransport", (_AsyncTransport, http.AsyncBaseTransport), {"tee": async_tee})
    return sync_cls, async_cls
