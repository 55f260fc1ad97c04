"""Microsoft Agent Framework: an `Agent` on a chat client whose function invocation layer runs the tool loop.

Chat Completions (its default) goes through `OpenAIChatCompletionClient`, the Responses API through
`OpenAIChatClient` (`store=False`: the whole history is sent each call, as every other runner sends it), both on the
session's recorded `AsyncOpenAI`; Anthropic Messages through `AnthropicClient` on the session's recorded
`AsyncAnthropic`. None of them is streamed. Its Anthropic client (`agent-framework-anthropic`) pins `anthropic<2`,
which looplab's other Anthropic runners cannot use, so the runner is left out of `looplab[all]` and runs in a runner
environment of its own.

The knob is the client's `function_invocation_configuration["max_iterations"]` (default 40, read from the installed
library). It counts model calls that are offered the tools; once they are spent (the last one still asked for tools,
whose calls the loop runs), the loop makes one more call with `tool_choice="none"` and returns normally with its
text as the answer, or "Function invocation limit reached before a final answer could be produced." when that reply
still asks for tools: N allows N + 1 calls, unset 41 (measured on 1.23.0). `max_iterations=max_steps`: that extra
call is refused at the model boundary, so every call is offered the tools, an answer on the last is final, and a run
still wanting tools ends `max_steps` (see docs/iteration-caps.md).

Tool calls reach the Guard through a function middleware that answers each call itself, with the model's arguments
as parsed, before the framework validates them against the schema. Two things stay the framework's: a call naming a
tool it does not hold is answered "Error: Requested function ... not found." without reaching the Guard, and a
middleware's answer carries no error flag (on Messages `is_error` is never set; the Guard's text says it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agent_framework import (
    Agent,
    ChatContext,
    ChatMiddleware,
    FunctionInvocationContext,
    FunctionMiddleware,
    FunctionTool,
)
from agent_framework._tools import normalize_function_invocation_configuration
from agent_framework_openai import OpenAIChatClient, OpenAIChatCompletionClient

from looplab.adapters.boundary.plain import plain_openai_client
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import MESSAGES_MAX_TOKENS, Api
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault
from looplab.adapters.contract.tools import ToolBoundary
from looplab.adapters.session import Adapter, RunSession
from looplab.shared_tools import Tool

__all__ = ["ADAPTER", "GuardMiddleware", "KNOB", "MsAgentFramework", "bare_run", "build_client", "function_tool"]

KNOB = "ChatClient(function_invocation_configuration={'max_iterations': })"


def build_client(api: Api, model: str, clients: Callable[..., Any], max_iterations: int | None) -> Any:
    """The framework's chat client for `api` on the SDK client `clients(...)` builds; `max_iterations` None keeps
    the framework's default."""
    config: dict[str, Any] = {} if max_iterations is None else {"max_iterations": max_iterations}
    if api == "messages":
        from agent_framework_anthropic import AnthropicClient  # here: `anthropic` takes seconds to import

        return AnthropicClient(model=model, anthropic_client=clients(), function_invocation_configuration=config)
    cls = OpenAIChatClient if api == "responses" else OpenAIChatCompletionClient
    return cls(model, async_client=clients(), function_invocation_configuration=config)


def _options(api: Api) -> dict[str, Any]:
    """Per-API request options: Responses stateless (by default it stores each reply and sends only what is new
    with `previous_response_id`); on Messages looplab's `max_tokens`, not the framework's 1024."""
    if api == "responses":
        return {"store": False}
    if api == "messages":
        return {"max_tokens": MESSAGES_MAX_TOKENS}
    return {}


def function_tool(tool: Tool | BareTool, fn: Callable[..., str] | None = None) -> FunctionTool:
    """`tool` as a framework function tool: its JSON schema sent as given, `fn` its body (None: `GuardMiddleware`
    answers every call, so no body runs; a tool given no body at all is declaration-only, and the framework would end
    the run at its first call)."""
    body = fn or _answered_by_middleware
    return FunctionTool(name=tool.name, description=tool.description, func=body, input_model=dict(tool.parameters))


def _answered_by_middleware(**_: Any) -> str:
    raise RuntimeError("a tool body ran: GuardMiddleware answers every call")


class GuardMiddleware(FunctionMiddleware):
    """Answers every function call with the Guard; the tool's body never runs.

    The framework checks the arguments against the schema first, but a call that fails the check still reaches the
    middleware, with the arguments as parsed, so the Guard judges every call the model made to a tool it holds.
    """

    def __init__(self, boundary: ToolBoundary) -> None:
        self.boundary = boundary

    async def process(self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]) -> None:
        # The arguments as the model sent them, parsed from JSON (raw when the schema check failed).
        arguments = context.arguments
        arguments = arguments.model_dump() if hasattr(arguments, "model_dump") else dict(arguments)
        record = self.boundary.call(context.function.name, arguments, context.metadata.get("call_id"))
        context.result = record.result


class _Counter(ChatMiddleware):
    """Counts the model calls (chat middleware runs once per call of the function invocation loop)."""

    def __init__(self) -> None:
        self.calls = 0

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        self.calls += 1
        await call_next()


class MsAgentFramework(Adapter):
    """Runner `ms_agent_framework`: an `Agent` run once, capped by the client's `max_iterations`."""

    name = "ms_agent_framework"
    summary = "Microsoft Agent Framework Agent (function_invocation_configuration max_iterations)"
    requires = ("agent_framework", "agent_framework_openai", "agent_framework_anthropic")
    in_all = False
    listed = 115
    extra = "ms-agent-framework"
    distribution = "agent-framework-core"
    apis = ("chat", "responses", "messages")
    knobs = (KNOB,)

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_iterations=max_steps`: the tool-less call the loop makes after them is refused at the model boundary."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """What the function invocation layer fills in for a configuration that leaves `max_iterations` out."""
        value = normalize_function_invocation_configuration(None)["max_iterations"]
        source = "agent_framework._tools.normalize_function_invocation_configuration(None)['max_iterations']"
        return {KNOB: KnobDefault(value=value, source=source)}

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent; the model boundary's refusal of the call past the cap propagates to `Adapter.run`."""
        api = self.api_for(session.model)
        clients = session.anthropic_client if api == "messages" else session.openai_client
        # cap:begin
        # max_iterations=max_steps; the tool-less call the loop makes after them is refused at the model boundary
        client = build_client(api, session.model.name, clients, session.cap)
        # cap:end
        agent = Agent(
            client,
            instructions=session.system_prompt,
            tools=[function_tool(t) for t in session.tools.tools],
            middleware=[GuardMiddleware(session.tools)],
            default_options=_options(api),
        )
        # No OpenTelemetry export: the framework's telemetry layer is off unless the process configures it.
        response = session.run_async(agent.run(task))
        return session.conclude(response.text)

    def bare_loop(self) -> BareRun:
        return bare_run


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same agent on Chat Completions with plain tools (the framework's own checks, then the function) and a
    plain SDK client; the model requests made.

    No boundary refuses the tool-less call past the cap: `max_iterations=max_steps - 1` makes at most `max_steps`
    (2 at `max_steps=1`: the knob's least is 1).
    """
    counter = _Counter()

    async def run() -> None:
        async with plain_openai_client(urls["openai"]) as sdk:
            client = build_client("chat", model, lambda: sdk, max(1, max_steps - 1))
            agent = Agent(
                client,
                instructions=system_prompt,
                tools=[function_tool(t, t.fn) for t in tools],
                middleware=[counter],
            )
            await agent.run(task)

    asyncio.run(run())
    return counter.calls


ADAPTER = MsAgentFramework()
