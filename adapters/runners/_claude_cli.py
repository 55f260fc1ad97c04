"""The Claude Code CLI as the `claude_agent_sdk` runner drives it: which program, its environment, its options.

The SDK starts the Claude Code CLI its wheel bundles (`claude_agent_sdk/_bundled/claude`, a native program; this
runs that one and never a `claude` found on PATH) and talks to it over stdin and stdout. The CLI gets a fresh HOME,
TMPDIR and `CLAUDE_CONFIG_DIR` per run, bare mode (`CLAUDE_CODE_SIMPLE`: no hooks, plugins, CLAUDE.md discovery,
auto-memory, background prefetches or keychain; the API key only from the environment), no settings sources, and
looplab's child allowlist of the inherited environment with every other inherited variable blanked (a caller's
provider key, `HTTPS_PROXY` or `CLAUDE_CODE_USE_BEDROCK` never reaches it). Telemetry, error reporting, the
auto-updater and other non-essential traffic are off (`CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` and the variables
it stands for); traced on 2.1.332 (`strace -f`), the CLI then connects to the model URL on loopback and nothing
else, and starts no other program. It still reads the machine's managed policy (`/etc/claude-code/`), which an
administrator sets. Its retries are looplab's (`CLAUDE_CODE_MAX_RETRIES`, the CLI's own default being 10).

Without `CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS` the CLI's first request carries a `system`-role message that the
Messages API answers 400, and the CLI sends it again without one: a failed attempt every run, so it is set.

A run with a delegate (`agents=`) is the one exception to bare mode: bare mode withholds the CLI's `Agent` tool, the
only way it hands work to a subagent (measured on 2.1.332: `--tools Agent` offers nothing under `CLAUDE_CODE_SIMPLE`;
"Task", its old name, offers nothing either way). Outside it, the first user message of each agent carries
`<system-reminder>` blocks before the task (environment, model, date and, for the parent, the agent listing: the
`Agent` tool's description only points to that listing), and the subagent's report comes back framed ("[Subagent
hand-back]", every line indented). `DELEGATING` also keeps the subagent in the foreground (else the parent gets
"Async agent launched" and goes on) and declares the model refuses mid-conversation `system` messages (else each
agent's first request is answered 400 and resent). The built-in agent types are denied, so the delegate is the
only one listed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import claude_agent_sdk
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    PermissionResultAllow,
    ResultError,
    ResultMessage,
    SdkMcpTool,
    ToolPermissionContext,
    create_sdk_mcp_server,
    query,
)
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport
from claude_agent_sdk.types import AgentDefinition, McpSdkServerConfig

from looplab.adapters.boundary.processes import CHILD_ENV_ALLOWED
from looplab.adapters.boundary.tool_server import SERVER_NAME
from looplab.adapters.contract.bare import BareTool
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.model import DEFAULT_RETRIES, MESSAGES_MAX_TOKENS
from looplab.shared_tools.live import WAIT_SLICE_S

#: The CLI the wheel bundles: the one this runner drives (the SDK would otherwise look on PATH).
BUNDLED_CLI = Path(claude_agent_sdk.__file__).resolve().parent / "_bundled" / "claude"
#: The bare loop's bound in seconds (it has no run deadline; a scripted investigation takes a few).
BARE_SECONDS = 300.0
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
#: The CLI's one tool that starts a subagent (`ClaudeAgentOptions.agents`), offered to a run with a delegate.
SUBAGENT_TOOL = "Agent"
#: The agent types the CLI brings (2.1.332), denied as `Agent(type)` so that the delegate is the only one listed.
BUILT_IN_AGENTS = ("claude", "Explore", "general-purpose", "Plan", "fork")
#: What a run with a delegate changes in `QUIET` (see the module's docstring).
DELEGATING = {
    "CLAUDE_CODE_SIMPLE": "",  # bare mode withholds the Agent tool
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",  # which bare mode turned off
    "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS": "1",  # the subagent in the foreground: its report is the tool's result
    "CLAUDE_CODE_MODEL_CAPABILITIES": "-mid_conv_system",  # reminders in the user message, not a `system` one
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
    max_budget_usd: float | None = None,
    retries: int = DEFAULT_RETRIES,
    stderr: Any = None,
    agents: dict[str, AgentDefinition] | None = None,
) -> ClaudeAgentOptions:
    """The options every query here runs with: the model at `base_url`, the tools of the one MCP server `tools` and
    none of Claude Code's own, `can_use_tool` deciding each call, nothing read from the user's settings; with
    `agents`, those subagents and the one tool that starts them (`SUBAGENT_TOOL`), outside bare mode."""
    env = cli_environment(home, base_url, token, retries)
    return ClaudeAgentOptions(
        tools=[SUBAGENT_TOOL] if agents else [],  # none of Claude Code's own tools is offered, but the Agent tool
        agents=agents,
        disallowed_tools=[f"{SUBAGENT_TOOL}({t})" for t in BUILT_IN_AGENTS] if agents else [],
        mcp_servers={SERVER_NAME: tools},
        strict_mcp_config=True,
        can_use_tool=can_use_tool,
        system_prompt=system_prompt,
        model=model,
        max_turns=max_turns,
        max_budget_usd=max_budget_usd,
        setting_sources=[],
        thinking={"type": "disabled"},  # as the other runners ask: no extended thinking
        cwd=home,
        cli_path=BUNDLED_CLI,
        env=env | DELEGATING if agents else env,
        stderr=stderr,
    )


async def ask(
    task: str,
    options: ClaudeAgentOptions,
    seconds: float,
    replies: list[str] | None = None,
    stop: threading.Event | None = None,
) -> Any:
    """The query's result message; None if it did not come within `seconds`, or before `stop` was set (a cancelled
    run): the CLI is then killed.

    `replies` collects the id of each model reply the query yields (one a model call).
    """

    async def prompt() -> AsyncIterator[dict[str, Any]]:  # a stream: `can_use_tool` needs one
        yield {"type": "user", "message": {"role": "user", "content": task}}

    asking = prompt()
    # `query` gives `can_use_tool` its permission channel; a transport built here needs the same.
    transport = _Cli(asking, dataclasses.replace(options, permission_prompt_tool_name="stdio"))
    result = None
    with anyio.move_on_after(seconds) as scope:
        try:
            async with anyio.create_task_group() as group:
                if stop is not None:
                    group.start_soon(_cancel_when, stop, scope)
                async with contextlib.aclosing(query(prompt=asking, options=options, transport=transport)) as messages:
                    async for message in messages:
                        if isinstance(message, ResultMessage):
                            result = message
                        elif isinstance(message, AssistantMessage) and replies is not None and message.message_id:
                            if message.message_id not in replies:
                                replies.append(message.message_id)
                group.cancel_scope.cancel()  # the query ended: the watch is over
        except BaseExceptionGroup as raised:  # the query's own error (the SDK's `ResultError`), not the group's
            if len(raised.exceptions) == 1:
                raise raised.exceptions[0] from None
            raise
    return result


async def _cancel_when(stop: threading.Event, scope: anyio.CancelScope) -> None:
    """Cancel `scope` once `stop` is set, looked at every `WAIT_SLICE_S`."""
    while not stop.is_set():
        await anyio.sleep(WAIT_SLICE_S)
    scope.cancel()


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
            anyio.run(ask, task, options, BARE_SECONDS, replies)
    return len(replies)
