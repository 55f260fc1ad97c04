"""Google ADK: an `LlmAgent` driven by a `Runner` over an in-memory session, capped by `RunConfig.max_llm_calls`.

ADK's own model classes run on the session's recording SDK clients (`_google_adk.build_model`): Chat Completions,
Gemini's generateContent, Responses and Anthropic Messages. `max_llm_calls=N` allows exactly N model calls
(measured: docs/iteration-caps.md). On the wire, ADK sends a tool's text as `{"result": text}` over Chat Completions
and Gemini (bare text over Responses and Messages), and turns arguments that are not a JSON object into `{}`
(OpenAI APIs, with a warning) or an `AssertionError` (Messages). Replies come whole, or streamed with `--stream on`
(`RunConfig(streaming_mode=StreamingMode.SSE)`, ADK's own switch; over Chat Completions it asks for usage).
ADK only opens spans on the global OpenTelemetry provider, a no-op unless the process installs one.

Delegation: the delegate is an `LlmAgent` of its own (same model, the run's tools, its instructions) in the
parent's tools as an `AgentTool`, which declares one `request` string and starts the child on that text alone;
a delegate's own delegate is in its tools the same way (a nested tree). The child runs as a nested `Runner`
invocation with its caller's `RunConfig`: ADK counts `max_llm_calls` per invocation, so each agent at every level
gets its own N and its caller's count leaves out its calls; the session's gate counts them all. `AgentTool` takes
no `RunConfig` of the child's own (google/adk/tools/agent_tool.py:320-344 passes the caller's on), so the child has
no knob apart from its parent's and `session.child_cap` is not used. ADK runs the child's replies whole even in a
streamed run (agent_tool.py:334-344, lest its last event be a partial chunk). A `StopRun` (or the child's own
`LlmCallsLimitExceededError`) raised in the child propagates out of the parent's run: ADK's tool caller re-raises
what no `on_tool_error_callback` answers.
"""

from __future__ import annotations

from typing import Any

from google.adk.agents import RunConfig
from google.adk.agents.run_config import StreamingMode
from google.adk.tools import BaseTool
from google.adk.tools.agent_tool import AgentTool

from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareRun
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault
from looplab.adapters.runners._google_adk import (
    GuardTool,
    ToolCall,
    bare_run,
    build_model,
    guard_call,
    guarded_agent,
    run_agent,
)
from looplab.adapters.session import Runner, RunSession

__all__ = ["RUNNER"]

#: Where `max_steps` maps: the per-run `RunConfig` handed to `Runner.run_async`.
KNOB = "Runner.run_async(run_config=RunConfig(max_llm_calls=))"


class GoogleAdk(Runner):
    """Runner `google_adk`: `LlmAgent` + `Runner`, capped by `RunConfig.max_llm_calls`."""

    name = "google_adk"
    summary = "Google ADK LlmAgent + Runner (RunConfig(max_llm_calls=N))"
    requires = ("google.adk", "openai", "anthropic")
    listed = 60
    extra = "google-adk"
    distribution = "google-adk"
    # Gemini second: the scripted model's default stays Chat Completions, the API the bare loop (bench) speaks;
    # a google: model still gets gemini, its provider's first API here.
    apis = ("chat", "gemini", "responses", "messages")
    streams = (False, True)
    delegation = "AgentTool(agent=LlmAgent) in the parent's tools; max_llm_calls caps each agent's calls on its own"
    knobs = (KNOB,)

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_llm_calls` counts model calls, checked before each: N allows exactly N (measured)."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """What `RunConfig()` resolves: `ADK_MAX_LLM_CALLS` if set, else `_DEFAULT_MAX_LLM_CALLS`."""
        source = "google.adk.agents.run_config.RunConfig().max_llm_calls (ADK_MAX_LLM_CALLS or _DEFAULT_MAX_LLM_CALLS)"
        return {KNOB: KnobDefault(value=RunConfig().max_llm_calls, source=source)}

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent once; `LlmCallsLimitExceededError` or `StopRun` propagate to `Runner.run`."""
        model = build_model(self.api_for(session.model), session)
        return session.run_async(self._run(task, session, model))

    async def _run(self, task: str, session: RunSession, model: Any) -> Finished:
        call = guard_call(session.tools)
        tools = [GuardTool(t.name, t.description, t.parameters, call) for t in session.tools.tools]
        offered = _offering(session.delegate, model, tools, call)
        agent = guarded_agent("looplab", model, session.system_prompt, offered, call)
        # cap:begin
        config = RunConfig() if session.cap is None else RunConfig(max_llm_calls=session.cap)
        # cap:end
        # ADK's own switch: each model call asks for a stream (`generate_content_async(stream=True)`), or not.
        config.streaming_mode = StreamingMode.SSE if session.model.stream else StreamingMode.NONE
        return session.conclude(await run_agent(agent, task, config))

    def bare_loop(self) -> BareRun:
        return bare_run


def _offering(delegate: Delegate | None, model: Any, tools: list[BaseTool], call: ToolCall) -> list[BaseTool]:
    """`tools`, and `delegate` as an `AgentTool` if there is one: an `LlmAgent` on the same model and tools, itself
    offered its own delegate the same way (a nested tree). AgentTool names and describes it after the agent."""
    if delegate is None:
        return tools
    offered = _offering(delegate.delegate, model, tools, call)
    child = guarded_agent(delegate.name, model, delegate.instructions, offered, call, description=delegate.description)
    return [*tools, AgentTool(agent=child)]


RUNNER = GoogleAdk()
