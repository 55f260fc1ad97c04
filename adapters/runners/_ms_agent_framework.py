"""Microsoft Agent Framework's pieces the `ms_agent_framework` runner assembles: its chat client for each wire API
on looplab's recorded SDK clients, the tools, the middleware that hands every call to the Guard, the bare loop.

Chat Completions (its default) goes through `OpenAIChatCompletionClient`, the Responses API through
`OpenAIChatClient` (`store=False`: the whole history is sent each call, as every other runner sends it), both on the
session's recorded `AsyncOpenAI`; Anthropic Messages through `AnthropicClient` on the session's recorded
`AsyncAnthropic`; Gemini's generateContent through `GeminiChatClient` (agent-framework-gemini) on the session's
recorded async google-genai client, each tool declared with its JSON schema as given. Each is asked for whole replies
or streamed ones (`run_agent`), the framework's own `stream=` on `Agent.run`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agent_framework import (
    Agent,
    AgentResponse,
    ChatContext,
    ChatMiddleware,
    FunctionInvocationContext,
    FunctionMiddleware,
    FunctionTool,
)
from agent_framework_openai import OpenAIChatClient, OpenAIChatCompletionClient

from looplab.adapters.boundary.plain import plain_openai_client
from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareTool
from looplab.adapters.contract.model import MESSAGES_MAX_TOKENS, Api
from looplab.adapters.contract.tools import ToolBoundary
from looplab.adapters.runners._gemini import gemini_class
from looplab.shared_tools import Tool


def build_client(api: Api, model: str, clients: Callable[..., Any], max_iterations: int | None) -> Any:
    """The framework's chat client for `api` on the SDK client `clients(...)` builds; `max_iterations` None keeps
    the framework's default."""
    config: dict[str, Any] = {} if max_iterations is None else {"max_iterations": max_iterations}
    if api == "gemini":
        GeminiChatClient = gemini_class(
            "ms_agent_framework", "ms-agent-framework", "agent_framework_gemini", "GeminiChatClient"
        )
        return GeminiChatClient(model=model, client=clients(), function_invocation_configuration=config)
    if api == "messages":
        from agent_framework_anthropic import AnthropicClient  # here: `anthropic` takes seconds to import

        return AnthropicClient(model=model, anthropic_client=clients(), function_invocation_configuration=config)
    cls = OpenAIChatClient if api == "responses" else OpenAIChatCompletionClient
    return cls(model, async_client=clients(), function_invocation_configuration=config)


def request_options(api: Api) -> dict[str, Any]:
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
    """Answers every function call with the Guard; the tool's body never runs (but a delegating tool's, `own`).

    The framework checks the arguments against the schema first, but a call that fails the check still reaches the
    middleware, with the arguments as parsed, so the Guard judges every call the model made to a tool it holds.
    """

    def __init__(self, boundary: ToolBoundary, own: Sequence[str] = ()) -> None:
        self.boundary, self.own = boundary, frozenset(own)

    async def process(self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]) -> None:
        if context.function.name in self.own:  # the agent-as-tool: its body runs the child agent
            await call_next()
            return
        # The arguments as the model sent them, parsed from JSON (raw when the schema check failed).
        arguments = context.arguments
        arguments = arguments.model_dump() if hasattr(arguments, "model_dump") else dict(arguments)
        record = self.boundary.call(context.function.name, arguments, context.metadata.get("call_id"))
        context.result = record.result


async def run_agent(agent: Agent, task: str, stream: bool, **options: Any) -> AgentResponse:
    """One run of `agent`, its replies whole (`run(task)`) or streamed (`run(task, stream=True)`, the updates put
    together by the framework's own `get_final_response()`): the same response either way."""
    if stream:
        return await agent.run(task, stream=True, **options).get_final_response()
    return await agent.run(task, **options)


def delegating_tool(
    delegate: Delegate, client: Any, tools: list[FunctionTool], boundary: ToolBoundary, options: dict[str, Any]
) -> FunctionTool:
    """`delegate` as an `Agent` on `client` (the delegates', with their cap), its parent's tools, Guard and request
    options, made a tool by the framework's agent-as-tool (`Agent.as_tool`): each call runs the child with the
    question as its task, in a session of its own, so its function invocation loop counts its own iterations. A
    delegate with a delegate of its own (a nested tree) is given it the same way (on the same `client`), that tool's
    body run past the Guard as its parent's is. `as_tool` runs the child streamed whatever the parent does
    (`self.run(..., stream=True)`, agent_framework/_agents.py:830-832).
    """
    below = delegate.delegate
    own = list(tools) if below is None else [*tools, delegating_tool(below, client, tools, boundary, options)]
    guard = GuardMiddleware(boundary, own=[] if below is None else [below.name])
    about = {"name": delegate.name, "description": delegate.description, "instructions": delegate.instructions}
    child = Agent(client, tools=own, middleware=[guard], default_options=options, **about)
    question = delegate.parameters["properties"]["question"]["description"]
    return child.as_tool(
        name=delegate.name, description=delegate.description, arg_name="question", arg_description=question
    )


class _Counter(ChatMiddleware):
    """Counts the model calls (chat middleware runs once per call of the function invocation loop)."""

    def __init__(self) -> None:
        self.calls = 0

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        self.calls += 1
        await call_next()


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
