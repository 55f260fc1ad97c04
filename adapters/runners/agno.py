"""Agno: an `Agent` run once (`Agent.run`), capped by a tool hook that ends the run after `max_steps` model calls.

Agno's model classes run on the session's recorded SDK clients (`_agno.build_model`): Chat Completions, Responses,
Anthropic Messages and Gemini's generateContent. Replies come whole, or streamed with `--stream on`
(`Agent.run(task, stream=True)`, its event stream read to its end: `_agno.run_agent`).

Agno's loop has no cap on model calls. Its one knob, `Agent(tool_call_limit=)` (default None: no limit), counts tool
executions, not model calls (measured on 3.1.10 against a model that asks for a tool on every call): N runs the
first N tools; every later one is answered "Tool call limit reached..." without running, and the loop goes on asking
the model, so N still allows a runaway until something else stops it. So `max_steps` maps to a tool hook instead
(`Agent(tool_hooks=[...])`, default None): in the tools of model call N it raises Agno's `StopAgentRun`, so none of
that call's tools run and Agno's loop ends there; `Agent.run` returns normally (`RunStatus.completed`, empty
`content`), the partial history in `RunOutput.messages`. The hook counts the calls the model boundary answered; a
call N that asks for no tool Agno knows (it answers those itself) is followed by a call N+1, which the session's
gate refuses (`StopRun` then propagates out of `Agent.run`, and Agno keeps no run output without a database).
See docs/iteration-caps.md.

Before the Guard: Agno answers a call to a tool it does not have, and arguments that are not a JSON object, itself
(the Guard never sees them), and turns string arguments spelled "none", "null", "true" or "false" into None, True
and False (`agno.utils.functions.get_function_call`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from agno.agent import Agent
from agno.exceptions import StopAgentRun
from agno.run.base import RunStatus

from looplab.adapters.contract.bare import BareRun
from looplab.adapters.contract.errors import LooplabException
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault, signature_default
from looplab.adapters.runners._agno import agno_tool, bare_run, build_model, delegating_tool, run_agent
from looplab.adapters.session import Runner, RunSession

__all__ = ["RUNNER"]

HOOK = "Agent(tool_hooks=[model-call counter raising StopAgentRun])"
TOOL_CALL_LIMIT = "Agent(tool_call_limit=)"


# cap:begin
def stop_after(cap: int, calls_made: Callable[[], int]) -> Callable[..., Any]:
    """A tool hook: once `calls_made()` reaches `cap`, the tool does not run and Agno's loop ends (`StopAgentRun`)."""

    def stop_at_cap(function_name: str, function_call: Callable[..., Any], arguments: dict[str, Any]) -> Any:
        made = calls_made()
        if made >= cap:  # no model call is left to read the result
            raise StopAgentRun(f"(stopped: {made} model calls made; {function_name} did not run)")
        return function_call(**arguments)

    return stop_at_cap


# cap:end


class AgnoRunFailed(LooplabException):
    """Agno caught an error and returned a run whose status is not `completed` (its `content` holds the error)."""


class Agno(Runner):
    """Agno's `Agent`, capped by a tool hook that ends the run in the tools of model call `max_steps`."""

    name = "agno"
    summary = "Agno Agent.run (tool hook ending the run after N model calls; tool_call_limit counts tools)"
    requires = ("agno", "openai", "anthropic")
    listed = 112
    extra = "agno"
    distribution = "agno"
    apis = ("chat", "responses", "messages", "gemini")
    streams = (False, True)
    knobs = (HOOK, TOOL_CALL_LIMIT)
    delegation = "a tool whose function runs another Agent, as a Team runs a member: its own tool_call_limit"

    def native_cap(self, limits: Limits) -> NativeCap:
        """The hook ends the run in the tools of model call `max_steps`: exactly N calls."""
        return NativeCap(knob=HOOK, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """Both unset by default: `Agent(tool_hooks=None)` and `Agent(tool_call_limit=None)`."""
        return {
            HOOK: signature_default(Agent, "tool_hooks"),
            TOOL_CALL_LIMIT: signature_default(Agent, "tool_call_limit"),
        }

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent once; a refusal at the model boundary (`StopRun`) propagates to `Runner.run`."""

        def guarded(name: str) -> Callable[..., str]:
            # Agno passes the `FunctionCall` as `fc` (for its call id); OpenAI's APIs carry no error flag: the text
            # says it.
            return lambda fc, **arguments: session.tools.call(name, arguments, fc.call_id).result

        tools = [agno_tool(t.name, t.description, t.parameters, guarded(t.name)) for t in session.tools.tools]

        # cap:begin
        def cap_options(cap: int | None) -> dict[str, Any]:
            """An `Agent`'s cap options at `cap` (None: Agno's defaults, no limit and no hook)."""
            if session.knob == TOOL_CALL_LIMIT:
                return {"tool_call_limit": cap}
            if cap is not None:  # counting the model calls the model boundary answered
                return {"tool_hooks": [stop_after(cap, lambda: len(session.recorder.calls))]}
            return {}

        # cap:end
        options = cap_options(session.cap)
        model = build_model(self.api_for(session.model), session)
        stream = bool(session.model.stream)
        if session.delegate is not None:  # the child (and its own): the same model, tools and mode, the delegates' cap
            below = cap_options(session.child_cap)
            tools = [*tools, delegating_tool(session.delegate, model, tools, stream=stream, **below)]
        output = run_agent(model, tools, session.system_prompt, task, stream=stream, **options)
        if output.status != RunStatus.completed:  # Agno catches a failing run and returns it
            return session.conclude(None, AgnoRunFailed(f"RunOutput.status={output.status.value}: {output.content}"))
        return session.conclude(output.content if isinstance(output.content, str) else None)

    def bare_loop(self) -> BareRun:
        return functools.partial(bare_run, stop_after=stop_after)


RUNNER = Agno()
