"""Microsoft Agent Framework: an `Agent` on a chat client whose function invocation layer runs the tool loop.

Every wire API runs on the framework's own chat client for it, over the session's recorded SDK client
(`_ms_agent_framework`). Replies come whole by default (`agent.run(task)`), or streamed with `--stream on`
(`agent.run(task, stream=True)`, the framework's own; on Chat Completions it asks for the usage chunk itself). Its
Anthropic client (`agent-framework-anthropic`) pins `anthropic<2`, which looplab's other Anthropic runners cannot use,
so the runner is left out of `looplab[all]` and runs in a runner environment of its own.

The knob is the client's `function_invocation_configuration["max_iterations"]` (default 40, read from the installed
library). It counts model calls that are offered the tools; once they are spent (the last one still asked for tools,
whose calls the loop runs), the loop makes one more call with `tool_choice="none"` and returns normally with its
text as the answer, or "Function invocation limit reached before a final answer could be produced." when that reply
still asks for tools: N allows N + 1 calls, unset 41 (measured on 1.23.0). `max_iterations=max_steps`: that extra
call is refused at the model boundary, so every call is offered the tools, an answer on the last is final, and a run
still wanting tools ends `max_steps` (see docs/iteration-caps.md).
A case's delegate is the framework's agent as a tool (`Agent.as_tool`) on a client of its own (the same SDK
clients; the cap lives on the chat client): a run of the child in a session of its own, with its own function
invocation loop and so its own `max_iterations` (`session.child_cap`); `as_tool` streams the child's replies
whatever the parent's mode.

Tool calls reach the Guard through a function middleware that answers each call itself, with the model's arguments
as parsed, before the framework validates them against the schema. Two things stay the framework's: a call naming a
tool it does not hold is answered "Error: Requested function ... not found." without reaching the Guard, and a
middleware's answer carries no error flag (on Messages `is_error` is never set; the Guard's text says it).
"""

from __future__ import annotations

from agent_framework import Agent
from agent_framework._tools import normalize_function_invocation_configuration

from looplab.adapters.contract.bare import BareRun
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault
from looplab.adapters.runners._ms_agent_framework import (
    GuardMiddleware,
    bare_run,
    build_client,
    delegating_tool,
    function_tool,
    request_options,
    run_agent,
)
from looplab.adapters.session import Runner, RunSession

__all__ = ["RUNNER"]

KNOB = "ChatClient(function_invocation_configuration={'max_iterations': })"


class MsAgentFramework(Runner):
    """Runner `ms_agent_framework`: an `Agent` run once, capped by the client's `max_iterations`."""

    name = "ms_agent_framework"
    summary = "Microsoft Agent Framework Agent (function_invocation_configuration max_iterations)"
    requires = ("agent_framework", "agent_framework_openai", "agent_framework_anthropic")
    in_all = False
    listed = 115
    extra = "ms-agent-framework"
    distribution = "agent-framework-core"
    apis = ("chat", "responses", "messages", "gemini")
    streams = (False, True)
    knobs = (KNOB,)
    delegation = "agent as tool (Agent.as_tool): the child's own function invocation loop and max_iterations"

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_iterations=max_steps`: the tool-less call the loop makes after them is refused at the model boundary."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """What the function invocation layer fills in for a configuration that leaves `max_iterations` out."""
        value = normalize_function_invocation_configuration(None)["max_iterations"]
        source = "agent_framework._tools.normalize_function_invocation_configuration(None)['max_iterations']"
        return {KNOB: KnobDefault(value=value, source=source)}

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent; the model boundary's refusal of the call past the cap propagates to `Runner.run`."""
        api = self.api_for(session.model)
        by_api = {"messages": session.anthropic_client, "gemini": session.gemini_client}
        clients = by_api.get(api, session.openai_client)
        # cap:begin
        # max_iterations=max_steps; the tool-less call the loop makes after them is refused at the model boundary
        client = build_client(api, session.model.name, clients, session.cap)
        # cap:end
        tools, options = [function_tool(t) for t in session.tools.tools], request_options(api)
        guard, stream = GuardMiddleware(session.tools), session.model.stream
        if (d := session.delegate) is not None:  # the same tools and Guard; not the tool itself
            # The cap lives on the client: the delegates get one of their own, at their cap (None: the default).
            below = build_client(api, session.model.name, clients, session.child_cap)
            tools = [*tools, delegating_tool(d, below, tools, session.tools, options)]
            guard = GuardMiddleware(session.tools, own=[d.name])
        agent = Agent(
            client,
            instructions=session.system_prompt,
            tools=tools,
            middleware=[guard],
            default_options=options,
        )
        # No OpenTelemetry export: the framework's telemetry layer is off unless the process configures it.
        response = session.run_async(run_agent(agent, task, stream))
        return session.conclude(response.text)

    def bare_loop(self) -> BareRun:
        return bare_run


RUNNER = MsAgentFramework()
