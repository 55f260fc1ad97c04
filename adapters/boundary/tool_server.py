"""The tool boundary for a runner in another process: one run's Guard served over MCP.

A runner that is not Python, or that is installed in its own environment, cannot call the
Guard's Python callables. It gets this server instead (the official `mcp` SDK's low-level server):
the Guard's tools with the same names, descriptions and JSON schemas; every `tools/call` goes
through `Guard.call`, so the run's records, repetition detection, approval (an effect is denied
when nobody can approve) and deadline are exactly those of an in-process call, and every failure
(an unknown tool, invalid arguments, a refused path) is an error result with the Guard's text,
never a protocol error. MCP hands the arguments over already parsed, so the Guard gets them as an
object, as from a runner whose SDK parses them (the Anthropic SDK's `tool_use.input`). A client may
name the model's tool call id in the request's `_meta` under `looplab/call_id`, so the record
carries it as an in-process call's would; without one the record gets `mcp-1`, `mcp-2`, ...

Over streamable HTTP (`ToolServer`), the server listens on 127.0.0.1 only and refuses, before
MCP sees it, a request without the run's token or with a `Host` or `Origin` not its own
(`adapters.loopback.LoopbackGuard`); connections that never present the token are bounded in number
and in time, so other local users cannot lock the token holder out (`adapters.serving`). Over stdio
(`serve_stdio`) the pipe is the child's alone, and stdout carries the protocol and nothing else
(`protocol_stdout`): what a team's tools print goes to stderr.

Works with `mcp` 1.x (handlers keyed by request type) and 2.x (handlers given at construction).
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import itertools
import os
import secrets
import sys
from collections.abc import Callable
from typing import IO, Any, TypeVar

from looplab.adapters.boundary.serving import LoopbackServer
from looplab.adapters.contract.errors import LooplabError
from looplab.shared_tools import Guard, ToolCallRecord
from looplab.shared_tools.daemon import DaemonPool

__all__ = ["SERVER_NAME", "ToolServer", "mcp_server", "protocol_stdout", "require_mcp", "serve_stdio"]

#: Where the MCP endpoint is served.
MCP_PATH = "/mcp"
#: The request `_meta` key under which a client may pass the model's tool call id.
CALL_ID_META = "looplab/call_id"
SERVER_NAME = "looplab-tools"

T = TypeVar("T")
_POOL = DaemonPool("looplab-mcp-tool")


class ToolServer:
    """One run's Guard served over MCP (streamable HTTP) on 127.0.0.1, for a runner in another process.

    A context manager: `url` and `token` are what the child needs (the token goes in its
    environment and comes back as `Authorization: Bearer TOKEN`); leaving stops the server within
    uvicorn's graceful bound (1 s) plus a bounded join, even with a tool call still running.
    """

    def __init__(self, guard: Guard, token: str | None = None, port: int = 0) -> None:
        self.guard = guard
        self.token: str = token or secrets.token_urlsafe(32)
        server = mcp_server(guard)
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from starlette.applications import Starlette
        from starlette.routing import Route

        manager = StreamableHTTPSessionManager(app=server)
        app = Starlette(routes=[Route(MCP_PATH, endpoint=_Endpoint(manager))], lifespan=lambda _: manager.run())
        self._server = LoopbackServer(app, self.token, port, lifespan="on", name="looplab-tool-server")
        self.port: int = self._server.port

    @property
    def url(self) -> str:
        return f"{self._server.url}{MCP_PATH}"

    def __enter__(self) -> ToolServer:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()


def protocol_stdout() -> IO[bytes]:
    """This process's stdout, kept for the MCP protocol alone; from now on fd 1 and `sys.stdout` are stderr.

    Called before a suite's tools are imported: a `print` in a team's code (at import or in a call) and whatever a
    child process that inherits fd 1 writes land on stderr, never among the protocol's messages.
    """
    sys.stdout.flush()
    protocol = os.dup(1)  # not inherited by children (Python's default for a new descriptor)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol, "wb")


def serve_stdio(guard: Guard, out: IO[bytes] | None = None) -> None:
    """Serve `guard`'s tools over this process's stdin and stdout (or `out`, from `protocol_stdout`) until the
    client closes them."""
    server = mcp_server(guard)
    import anyio
    from mcp.server.stdio import stdio_server

    async def serve() -> None:
        stdout = anyio.wrap_file(io.TextIOWrapper(out, encoding="utf-8")) if out is not None else None
        async with stdio_server(stdout=stdout) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    asyncio.run(serve())


def mcp_server(guard: Guard) -> Any:
    """An `mcp` low-level `Server` whose tools are `guard`'s and whose every call goes through it."""
    require_mcp()
    import mcp.types as types
    from mcp.server.lowlevel import Server

    tools = [types.Tool(name=t.name, description=t.description, inputSchema=t.parameters) for t in guard.tools]
    numbers = itertools.count(1)

    async def call(name: str, arguments: dict[str, Any] | None, meta: Any) -> Any:
        given = meta.get(CALL_ID_META) if isinstance(meta, dict) else getattr(meta, CALL_ID_META, None)
        call_id = given if isinstance(given, str) else f"mcp-{next(numbers)}"
        record: ToolCallRecord = await _in_daemon_thread(lambda: guard.call(name, arguments or {}, call_id))
        text = types.TextContent(type="text", text=record.result)
        return types.CallToolResult(content=[text], isError=record.is_error)

    if hasattr(Server, "add_request_handler"):  # mcp 2: handlers given to the constructor, called with (ctx, params)

        async def list_tools_2(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(tools=tools)

        async def call_tool_2(ctx: Any, params: Any) -> Any:
            return await call(params.name, params.arguments, params.meta)

        return Server(SERVER_NAME, on_list_tools=list_tools_2, on_call_tool=call_tool_2)

    # mcp 1: handlers keyed by request type, called with the request. Not the `call_tool()` decorator:
    # from 1.10 on it validates arguments against the schema itself, and the Guard's error text is the contract.
    async def list_tools_1(request: Any) -> Any:
        return types.ServerResult(types.ListToolsResult(tools=tools))

    async def call_tool_1(request: Any) -> Any:
        params = request.params
        return types.ServerResult(await call(params.name, params.arguments, getattr(params, "meta", None)))

    server = Server(SERVER_NAME)
    server.request_handlers[types.ListToolsRequest] = list_tools_1
    server.request_handlers[types.CallToolRequest] = call_tool_1
    return server


def require_mcp() -> None:
    """Import the parts of the SDK used here; a missing or unusable `mcp` is one line naming the extra."""
    try:
        import mcp.server.lowlevel
        import mcp.server.stdio
        import mcp.server.streamable_http_manager
        import mcp.types  # noqa: F401
    except ImportError as exc:
        why = f"the installed one does not import: {exc}" if importlib.util.find_spec("mcp") else "it is not installed"
        raise LooplabError(
            f"serving tools over MCP needs 'mcp' 1.8 or newer ({why}): pip install 'looplab[mcp]'"
        ) from None


class _Endpoint:
    """The session manager as an ASGI app (Starlette routes a plain class instance to it as one)."""

    def __init__(self, manager: Any) -> None:
        self._manager = manager

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._manager.handle_request(scope, receive, send)


async def _in_daemon_thread(fn: Callable[[], T]) -> T:
    """`fn()` on a daemon thread, awaited; if the request is cancelled (the server stops) it is abandoned.

    Not `anyio.to_thread`: its threads are not daemons, so a tool still running would hold the
    process at exit, and its wait is not cancellable on every anyio version.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if done.done():  # cancelled meanwhile
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def work() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (fn(), None)
        except BaseException as exc:  # handed to the awaiting request
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop is closed: the server stopped and nobody waits for this
            pass

    _POOL.submit(work)
    return await done
