"""LangChain 1.x `create_agent`, capped by `ModelCallLimitMiddleware(run_limit=max_steps)`.

The agent graph runs on a LangChain chat model for Chat Completions (its
default), Responses, Anthropic Messages or Gemini's generateContent; the model
and the tools come from `adapters._langchain`. Replies come whole, or streamed
with `--stream on` (the chat model's own `streaming=True`: `_langchain.chat_model`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware, ToolCallLimitMiddleware
from langchain.agents.middleware.model_call_limit import ModelCallLimitExceededError
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI

from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault, signature_default
from looplab.adapters.runners._langchain import (
    chat_model,
    conclude,
    delegating_tool,
    guard_tools,
    no_tracing,
    plain_chat_model,
    plain_tools,
)
from looplab.adapters.session import Runner, RunSession

__all__ = ["RUNNER"]


def recursion_backstop(model_calls: int) -> int:
    """A `recursion_limit` the middleware always reaches first.

    Each model call takes 4 super-steps here (limit check, model, count, tools): the middleware needs
    `4 * max_steps + 1` (measured). Twice that leaves room for a middleware node added later.
    """
    return 8 * model_calls + 10


MODEL_CALLS = "ModelCallLimitMiddleware(run_limit=, exit_behavior='error')"
MODEL_CALLS_END = "ModelCallLimitMiddleware(run_limit=, exit_behavior='end')"
TOOL_CALLS = "ToolCallLimitMiddleware(run_limit=)"
RECURSION = "recursion_limit"


class LangChainAgent(Runner):
    """`create_agent(model, tools, system_prompt=..., middleware=[ModelCallLimitMiddleware])`."""

    name = "langchain"
    summary = "LangChain 1.x create_agent"
    requires = ("langchain", "langchain_openai", "langchain_anthropic")
    listed = 20
    extra = "langchain"
    distribution = "langchain"
    apis = ("chat", "responses", "messages", "gemini")
    streams = (False, True)
    knobs = (MODEL_CALLS, MODEL_CALLS_END, TOOL_CALLS, RECURSION)
    delegation = "subagents as tools: a tool invoking a second create_agent (its own invoke, uncounted by the parent)"
    ending_tool = "BaseTool(return_direct=True)"

    def native_cap(self, limits: Limits) -> NativeCap:
        """`run_limit=max_steps` model calls; ends by raising `ModelCallLimitExceededError`."""
        return NativeCap(
            knob=f"{MODEL_CALLS} (recursion_limit={recursion_backstop(limits.max_steps)} backstop)",
            value=limits.max_steps,
        )

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """The middlewares' `run_limit` defaults, and the `recursion_limit` create_agent binds to its graph."""
        model_calls = signature_default(ModelCallLimitMiddleware, "run_limit")
        probe = create_agent(ChatOpenAI(api_key="unused", model="unused"), [])  # built offline: nothing is sent
        return {
            MODEL_CALLS: model_calls,
            MODEL_CALLS_END: model_calls,
            TOOL_CALLS: signature_default(ToolCallLimitMiddleware, "run_limit"),
            RECURSION: KnobDefault(value=probe.config["recursion_limit"], source="create_agent(...).config"),
        }

    def loop(self, task: str, session: RunSession) -> Finished:
        """Build the agent and run it once; the last AI message is the answer (`_langchain.conclude`)."""
        _, config = _cap(session.knob, session.cap)
        # Every agent below the run's is capped at `session.child_cap` (None: create_agent's own defaults).
        _, child_config = _cap(session.knob, session.child_cap)
        model, tools = chat_model(self, session), guard_tools(session.tools, session.ending_tool)

        def build(system_prompt: str, delegate: Delegate | None, cap: int | None, name: str | None = None) -> Any:
            """An agent with the run's model and tools and a cap middleware of its own (`cap`), offered `delegate` as
            a subagent tool, built this same way (its own delegate included) and run in an invoke of its own."""
            middleware, _ = _cap(session.knob, cap)
            offered = tools
            if delegate is not None:
                child = build(delegate.instructions, delegate.delegate, session.child_cap, delegate.name)
                offered = [*tools, delegating_tool(delegate, child, child_config)]
            return create_agent(model, offered, system_prompt=system_prompt, middleware=middleware, name=name)

        agent = build(session.system_prompt, session.delegate, session.cap)
        with no_tracing():
            try:
                state = agent.invoke({"messages": [HumanMessage(task)]}, config)
            except ModelCallLimitExceededError as exc:  # the middleware's counts are on its exception only
                counts = {"run_count": exc.run_count, "thread_count": exc.thread_count}
                session.report_counters({f"ModelCallLimitExceededError.{k}": v for k, v in counts.items()})
                raise
        last = state["messages"][-1]
        return conclude(session, last, last.text)

    def bare_loop(self) -> BareRun:
        return bare_run


def _cap(knob: str, value: int | None) -> tuple[list[Any], dict[str, Any]]:
    """The middleware and run config that set `knob` to `value` (None: create_agent's own defaults)."""
    # cap:begin
    if value is None:
        return [], {}
    if knob == RECURSION:
        return [], {"recursion_limit": value}
    if knob == TOOL_CALLS:
        middleware: Any = ToolCallLimitMiddleware(run_limit=value)
    else:
        # exit_behavior="error" for the mapping: "end" appends a made-up AI message ("Model call limits
        # exceeded") that would read as an answer; an exception leaves no doubt that the cap ended the run.
        middleware = ModelCallLimitMiddleware(run_limit=value, exit_behavior="error" if knob == MODEL_CALLS else "end")
    # Only the mapping gets a backstop; an alternative is measured on its own, under create_agent's default.
    return [middleware], {"recursion_limit": recursion_backstop(value)} if knob == MODEL_CALLS else {}
    # cap:end


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same agent and cap with none of looplab's boundaries: plain chat model, plain tools."""
    middleware, config = _cap(MODEL_CALLS, max_steps)
    agent = create_agent(
        plain_chat_model(urls, model), plain_tools(tools), system_prompt=system_prompt, middleware=middleware
    )
    try:
        with no_tracing():
            state = agent.invoke({"messages": [HumanMessage(task)]}, config)
    except ModelCallLimitExceededError as exc:  # at the cap, before call max_steps + 1
        return exc.run_count
    return sum(isinstance(m, AIMessage) for m in state["messages"])


RUNNER = LangChainAgent()
