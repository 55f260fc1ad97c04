"""LangChain 1.x `create_agent`, capped by `ModelCallLimitMiddleware(run_limit=max_steps)`.

The agent graph runs on a LangChain chat model for Chat Completions (its
default), Responses or Anthropic Messages; the model and the tools come from
`adapters._langchain`.
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware
from langchain_core.messages import HumanMessage

from adapters._langchain import chat_model, guard_tools, no_tracing
from adapters.base import SYSTEM_PROMPT, Adapter, Finished, Limits, NativeCap, RunSession


def recursion_backstop(limits: Limits) -> int:
    """A `recursion_limit` the middleware always reaches first.

    Each model call takes 4 super-steps here (limit check, model, count, tools): the middleware needs
    `4 * max_steps + 1` (measured). Twice that leaves room for a middleware node added later.
    """
    return 8 * limits.max_steps + 10


class LangChainAgent(Adapter):
    """`create_agent(model, tools, system_prompt=..., middleware=[ModelCallLimitMiddleware])`."""

    name = "langchain"
    extra = "langchain"
    distribution = "langchain"
    apis = ("chat", "responses", "messages")

    def native_cap(self, limits: Limits) -> NativeCap:
        """`run_limit=max_steps` model calls; ends by raising `ModelCallLimitExceededError`."""
        knob = "ModelCallLimitMiddleware(run_limit=, exit_behavior='error')"
        return NativeCap(knob=f"{knob} (recursion_limit={recursion_backstop(limits)} backstop)", value=limits.max_steps)

    def loop(self, task: str, session: RunSession) -> Finished:
        """Build the agent and run it once; the last AI message is the answer."""
        api = self.api_for(session.model)
        limits = session.limits
        # exit_behavior="error" rather than "end": "end" appends a made-up AI message ("Model call limits
        # exceeded") that would read as an answer; an exception leaves no doubt that the cap ended the run.
        cap = ModelCallLimitMiddleware(run_limit=limits.max_steps, exit_behavior="error")
        agent = create_agent(
            chat_model(api, session), guard_tools(session.guard), system_prompt=SYSTEM_PROMPT, middleware=[cap]
        )
        with no_tracing():
            state = agent.invoke({"messages": [HumanMessage(task)]}, {"recursion_limit": recursion_backstop(limits)})
        return session.conclude(state["messages"][-1].text)


ADAPTER = LangChainAgent()
