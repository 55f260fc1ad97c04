"""Pydantic AI's pieces the runner is made of: its model on the session's recorded client, the Guard's tools, the
raw-arguments hook, the agent, the delegating tool, and the bare loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Sequence
from typing import Any

from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.capabilities import Hooks
from pydantic_ai.exceptions import ToolFailed, UsageLimitExceeded
from pydantic_ai.messages import AgentStreamEvent, ToolCallPart
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RunUsage, UsageLimits

from looplab.adapters.boundary.plain import plain_http_client
from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareTool
from looplab.adapters.contract.model import Api
from looplab.adapters.runners._gemini import gemini_class
from looplab.adapters.session import RunSession
from looplab.shared_tools.guard import Tool as GuardTool


def build_model(api: Api, session: RunSession) -> Any:
    """The Pydantic AI model for `api`, on a provider built from the session's recorded SDK client."""
    name = session.model.name
    if api == "gemini":
        GoogleModel = gemini_class("pydantic_ai", "pydantic-ai", "pydantic_ai.models.google", "GoogleModel")
        GoogleProvider = gemini_class("pydantic_ai", "pydantic-ai", "pydantic_ai.providers.google", "GoogleProvider")
        return GoogleModel(name, provider=GoogleProvider(client=session.gemini_client()))
    if api == "messages":
        return AnthropicModel(name, provider=AnthropicProvider(anthropic_client=session.anthropic_client()))
    provider = OpenAIProvider(openai_client=session.openai_client())
    return (OpenAIChatModel if api == "chat" else OpenAIResponsesModel)(name, provider=provider)


def guarded_tool(t: GuardTool, session: RunSession) -> Tool[None]:
    """`t` as a Pydantic AI tool: the Guard's own name, description and schema; the body calls the Guard."""

    def call(ctx: RunContext[None], raw: Any) -> str:  # `raw`: see raw_args_hooks
        record = session.tools.call(t.name, raw, ctx.tool_call_id)
        if record.is_error:  # Pydantic AI's is_error: a 'failed' return (Anthropic is_error; {"error": ...} on OpenAI)
            raise ToolFailed(record.result)  # an observation, unlike ModelRetry it spends no retry budget
        return record.result

    return Tool.from_schema(call, name=t.name, description=t.description, json_schema=t.parameters, takes_ctx=True)


def raw_args_hooks() -> Hooks[None]:
    """Pass the model's arguments through untouched, so invalid ones become Guard observations.

    `Tool.from_schema` skips schema validation but still parses JSON, and a
    parse failure would be a retry prompt the Guard never sees (and a retry
    that counts against the tool's `max_retries`).
    """
    hooks: Hooks[None] = Hooks()

    @hooks.on.before_tool_validate  # async: Pydantic AI runs a sync hook on a worker thread, a hand-off a call
    async def wrap_raw(ctx: RunContext[None], /, *, call: ToolCallPart, tool_def: ToolDefinition, args: Any) -> dict:
        return {"raw": args}  # the tool body's one keyword: the JSON string or dict as the model sent it

    return hooks


def agent(model: Any, instructions: str, tools: list[Tool[None]], session: RunSession) -> Agent[None, str]:
    agent = Agent(
        model,
        instructions=instructions,
        tools=tools,
        capabilities=[raw_args_hooks()],
        # Retries (an unknown tool name, an empty reply) are model calls that request_limit counts too;
        # the default budget of 1 would end such a run as an error first, so only max_steps ends it.
        retries=session.limits.max_steps,
    )
    agent.instrument = False  # off by default already; this also overrides a global Agent.instrument_all()
    return agent


async def _take_events(ctx: RunContext[None], events: AsyncIterable[AgentStreamEvent]) -> None:
    """An `event_stream_handler` that reads the events to their end: given one, `Agent.run` streams each request."""
    async for _ in events:
        pass


def run_options(session: RunSession, limits: UsageLimits) -> dict[str, Any]:
    """`Agent.run`'s keywords for the run's limits and mode: with an `event_stream_handler` (`--stream on`) each
    model request streams (`ModelRequestNode.stream`; on Chat Completions with `include_usage`), else it is whole."""
    options: dict[str, Any] = {"usage_limits": limits}
    if session.model.stream:
        options["event_stream_handler"] = _take_events
    return options


def delegating_tool(delegate: Delegate, child: Agent[None, str], options: dict[str, Any]) -> Tool[None]:
    """The delegate as a tool, in Pydantic AI's idiom for agent delegation: the child runs with its parent's usage
    (`usage=ctx.usage`) and mode, and the delegates' limits (`options`), so the parent's `UsageLimits` count the
    child's requests (and, in a nested tree, its own child's, which runs on the same usage in turn), and the child's
    own limits are checked against that same usage."""

    async def ask(ctx: RunContext[None], raw: Any) -> str:  # `raw`: see raw_args_hooks
        try:
            question = delegate.question_in(raw)
        except ValueError as bad:  # an observation for the model, as a Guard tool's bad arguments are
            raise ToolFailed(str(bad)) from None
        result = await child.run(question, usage=ctx.usage, **options)
        return result.output

    return Tool.from_schema(
        ask, name=delegate.name, description=delegate.description, json_schema=delegate.parameters, takes_ctx=True
    )


def offered(
    model: Any, tools: list[Tool[None]], delegate: Delegate | None, session: RunSession, options: dict[str, Any]
) -> list[Tool[None]]:
    """An agent's tools: the run's `tools`, and `delegate` as a tool if there is one, its child agent given the same
    `tools` and offered its own delegate the same way (a nested tree), never itself."""
    if delegate is None:
        return tools
    child = agent(model, delegate.instructions, offered(model, tools, delegate.delegate, session, options), session)
    return [*tools, delegating_tool(delegate, child, options)]


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same agent on Responses with none of looplab's boundaries: plain provider client, plain tools."""
    import openai

    http = plain_http_client(openai, urls["openai"], is_async=True)
    provider = OpenAIProvider(base_url=urls["openai"], api_key="not-needed", http_client=http)
    agent = Agent(
        OpenAIResponsesModel(model, provider=provider),
        instructions=system_prompt,
        tools=[Tool.from_schema(t.fn, name=t.name, description=t.description, json_schema=t.parameters) for t in tools],
    )
    usage = RunUsage()  # the run adds to it in place, so it still counts when the cap raises

    async def run() -> None:
        async with http:
            await agent.run(task, usage=usage, usage_limits=UsageLimits(request_limit=max_steps))

    try:
        asyncio.run(run())
    except UsageLimitExceeded:  # raised before request max_steps + 1
        pass
    return usage.requests
