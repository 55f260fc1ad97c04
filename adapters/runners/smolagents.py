"""smolagents: a `ToolCallingAgent` (native tool calls; `CodeAgent` is out of scope) and `agent.run(task)`.

OpenAI Chat Completions goes through `OpenAIModel(client=...)` on the session's recorded client; Anthropic Messages
and Gemini's generateContent through `LiteLLMModel`, which builds its own HTTP client, pointed at the run's recording
proxy. Replies come whole, or streamed with `--stream on` (`ToolCallingAgent(stream_outputs=True)`: each step calls
`model.generate_stream`, which asks for usage in the stream, and puts the deltas together). smolagents sends its
history as text, not as tool messages: each step is an assistant message "Calling tools: [...]" and a user message
"Observation: ..." (one for all the step's calls). `max_steps=N` allows N action steps; the wrap-up call smolagents
makes after them is refused at the model boundary, and the run ends `max_steps` (measured: docs/iteration-caps.md,
the same on every API).

A delegate is a managed agent (`managed_agents=[child]`), offered to the parent as a tool named after it that takes
a `task`, and a delegate's own delegate is its managed agent the same way (a nested tree); each child runs its own
`run` with its own `max_steps` (same cap), and its parent's counts the delegation as one step. The run's
`max_steps` holds for them all at the model boundary, which every agent's model calls pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

from smolagents import LogLevel, ToolCallingAgent
from smolagents.agents import MultiStepAgent
from smolagents.memory import ActionStep
from smolagents.utils import AgentMaxStepsError

from looplab.adapters.boundary.plain import plain_openai_client
from looplab.adapters.boundary.proxy import ModelProxy
from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault, signature_default
from looplab.adapters.contract.tools import ToolBoundary
from looplab.adapters.runners._litellm import LITELLM_APIS, ViaLiteLLM, litellm_route
from looplab.adapters.runners._smolagents import ChatModel, LiteLLMTextModel, SchemaTool, guarded_agent
from looplab.adapters.session import Runner, RunSession

__all__ = ["RUNNER"]

KNOB = "ToolCallingAgent(max_steps=)"


class Smolagents(ViaLiteLLM, Runner):
    """Runner `smolagents`: `ToolCallingAgent.run`, capped by `max_steps`."""

    name = "smolagents"
    summary = "smolagents ToolCallingAgent (max_steps)"
    requires = ("smolagents", "openai")
    listed = 80
    extra = "smolagents"
    distribution = "smolagents"
    apis = ("chat", "messages", "gemini")
    streams = (False, True)
    delegation = "managed agents (managed_agents=[child]); the parent's max_steps counts a delegation, not its calls"
    delegation_races = {
        "parallel": "a reply's two calls of one managed agent run at once, in threads, on the one agent object "
        "(MultiStepAgent.__call__ runs self.run): the two runs share its memory, and whether the parent gets both "
        "reports depends on timing"
    }
    knobs = (KNOB,)

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_steps=N` allows N action steps, one model call each; the wrap-up call after them is refused."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """`ToolCallingAgent` passes `max_steps` on to `MultiStepAgent.__init__`, whose default it is."""
        return {KNOB: signature_default(MultiStepAgent.__init__, "max_steps")}

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent; the `StopRun` that refuses the wrap-up call propagates to `Runner.run`."""
        api = self.api_for(session.model)
        with ModelProxy(session) if api in LITELLM_APIS else nullcontext() as proxy:
            # retry=False: smolagents' own retry of rate-limit errors (60 s waits) would add to the SDK's
            if proxy is None:
                model: Any = ChatModel(session.model.name, client=session.openai_client(is_async=False), retry=False)
            else:  # LiteLLM on the run's proxy, offline and quiet (`adapters/runners/_litellm.py`)
                # LiteLLM retries nothing unless told: the same retry policy as every SDK client looplab builds.
                name, url = litellm_route(self.name, self.extra, api, session.model.name, proxy)
                retries = session.model.retries
                model = LiteLLMTextModel(name, api_base=url, api_key=proxy.token, retry=False, num_retries=retries)
            # cap:begin
            cap = {} if session.cap is None else {"max_steps": session.cap}  # unset: MultiStepAgent's default
            # cap:end
            # A managed agent has its own `max_steps`: the delegates' (`session.child_cap`), unset as above.
            below = {} if session.child_cap is None else {"max_steps": session.child_cap}
            stream = {"stream": session.model.stream}  # whole or streamed replies (`stream_outputs`)
            team = _team(session.tools, model, session.delegate, stream | below)
            agent = guarded_agent(session.tools, model, session.system_prompt, **team, **stream, **cap)
            # The output alone: a full result serializes the whole memory, every step, after the run.
            try:
                output = agent.run(task)
            finally:
                session.report_counters({"agent.step_number": agent.step_number})
        last = agent.memory.steps[-1]
        if isinstance(getattr(last, "error", None), AgentMaxStepsError) and last.token_usage is None:
            # The wrap-up call failed (the proxy's 403 when the gate refused it): smolagents returned the error as text.
            return session.conclude(None, session.stop)
        return session.conclude(None if output is None else str(output))

    def bare_loop(self) -> BareRun:
        return bare_run


def _team(boundary: ToolBoundary, model: Any, delegate: Delegate | None, both: dict[str, Any]) -> dict[str, Any]:
    """smolagents' delegation: `delegate`, if any, as a managed agent, the same class on the same model and tools
    with the same `both` (stream, the delegates' cap), itself given its own delegate the same way (a nested tree)."""
    if delegate is None:
        return {}
    team = _team(boundary, model, delegate.delegate, both)
    named = {"name": delegate.name, "description": delegate.description}
    return {"managed_agents": [guarded_agent(boundary, model, delegate.instructions, **named, **team, **both)]}


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same agent on a plain client and plain tools (smolagents' own checks, then the function).

    Returns the model requests made: one per action step in memory (the wrap-up call at the cap is one too).
    """
    agent = ToolCallingAgent(
        tools=[SchemaTool(t, t.fn) for t in tools],
        model=ChatModel(model, client=plain_openai_client(urls["openai"], is_async=False), retry=False),
        instructions=system_prompt,
        verbosity_level=LogLevel.OFF,
        max_steps=max_steps,
    )
    agent.run(task)
    return sum(isinstance(step, ActionStep) for step in agent.memory.steps)


RUNNER = Smolagents()
