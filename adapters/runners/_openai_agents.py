"""The OpenAI Agents SDK's pieces the `openai_agents` runner assembles: the LiteLLM model, a tool, the delegate,
and the run itself, whole (`Runner.run`) or streamed (`Runner.run_streamed`).

A tool is a `FunctionTool` whose body takes the model's raw JSON string, so that the Guard sees the arguments as
sent. The delegate is the SDK's agent as a tool (`Agent.as_tool`): the child agent runs as a nested `Runner.run`
with the question as its input, and its final output is the tool's result; a child with a delegate of its own
is offered it the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agents import Agent, FunctionTool, Runner
from agents.exceptions import AgentsException
from agents.result import RunResultBase
from agents.tool_context import ToolContext

from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareTool
from looplab.adapters.contract.tools import ToolBoundary
from looplab.shared_tools import Tool


def litellm_model(name: str, base_url: str, key: str) -> Any:
    """The SDK's LiteLLM model, on LiteLLM offline and quiet (`litellm_route` imported it so)."""
    from agents.extensions.models.litellm_model import LitellmModel

    return LitellmModel(model=name, base_url=base_url, api_key=key)


def function_tool(tool: Tool | BareTool, call: Callable[[str, str | None], str]) -> FunctionTool:
    """`tool` as the SDK sees it: its own name, description and schema; the body is `call(raw_args, call_id)`."""

    async def invoke(ctx: ToolContext[Any], raw_args: str) -> str:
        # On a thread, so that a turn's parallel calls (asyncio tasks in the SDK) really overlap.
        return await asyncio.to_thread(call, raw_args, ctx.tool_call_id)

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.parameters,
        on_invoke_tool=invoke,
        # Strict mode would rewrite the schema (all fields required, no defaults); keep it as given.
        strict_json_schema=False,
    )


def guarded_tools(guard: ToolBoundary) -> list[FunctionTool]:
    """The run's tools, each a body that hands the raw JSON string to the Guard, so bad arguments become its
    observations (neither OpenAI API has an is_error field: the result text says it)."""

    def body(name: str) -> Callable[[str, str | None], str]:
        return lambda raw_args, call_id: guard.call(name, raw_args, call_id).result

    return [function_tool(t, body(t.name)) for t in guard.tools]


async def run_agent(
    agent: Agent[Any], task: str, *, stream: bool, counters: Callable[[dict[str, int | None]], None], **options: Any
) -> RunResultBase:
    """One run of `agent` on `task`: `Runner.run`, or with `stream` `Runner.run_streamed`, whose events are read to
    their end (its errors, `MaxTurnsExceeded` among them, are raised from `stream_events`).

    Either way `counters` is handed the SDK's own counts as the run left them: the requests in its usage (on the
    result, or on an exception's `run_data`) and, streamed, the result's `current_turn`.
    """
    held: Any = None  # what carries the run's context: its result, or a failed whole run's `run_data`
    streamed = None
    try:
        if stream:
            held = streamed = Runner.run_streamed(agent, task, **options)
            async for _ in streamed.stream_events():
                pass
            return streamed
        held = await Runner.run(agent, task, **options)
        return held
    except AgentsException as exc:
        held = held if held is not None else exc.run_data
        raise
    finally:
        wrapper = getattr(held, "context_wrapper", None)
        counters(
            {
                "context_wrapper.usage.requests": wrapper.usage.requests if wrapper is not None else None,
                "RunResultStreaming.current_turn": streamed.current_turn if streamed is not None else None,
            }
        )


def offered(
    tools: list[FunctionTool], delegate: Delegate | None, max_turns: int | None, *, stream: bool, **agent: Any
) -> list[FunctionTool]:
    """An agent's tools: the run's `tools`, and `delegate` as a tool if there is one, its child agent (`agent`:
    the model and settings) given the same `tools` and offered its own delegate the same way (a nested tree)."""
    if delegate is None:
        return tools
    below = offered(tools, delegate.delegate, max_turns, stream=stream, **agent)
    child = Agent(name=delegate.name, instructions=delegate.instructions, tools=below, **agent)
    return [*tools, delegating_tool(delegate, child, max_turns, stream=stream)]


def delegating_tool(delegate: Delegate, child: Agent[Any], max_turns: int | None, *, stream: bool) -> FunctionTool:
    """`child` as a tool of its parent, in the SDK's idiom (agents as tools, not a handoff: the child gets the
    parent's question as its input, `{"input": ...}`, and the parent goes on from its final output).

    The child's `Runner.run` counts its own turns up to `max_turns` (None: the SDK's `DEFAULT_MAX_TURNS`); the
    parent's `max_turns` does not count them. A `MaxTurnsExceeded` of the child's becomes the default failure text
    the parent's model reads; a `StopRun` from the model boundary is a BaseException, which the SDK's tool wrapper
    (`except Exception`) lets through, so it ends the whole run. With `stream` the child's run streams too
    (`on_stream`, given a callback, runs the nested agent with `Runner.run_streamed`).
    """
    streamed: dict[str, Any] = {"on_stream": _take_event} if stream else {}
    return child.as_tool(
        tool_name=delegate.name, tool_description=delegate.description, max_turns=max_turns, **streamed
    )


def _take_event(event: Any) -> None:
    """An `as_tool(on_stream=)` callback that reads each nested event and keeps none."""
