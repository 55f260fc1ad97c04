"""Claude Agent SDK: `query(prompt, ClaudeAgentOptions(max_turns=N))`, which drives the Claude Code CLI.

The SDK starts the Claude Code CLI its wheel bundles (`claude_agent_sdk/_bundled/claude`, a native program; this
runner runs that one and never a `claude` found on PATH) and talks to it over stdin and stdout. The loop runs in
the CLI, so on the model side the runner is out of process: the CLI reaches the model only through the run's
recording proxy (`ANTHROPIC_BASE_URL`, the run's token as its API key), always streamed, Anthropic Messages being
the only wire API it speaks. On the tool side the CLI gets one in-process SDK MCP server:
looplab's MCP server (`tool_server.mcp_server`) over the run's tools, handed to the SDK as the server's `instance`,
so every tool call goes through `Guard.call`, in this process (`tool_transport` "in-process") or, with
`tools="mcp"`, through the run's MCP client of the Guard served on loopback ("mcp"), as for an in-process runner.
`CLAUDE_AGENT_SDK_MCP_NO_PREFIX` has the CLI offer those tools under their own names (not
`mcp__looplab-tools__read_file`), as every other runner does.

None of Claude Code's own tools can run: `tools=[]` offers the model none of them, and a model that asks for one
anyway (`Bash`, `Write`, ...) gets the CLI's "No such tool available" error result and nothing runs (measured: the
request stays on the model boundary's record, the refusal goes back in the next request). `can_use_tool` is a
second wall: it allows the Guard's tools only, and hands any other name to the Guard, which refuses and records it.
The CLI gets a fresh HOME, TMPDIR and `CLAUDE_CONFIG_DIR` per run, bare mode (`CLAUDE_CODE_SIMPLE`: no hooks,
plugins, CLAUDE.md discovery, auto-memory, background prefetches or keychain; the API key only from the
environment), no settings sources, and looplab's child allowlist of the inherited environment with every other
inherited variable blanked (a caller's provider key, `HTTPS_PROXY` or `CLAUDE_CODE_USE_BEDROCK` never reaches it).
Telemetry, error reporting, the auto-updater and other non-essential traffic are off
(`CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` and the variables it stands for); traced on 2.1.332 (`strace -f`), the
CLI then connects to the proxy on loopback and nothing else, and starts no other program. It still reads the
machine's managed policy (`/etc/claude-code/`), which an administrator sets. Its retries are looplab's
(`CLAUDE_CODE_MAX_RETRIES`, the CLI's own default being 10), each recorded as a failed attempt.

Measured on 0.2.189 (CLI 2.1.332) against the scripted model: a run makes only its loop's model calls, no title,
summary, token-counting or quota call, and nothing but `POST /v1/messages`. Without
`CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS` the CLI's first request carries a `system`-role message that the scripted
model (as the Messages API) answers 400, and the CLI sends it again without one: a failed attempt every run, so the
variable is set. A turn of `max_turns` is one model call: `max_turns=N` lets exactly N calls go; the CLI runs the
tools the N-th asked for, then ends with a result of subtype `error_max_turns` ("Reached maximum number of turns
(N)") and exits 1, which the SDK raises as `ResultError` after yielding that result (the partial history is the
boundaries' record). Unset (the default, `None`), nothing bounds the loop. `max_budget_usd` prices calls by the
CLI's own table (a model it does not know is priced as a default one), so it is not set: looplab's budget gates
each call at the proxy. A call past `max_steps` is refused at the proxy whatever the CLI would do. The CLI's start
(one to two seconds before its first request, more on a busy machine) is on the run's clock.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import claude_agent_sdk
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultError,
    ResultMessage,
    SdkMcpTool,
    ToolPermissionContext,
    create_sdk_mcp_server,
    query,
)
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport
from claude_agent_sdk.types import McpSdkServerConfig

from looplab.adapters.boundary.processes import CHILD_ENV_ALLOWED, STDERR_LINES
from looplab.adapters.boundary.proxy import ModelProxy
from looplab.adapters.boundary.tool_server import SERVER_NAME, mcp_server, require_mcp
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import DEFAULT_RETRIES, MESSAGES_MAX_TOKENS, ModelSpec, ToolTransport
from looplab.adapters.contract.result import Finished, NativeCap, NativeEnd, RunResult
from looplab.adapters.contract.runner import KnobDefault, Probe, signature_default
from looplab.adapters.session import Adapter, RunSession
from looplab.shared_tools import Guard

__all__ = [
    "ADAPTER",
    "BUNDLED_CLI",
    "ClaudeAgentSdk",
    "agent_options",
    "bare_run",
    "check_bundled_cli",
    "cli_environment",
]

MAX_TURNS = "ClaudeAgentOptions(max_turns=)"
#: The CLI the wheel bundles: the one this runner drives (the SDK would otherwise look on PATH).
BUNDLED_CLI = Path(claude_agent_sdk.__file__).resolve().parent / "_bundled" / "claude"
#: Seconds past the run's deadline the loop is given to end on its own (the proxy refuses calls at the deadline
#: itself, so the CLI normally ends first) before it is cancelled and the CLI killed.
DEADLINE_GRACE_S = 0.5
#: The bare loop's bound in seconds (it has no run deadline; a scripted investigation takes a few).
BARE_SECONDS = 300.0
#: The tool transport `run` was asked for, read by `loop` (a context variable: runs may overlap in threads).
_TRANSPORT: contextvars.ContextVar[ToolTransport] = contextvars.ContextVar("claude_agent_sdk_tools")
#: What the CLI reads from its environment, beyond the proxy's URL and token and its own folders.
QUIET = {
    "CLAUDE_CODE_SIMPLE": "1",  # --bare: no hooks, plugins, CLAUDE.md, auto-memory, prefetches, keychain
    "CLAUDE_AGENT_SDK_MCP_NO_PREFIX": "1",  # the Guard's tools under their own names
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
    "CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS": "1",  # else a first request the Messages API refuses
    "CLAUDE_CODE_DISABLE_FEATURE_FLAGS": "1",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(MESSAGES_MAX_TOKENS),  # what the other Messages runners ask for
}


def cli_environment(home: Path, base_url: str, token: str, retries: int = DEFAULT_RETRIES) -> dict[str, str]:
    """The CLI's environment, as `ClaudeAgentOptions.env` (laid over the inherited one, which it cannot shrink):
    every inherited variable outside looplab's child allowlist blanked, a HOME of its own, the proxy as its model."""
    blanked = {k: "" for k in os.environ if k not in CHILD_ENV_ALLOWED}
    return (
        blanked
        | QUIET
        | {
            "HOME": str(home),
            "TMPDIR": str(home),  # its scratch files (`claude-UID/`) too
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": token,
            "CLAUDE_CODE_MAX_RETRIES": str(retries),  # looplab's --retries (the CLI's own default is 10)
        }
    )


class _Cli(SubprocessCLITransport):
    """The SDK's CLI transport, except that closing kills the CLI at once: by then the run has its record, and
    the SDK's own close waits up to 5 s for the CLI to flush a session file nobody reads (here, past the deadline)."""

    async def close(self) -> None:
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        await super().close()


class ClaudeAgentSdk(Adapter):
    """The Claude Agent SDK's `query`, capped by `ClaudeAgentOptions(max_turns=N)`."""

    name = "claude_agent_sdk"
    summary = "Claude Agent SDK query (ClaudeAgentOptions(max_turns=N)), driving the Claude Code CLI"
    requires = ("claude_agent_sdk", "mcp")
    listed = 117
    extra = "claude-agent-sdk"
    distribution = "claude-agent-sdk"
    apis = ("messages",)
    knobs = (MAX_TURNS,)
    out_of_process = True

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_turns` counts model calls (measured): N allows exactly N."""
        return NativeCap(knob=MAX_TURNS, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """Unset by default: `ClaudeAgentOptions.max_turns` is None, and the SDK then passes no `--max-turns`."""
        return {MAX_TURNS: signature_default(ClaudeAgentOptions, "max_turns")}

    def run(
        self,
        task: str,
        guard: Guard,
        limits: Limits,
        model: ModelSpec,
        probe: Probe | None = None,
        tools: ToolTransport = "in-process",
        *,
        system_prompt: str,
    ) -> RunResult:
        """`Adapter.run`, keeping `tools` for `loop`: the loop is out of process, so `Adapter.run` leaves the tool
        transport to it, and the in-process MCP server the CLI calls reaches the Guard either way."""
        require_mcp()  # imported off the run's clock
        chosen = _TRANSPORT.set(tools)
        try:
            return super().run(task, guard, limits, model, probe, tools, system_prompt=system_prompt)
        finally:
            _TRANSPORT.reset(chosen)

    def loop(self, task: str, session: RunSession) -> Finished:
        """One `query`; its CLI reaches the model through the proxy and the tools through the Guard only."""
        check_bundled_cli(self.name)
        with contextlib.ExitStack() as stack:
            if _TRANSPORT.get() == "mcp":  # the Guard served on loopback, and the SDK's server a client of it
                from looplab.adapters.boundary.mcp_tools import serve_to

                session.tools, session.tool_transport = stack.enter_context(serve_to(session)), "mcp"
            return self._query(task, session)

    def _query(self, task: str, session: RunSession) -> Finished:
        own = {t.name for t in session.tools.tools}

        async def only_the_guards(name: str, args: dict[str, Any], context: ToolPermissionContext) -> Any:
            if name in own:
                return PermissionResultAllow()
            # Not one of the run's tools: the Guard refuses it (nothing runs) and keeps the record.
            refused = session.tools.call(name, args, context.tool_use_id or "")
            return PermissionResultDeny(message=refused.result)

        errors: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        # looplab's MCP server over the run's tools (the Guard, or its client over loopback MCP): both have the
        # Guard's `tools` and `call`, which is all the server uses
        instance = mcp_server(session.tools)  # type: ignore[arg-type]
        server = McpSdkServerConfig(type="sdk", name=SERVER_NAME, instance=instance)
        with tempfile.TemporaryDirectory(prefix="looplab-claude-") as tmp, ModelProxy(session) as proxy:
            home = Path(tmp)
            # cap:begin
            max_turns = session.cap if session.knob == MAX_TURNS else None
            # cap:end
            options = agent_options(
                home,
                proxy.anthropic_base_url,
                proxy.token,
                server,
                only_the_guards,
                system_prompt=session.system_prompt,
                model=session.model.name,
                max_turns=max_turns,
                retries=session.model.retries,
                stderr=errors.append,
            )
            try:
                result = anyio.run(_ask, task, options, session.remaining_s() + DEADLINE_GRACE_S)
            except Exception as error:  # the CLI's error result, which the SDK raises as `ResultError`
                if session.stop is not None:  # the proxy's refusal: say so, as a runner in another process does
                    kind = type(error)
                    session.native_end = NativeEnd(
                        kind="refused by the model boundary",
                        exception=f"{kind.__module__}.{kind.__qualname__}",
                        message=session.stop.detail,
                    )
                raise
            finally:
                for line in errors:
                    logging.getLogger(f"{self.name} stderr").warning(line.rstrip())
        if result is None:
            return session.conclude(None, TimeoutError("the Claude Code CLI did not end by the run's deadline"))
        if result.subtype == "success" and not result.is_error:
            return session.conclude(result.result)
        # An API error the CLI gave up on comes as `success` with `is_error` and the error's text as its result.
        why = "; ".join(result.errors or []) or result.result or ""
        return session.conclude(None, _ResultError(f"{result.subtype}: {why}"[:300]))

    def bare_loop(self) -> BareRun:
        return bare_run


def check_bundled_cli(runner: str) -> None:
    """One line if the wheel's CLI is missing (an install from source, or a platform without a bundled CLI)."""
    if not BUNDLED_CLI.is_file():
        raise LooplabError(
            f"runner {runner!r} drives the Claude Code CLI its wheel bundles, and {BUNDLED_CLI} is missing: "
            "install a claude-agent-sdk wheel for this platform"
        )


def agent_options(
    home: Path,
    base_url: str,
    token: str,
    tools: McpSdkServerConfig,
    can_use_tool: Any,
    *,
    system_prompt: str,
    model: str,
    max_turns: int | None,
    retries: int = DEFAULT_RETRIES,
    stderr: Any = None,
) -> ClaudeAgentOptions:
    """The options every query here runs with: the model at `base_url`, the tools of the one MCP server `tools` and
    none of Claude Code's own, `can_use_tool` deciding each call, nothing read from the user's settings."""
    return ClaudeAgentOptions(
        tools=[],  # none of Claude Code's own tools is offered
        mcp_servers={SERVER_NAME: tools},
        strict_mcp_config=True,
        can_use_tool=can_use_tool,
        system_prompt=system_prompt,
        model=model,
        max_turns=max_turns,
        setting_sources=[],
        thinking={"type": "disabled"},  # as the other runners ask: no extended thinking
        cwd=home,
        cli_path=BUNDLED_CLI,
        env=cli_environment(home, base_url, token, retries),
        stderr=stderr,
    )


class _ResultError(Exception):
    """The CLI's result message said the query did not succeed (`error_max_turns`, `error_during_execution`, ...)."""


async def _ask(task: str, options: ClaudeAgentOptions, seconds: float, replies: list[str] | None = None) -> Any:
    """The query's result message; None if it did not come within `seconds` (the CLI is then killed).

    `replies` collects the id of each model reply the query yields (one a model call).
    """

    async def prompt() -> AsyncIterator[dict[str, Any]]:  # a stream: `can_use_tool` needs one
        yield {"type": "user", "message": {"role": "user", "content": task}}

    asking = prompt()
    # `query` gives `can_use_tool` its permission channel; a transport built here needs the same.
    transport = _Cli(asking, dataclasses.replace(options, permission_prompt_tool_name="stdio"))
    result = None
    with anyio.move_on_after(seconds):
        async with contextlib.aclosing(query(prompt=asking, options=options, transport=transport)) as messages:
            async for message in messages:
                if isinstance(message, ResultMessage):
                    result = message
                elif isinstance(message, AssistantMessage) and replies is not None and message.message_id:
                    if message.message_id not in replies:
                        replies.append(message.message_id)
    return result


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same query with none of looplab's boundaries: the CLI at the model directly, plain tools in an SDK MCP
    server, every call of theirs allowed; its model calls, counted from the replies it yields."""
    check_bundled_cli("claude_agent_sdk")

    def handler(fn: Any) -> Any:
        async def call(args: dict[str, Any]) -> dict[str, Any]:
            return {"content": [{"type": "text", "text": fn(**args)}]}

        return call

    server = create_sdk_mcp_server(
        SERVER_NAME, tools=[SdkMcpTool(t.name, t.description, t.parameters, handler(t.fn)) for t in tools]
    )

    async def allow(name: str, args: dict[str, Any], context: ToolPermissionContext) -> Any:
        return PermissionResultAllow()

    replies: list[str] = []
    with tempfile.TemporaryDirectory(prefix="looplab-claude-bare-") as tmp:
        options = agent_options(
            Path(tmp),
            urls["anthropic"],
            "bare",
            server,
            allow,
            system_prompt=system_prompt,
            model=model,
            max_turns=max_steps,
            stderr=lambda line: None,  # the CLI's complaints are not the bench's output
        )
        with contextlib.suppress(ResultError):  # at the cap
            anyio.run(_ask, task, options, BARE_SECONDS, replies)
    return len(replies)


ADAPTER = ClaudeAgentSdk()
