"""A hand-built LangGraph `StateGraph`: a model node, a tools node, and a step counter in the state.

The model node counts its calls; the edge after it ends the graph when the
model answered or when the counter reached `max_steps` while the model still
wants tools. `recursion_limit` stays as a backstop that the counter always
reaches first. The chat model (Chat Completions, Responses, Anthropic Messages
or Gemini's generateContent) and the tools come from `adapters._langchain`.
Replies come whole, or streamed with `--stream on`: the chat model's own
`streaming=True` (`_langchain.chat_model`), so the model node's `invoke`
streams the request and returns the same `AIMessage` put together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault, read_default
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


class AgentState(TypedDict):
    """The graph's state: the conversation, and how many model calls were made."""

    messages: Annotated[list[AnyMessage], add_messages]
    steps: int


COUNTER = "state step counter"
RECURSION = "recursion_limit"


def recursion_backstop(model_calls: int) -> int:
    """A `recursion_limit` the step counter always reaches first.

    One model and one tools super-step per call: the counter needs `2 * max_steps` (measured).
    """
    return 2 * model_calls + 10


def build_graph(model: BaseChatModel, tools: list[BaseTool], system_prompt: str, max_steps: int | None) -> Any:
    """model -> (tools -> model)* -> END, ending after `max_steps` model calls at most (None: no counter)."""
    bound = model.bind_tools(tools)

    def call_model(state: AgentState) -> dict[str, Any]:
        reply = bound.invoke([SystemMessage(system_prompt), *state["messages"]])
        return {"messages": [reply], "steps": state["steps"] + 1}

    def route(state: AgentState) -> str:
        wants_tools = bool(getattr(state["messages"][-1], "tool_calls", None))
        # cap:begin
        return "tools" if wants_tools and (max_steps is None or state["steps"] < max_steps) else END
        # cap:end

    graph = StateGraph(AgentState)
    graph.add_node("model", call_model)
    # handle_tool_errors=True: a tool that raises becomes an error observation, not a crash
    # (ToolNode's default re-raises everything but argument validation errors).
    graph.add_node("tools", ToolNode(tools, handle_tool_errors=True))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile()


class LangGraphAgent(Runner):
    """A two-node ReAct `StateGraph` with the cap as state, not as a recursion limit."""

    name = "langgraph"
    summary = "a LangGraph StateGraph: model node, tools node, step counter"
    requires = ("langgraph", "langchain_openai", "langchain_anthropic")
    oldest_companions = ("langgraph-prebuilt==1.0.0",)
    listed = 30
    extra = "langgraph"
    distribution = "langgraph"
    apis = ("chat", "responses", "messages", "gemini")
    streams = (False, True)
    knobs = (COUNTER, RECURSION)
    delegation = "subagents as tools: a tool invoking a second StateGraph (its own invoke, uncounted by the parent)"

    def native_cap(self, limits: Limits) -> NativeCap:
        """The state's step counter stops at `max_steps` model calls."""
        return NativeCap(
            knob=f"{COUNTER} (recursion_limit={recursion_backstop(limits.max_steps)} backstop)", value=limits.max_steps
        )

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """No counter unless one is built; the recursion limit a run without config gets."""
        recursion = read_default(
            ("langgraph._internal._config", "DEFAULT_RECURSION_LIMIT"),
            ("langchain_core.runnables.config", "DEFAULT_RECURSION_LIMIT"),
        )
        return {
            COUNTER: KnobDefault(value=None, source="a field of this graph's state: no default"),
            RECURSION: recursion,
        }

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the graph once; the last AI message is the answer unless it still asks for tools."""
        counter, config = _cap(session.knob, session.cap)
        # Every graph below the run's is capped at `session.child_cap` (None: no counter, LangGraph's config).
        child_counter, child_config = _cap(session.knob, session.child_cap)
        model, tools = chat_model(self, session), guard_tools(session.tools)

        def build(system_prompt: str, delegate: Delegate | None, max_steps: int | None) -> Any:
            """The graph with the run's tools and counter (`max_steps`), offered `delegate` as a subagent tool: the
            same graph, built this same way (its own delegate included) with the delegates' counter and config, run
            in an invoke of its own."""
            offered = tools
            if delegate is not None:
                child = build(delegate.instructions, delegate.delegate, child_counter)
                offered = [*tools, delegating_tool(delegate, child, child_config, steps=0)]
            return build_graph(model, offered, system_prompt, max_steps)

        graph = build(session.system_prompt, session.delegate, counter)
        with no_tracing():
            state = graph.invoke({"messages": [HumanMessage(task)], "steps": 0}, config)
        last = state["messages"][-1]
        # The counter ended the graph: the model asked for tools, so it did not answer.
        return conclude(session, last, None if getattr(last, "tool_calls", None) else last.text)

    def bare_loop(self) -> BareRun:
        return bare_run


def _cap(knob: str, value: int | None) -> tuple[int | None, dict[str, Any]]:
    """The step counter and run config that set `knob` to `value` (None: no counter, LangGraph's own config)."""
    counter = value if knob == COUNTER else None
    config: dict[str, Any]
    # cap:begin
    if value is None:
        config = {}
    elif knob == RECURSION:
        config = {"recursion_limit": value}
    else:
        config = {"recursion_limit": recursion_backstop(value)}
    # cap:end
    return counter, config


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same graph and step counter with none of looplab's boundaries: plain chat model, plain tools."""
    graph = build_graph(plain_chat_model(urls, model), plain_tools(tools), system_prompt, max_steps)
    with no_tracing():
        state = graph.invoke(
            {"messages": [HumanMessage(task)], "steps": 0}, {"recursion_limit": recursion_backstop(max_steps)}
        )
    return state["steps"]


RUNNER = LangGraphAgent()
