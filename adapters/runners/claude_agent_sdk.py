"""Claude Agent SDK: `query(prompt, ClaudeAgentOptions(max_turns=N))`, which drives the Claude Code CLI.

The loop runs in the CLI its wheel bundles (`_claude_cli`: which program, and the sealed environment it runs in),
so on the model side the runner is out of process: the CLI reaches the model only through the run's recording proxy
(`ANTHROPIC_BASE_URL`, the run's token as its API key), always streamed, Anthropic Messages being the only wire API
it speaks. The CLI has no setting for whole replies (it sends a whole request only as a fallback after a stream
failed, `CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK`), so the runner declares `streams = (True,)` and `--stream off`
is refused in one line. On the tool side the CLI gets one in-process SDK MCP server: looplab's MCP server
(`tool_server.mcp_server`) over the run's tools, handed to the SDK as the server's `instance`, so every tool call
goes through `Guard.call`, in this process (`tool_transport` "in-process") or, with `tools="mcp"`, through the
run's MCP client of the Guard served on loopback ("mcp"). `CLAUDE_AGENT_SDK_MCP_NO_PREFIX` has the CLI offer those
tools under their own names (not `mcp__looplab-tools__read_file`), as every other runner does.

None of Claude Code's own tools can run: `tools=[]` offers the model none of them, and a model that asks for one
anyway (`Bash`, `Write`, ...) gets the CLI's "No such tool available" error result and nothing runs (measured: the
request stays on the model boundary's record, the refusal goes back in the next request). `can_use_tool` is a
second wall: it allows the Guard's tools only, and hands any other name to the Guard, which refuses and records it.

With a delegate, the CLI's subagents: `ClaudeAgentOptions(agents={name: AgentDefinition(description, prompt=the
instructions, tools=the run's tools)})`, started by the CLI's `Agent` tool, the one built-in tool such a run offers
and `can_use_tool` allows (outside bare mode: `_claude_cli`). Measured on 2.1.332: the subagent's requests pass the
same proxy, its system prompt holds the instructions (after the SDK's preamble, before the CLI's subagent notes) and
its first user message ends with the `prompt` the parent wrote. `max_turns` counts the parent's calls only: the
subagent's loop takes `AgentDefinition.maxTurns`, unset here, so it is uncapped (a restless one went past 37 calls
under max_turns=6); at a `maxTurns` of N the parent gets an ordinary tool result ("NOTE: this agent stopped at its
N-turn limit before finishing ...") and goes on. looplab's max_steps and budgets, at the proxy, count both agents.

Measured on 0.2.189 (CLI 2.1.332) against the scripted model: a run makes only its loop's model calls, no title,
summary, token-counting or quota call, and nothing but `POST /v1/messages`. A turn of `max_turns` is one model
call: `max_turns=N` lets exactly N calls go; the CLI runs the tools the N-th asked for, then ends with a result of
subtype `error_max_turns` ("Reached maximum number of turns (N)") and exits 1, which the SDK raises as
`ResultError` after yielding that result (the partial history is the boundaries' record). Unset (the default,
`None`), nothing bounds the loop. `max_budget_usd` prices calls by the CLI's own table (a model it does not know is
priced as a default one), so a run leaves it unset and looplab's budget gates each call at the proxy; `looplab caps`
sets it (`Probe.budget_usd`, the runner's `cost_knob`) to measure where it stops a run, and one with a subagent.
A call past `max_steps` is refused at the proxy whatever the CLI would do. The CLI may start a tool while the
reply asking for it still streams, so the Guard's cutoff counts a call from its reply's status on
(`ModelRecorder.replies_begun`). The CLI's start (one to two seconds before its first request, more on a busy
machine) is on the run's clock.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import tempfile
from pathlib import Path
from typing import Any

import anyio
from claude_agent_sdk import ClaudeAgentOptions, PermissionResultAllow, PermissionResultDeny, ToolPermissionContext
from claude_agent_sdk.types import AgentDefinition, McpSdkServerConfig

from looplab.adapters.boundary.processes import STDERR_LINES
from looplab.adapters.boundary.proxy import ModelProxy
from looplab.adapters.boundary.tool_server import SERVER_NAME, mcp_server, require_mcp
from looplab.adapters.contract.bare import BareRun
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import ModelSpec, ToolTransport
from looplab.adapters.contract.result import Finished, NativeCap, NativeEnd
from looplab.adapters.contract.runner import KnobDefault, signature_default
from looplab.adapters.runners._claude_cli import SUBAGENT_TOOL, agent_options, ask, bare_run, check_bundled_cli
from looplab.adapters.session import Runner, RunSession

__all__ = ["RUNNER"]

MAX_TURNS = "ClaudeAgentOptions(max_turns=)"
#: Seconds past the run's deadline the loop is given to end on its own (the proxy refuses calls at the deadline
#: itself, so the CLI normally ends first) before it is cancelled and the CLI killed.
DEADLINE_GRACE_S = 0.5


class ClaudeAgentSdk(Runner):
    """The Claude Agent SDK's `query`, capped by `ClaudeAgentOptions(max_turns=N)`."""

    name = "claude_agent_sdk"
    summary = "Claude Agent SDK query (ClaudeAgentOptions(max_turns=N)), driving the Claude Code CLI"
    requires = ("claude_agent_sdk", "mcp")
    listed = 117
    extra = "claude-agent-sdk"
    distribution = "claude-agent-sdk"
    apis = ("messages",)
    knobs = (MAX_TURNS,)
    cost_knob = "ClaudeAgentOptions(max_budget_usd=)"
    out_of_process = True
    streams = (True,)  # the CLI streams every request
    delegation = "subagents (ClaudeAgentOptions.agents) started by the CLI's Agent tool; max_turns counts the parent's"
    delegation_gaps = {
        "nested": "a subagent gets the Agent tool but no delegate of its own: every level lists the session's one"
        " ClaudeAgentOptions.agents (Agent(name) in its tools does not narrow it, in its disallowedTools drops the"
        " tool), and its first request lists none (CLI 2.1.337: the listing comes with its first tool result)",
    }

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_turns` counts model calls (measured): N allows exactly N."""
        return NativeCap(knob=MAX_TURNS, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """Unset by default: `ClaudeAgentOptions.max_turns` is None, and the SDK then passes no `--max-turns`."""
        return {MAX_TURNS: signature_default(ClaudeAgentOptions, "max_turns")}

    def prepare(self, model: ModelSpec, tools: ToolTransport) -> ToolTransport:
        """Import the MCP SDK off the run's clock, and keep `tools` for `loop`: the loop is out of process, so
        `Runner.run` leaves the tool transport to it, and the in-process MCP server the CLI calls reaches the Guard
        either way."""
        require_mcp()
        return tools

    def loop(self, task: str, session: RunSession) -> Finished:
        """One `query`; its CLI reaches the model through the proxy and the tools through the Guard only."""
        check_bundled_cli(self.name)
        with contextlib.ExitStack() as stack:
            if session.prepared == "mcp":  # the Guard served on loopback, and the SDK's server a client of it
                from looplab.adapters.boundary.mcp_tools import serve_to

                session.tools, session.tool_transport = (
                    stack.enter_context(serve_to(session.guard, session.limits.max_seconds)),
                    "mcp",
                )
            return self._query(task, session)

    def _query(self, task: str, session: RunSession) -> Finished:
        own = {t.name for t in session.tools.tools}
        agents = None
        if (delegate := session.delegate) is not None:  # a subagent with the run's tools; the parent gets Agent too
            child = AgentDefinition(description=delegate.description, prompt=delegate.instructions, tools=sorted(own))
            agents, own = {delegate.name: child}, own | {SUBAGENT_TOOL}

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
                max_budget_usd=session.budget_usd,
                retries=session.model.retries,
                stderr=errors.append,
                agents=agents,
            )
            try:
                result = anyio.run(
                    ask, task, options, session.remaining_s() + DEADLINE_GRACE_S, None, session.cancelled
                )
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
        if result is not None:
            session.report_counters({"ResultMessage.num_turns": result.num_turns})
        if result is None:
            return session.conclude(None, TimeoutError("the Claude Code CLI did not end by the run's deadline"))
        if result.subtype == "success" and not result.is_error:
            return session.conclude(result.result)
        # An API error the CLI gave up on comes as `success` with `is_error` and the error's text as its result.
        why = "; ".join(result.errors or []) or result.result or ""
        return session.conclude(None, _ResultError(f"{result.subtype}: {why}"[:300]))

    def bare_loop(self) -> BareRun:
        return bare_run


class _ResultError(Exception):
    """The CLI's result message said the query did not succeed (`error_max_turns`, `error_during_execution`, ...)."""


RUNNER = ClaudeAgentSdk()
