"""An in-process runner with its tools over MCP: the Guard's two calls, answered by a tool server.

Every adapter reaches the tools through `session.tools`: `tools` (name, description, JSON schema)
and `call(name, args, call_id)` (a reply with `result` and `is_error`). In-process that is the
Guard itself. With `tools="mcp"` it is `McpTools`, an MCP client (the official `mcp` SDK) of a
`ToolServer` serving the same Guard on loopback, so the same runner's tool calls cross the
boundary a runner in another process uses. The run's records are still the Guard's, written on
the server side; what the runner gets back is only what came over MCP.

MCP carries arguments as a JSON object. Arguments that are not one (a model's malformed JSON)
never reach the server: the client answers them with an error itself, as an MCP client
framework would, so that call has no Guard record.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from looplab.adapters.boundary.tool_server import CALL_ID_META, ToolServer

if TYPE_CHECKING:
    from looplab.shared_tools.guard import Guard

__all__ = ["serve_to"]

#: Seconds to connect to the tool server and list its tools.
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RemoteTool:
    """A tool as `tools/list` describes it: what a runner tells the model."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolReply:
    """What a tool call returned over MCP: the text the model reads, and whether it is an error."""

    result: str
    is_error: bool


class McpTools:
    """A blocking MCP client of one run's tool server (streamable HTTP, bearer token); a context manager.

    Its event loop runs on a thread of its own, so a runner can call it from any thread, several
    calls at once; each call waits at most `timeout` seconds.
    """

    def __init__(self, url: str, token: str, timeout: float) -> None:
        self.url, self.timeout = url, timeout
        self._headers = {"Authorization": f"Bearer {token}"}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="looplab-mcp-client", daemon=True)
        self._ready: concurrent.futures.Future[list[RemoteTool]] = concurrent.futures.Future()
        self._closing: asyncio.Event | None = None
        self._held: concurrent.futures.Future[None] | None = None
        self._session: Any = None
        self.tools: list[RemoteTool] = []

    def __enter__(self) -> McpTools:
        self._thread.start()
        self._held = asyncio.run_coroutine_threadsafe(self._hold(), self._loop)
        try:
            self.tools = self._ready.result(timeout=CONNECT_TIMEOUT_S)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, name: str, args: Any, call_id: str | None = None) -> ToolReply:
        """One `tools/call`, with the model's call id in `_meta`; never raises for what the tool did."""
        arguments = _as_object(args)
        if arguments is None:
            return ToolReply(f"InvalidArguments: not a JSON object, so not sent to the tools: {str(args)[:200]}", True)
        meta = {CALL_ID_META: call_id} if call_id else None
        future = asyncio.run_coroutine_threadsafe(self._session.call_tool(name, arguments, meta=meta), self._loop)
        try:
            result = future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return ToolReply(f"ToolTimeout: the tool server did not answer within {self.timeout:g} s", True)
        except Exception as exc:  # a protocol or transport failure: an observation, like any tool failure
            return ToolReply(f"ToolServerError: {type(exc).__name__}: {exc}", True)
        text = "".join(getattr(block, "text", "") for block in result.content)
        return ToolReply(text, bool(_field(result, "is_error")))

    def close(self) -> None:
        """Leave the MCP session (in the task that opened it) and stop the loop; bounded."""
        if self._closing is not None:
            self._loop.call_soon_threadsafe(self._closing.set)
        if self._held is not None:
            try:
                self._held.result(timeout=CONNECT_TIMEOUT_S)
            except BaseException:  # noqa: BLE001 - closing: a failed session has nothing left to lose
                self._held.cancel()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=CONNECT_TIMEOUT_S)
        if not self._thread.is_alive():
            self._loop.close()

    async def _hold(self) -> None:
        """Open the session, report the tools, and keep it open until `close` (anyio wants one task for both)."""
        self._closing = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                self._session = await _session(stack, self.url, self._headers)
                listed = await self._session.list_tools()
                tools = [RemoteTool(t.name, t.description or "", dict(_field(t, "input_schema"))) for t in listed.tools]
                self._ready.set_result(tools)
                await self._closing.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise


async def _session(stack: AsyncExitStack, url: str, headers: dict[str, str]) -> Any:
    """An initialized `ClientSession` over streamable HTTP: `mcp` 2.x takes an HTTP client, 1.x headers."""
    from mcp import ClientSession

    try:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = await stack.enter_async_context(create_mcp_http_client(headers=headers))
        streams = await stack.enter_async_context(streamable_http_client(url, http_client=client))
    except ImportError:  # mcp 1.x before streamable_http_client
        from mcp.client.streamable_http import streamablehttp_client

        streams = await stack.enter_async_context(streamablehttp_client(url, headers=headers))
    session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
    await session.initialize()
    return session


def _field(model: Any, name: str) -> Any:
    """A field by its `mcp` 2.x name, or its 1.x camelCase one (`input_schema`/`inputSchema`)."""
    head, *rest = name.split("_")
    return getattr(model, name) if hasattr(model, name) else getattr(model, head + "".join(w.title() for w in rest))


def _as_object(args: Any) -> dict[str, Any] | None:
    """The arguments as the JSON object MCP carries (parsed if a runner hands over their text), else None."""
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    return args if isinstance(args, dict) else None


@contextmanager
def serve_to(guard: Guard, max_seconds: float) -> Iterator[McpTools]:
    """A run's Guard served over MCP on loopback, and a client of it for the runner, its calls bound by the run's
    `max_seconds`; both gone on leaving."""
    with ToolServer(guard) as server:
        with McpTools(server.url, server.token, timeout=max_seconds + CONNECT_TIMEOUT_S) as tools:
            yield tools
