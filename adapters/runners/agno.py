"""Agno: an `Agent` run once (`Agent.run`), capped by a tool hook that ends the run after `max_steps` model calls.

Agno's model classes each cache the provider SDK client they make in a `client` field; the run hands them its
recorded one instead: Chat Completions (`OpenAIChat`, the default), Responses (`OpenAIResponses`) and Anthropic
Messages (`Claude`, which has no base URL of its own: its client carries the endpoint), and Gemini's generateContent
(`Gemini`, on the session's google-genai client). Nothing is streamed.

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

from collections.abc import Callable, Sequence
from typing import Any

import openai
from agno.agent import Agent, RunOutput
from agno.exceptions import StopAgentRun
from agno.models.anthropic import Claude
from agno.models.openai import OpenAIChat, OpenAIResponses
from agno.run.base import RunStatus
from agno.tools.function import Function
from agno.utils import log as agno_log

from looplab.adapters.boundary.plain import plain_http_client
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import MESSAGES_MAX_TOKENS as MAX_TOKENS
from looplab.adapters.contract.model import Api
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault, signature_default
from looplab.adapters.runners._gemini import gemini_class
from looplab.adapters.session import Adapter, RunSession

__all__ = [
    "ADAPTER",
    "HOOK",
    "TOOL_CALL_LIMIT",
    "Agno",
    "AgnoRunFailed",
    "agno_tool",
    "bare_run",
    "build_model",
    "run_agent",
    "stop_after",
]

# Agno's loggers write to the `sys.stdout` of import time and do not propagate, so a run's messages (Agno logs a
# failing model call as an ERROR) would land on the terminal: sent to the root logger instead, they are kept with
# the run that logged them (`boundary.noise`).
for _logger in (agno_log.agent_logger, agno_log.team_logger, agno_log.workflow_logger):
    _logger.handlers.clear()
    _logger.propagate = True

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


class AgnoRunFailed(Exception):
    """Agno caught an error and returned a run whose status is not `completed` (its `content` holds the error)."""


def build_model(api: Api, session: RunSession) -> Any:
    """Agno's model class for `api`, on the session's recorded (sync) SDK client."""
    name = session.model.name
    if api == "messages":
        return Claude(id=name, client=session.anthropic_client(is_async=False), max_tokens=MAX_TOKENS)
    if api == "gemini":
        Gemini = gemini_class("agno", "agno", "agno.models.google", "Gemini")
        return Gemini(id=name, client=session.gemini_client(is_async=False))
    cls = OpenAIResponses if api == "responses" else OpenAIChat
    return cls(id=name, client=session.openai_client(is_async=False))


def agno_tool(name: str, description: str, schema: dict[str, Any], call: Callable[..., str]) -> Function:
    """An Agno tool with this name, description and JSON schema as given; `call(fc, **arguments)` answers it.

    `skip_entrypoint_processing`: Agno neither rebuilds the schema from `call`'s signature nor validates arguments.
    Agno fills the parameter `fc` (the `FunctionCall`, which holds the call id) by its name, so a tool whose schema
    has an argument `fc` cannot be served this way.
    """
    return Function(
        name=name, description=description, parameters=schema, entrypoint=call, skip_entrypoint_processing=True
    )


def run_agent(model: Any, tools: list[Function], system_prompt: str, task: str, **options: Any) -> RunOutput:
    """One `Agent.run` with the system prompt as given (Agno builds none around it) and no telemetry."""
    agent = Agent(model=model, tools=tools, system_message=system_prompt, telemetry=False, **options)
    return agent.run(task)


class Agno(Adapter):
    """Agno's `Agent`, capped by a tool hook that ends the run in the tools of model call `max_steps`."""

    name = "agno"
    summary = "Agno Agent.run (tool hook ending the run after N model calls; tool_call_limit counts tools)"
    requires = ("agno", "openai", "anthropic")
    listed = 112
    extra = "agno"
    distribution = "agno"
    apis = ("chat", "responses", "messages", "gemini")
    knobs = (HOOK, TOOL_CALL_LIMIT)

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
        """Run the agent once; a refusal at the model boundary (`StopRun`) propagates to `Adapter.run`."""

        def guarded(name: str) -> Callable[..., str]:
            # Agno passes the `FunctionCall` as `fc` (for its call id); OpenAI's APIs carry no error flag: the text
            # says it.
            return lambda fc, **arguments: session.tools.call(name, arguments, fc.call_id).result

        tools = [agno_tool(t.name, t.description, t.parameters, guarded(t.name)) for t in session.tools.tools]
        options: dict[str, Any] = {}
        # cap:begin
        if session.knob == TOOL_CALL_LIMIT:
            options["tool_call_limit"] = session.cap
        elif session.cap is not None:  # counting the model calls the model boundary answered
            options["tool_hooks"] = [stop_after(session.cap, lambda: len(session.recorder.calls))]
        # cap:end
        output = run_agent(
            build_model(self.api_for(session.model), session), tools, session.system_prompt, task, **options
        )
        if output.status != RunStatus.completed:  # Agno catches a failing run and returns it
            return session.conclude(None, AgnoRunFailed(f"RunOutput.status={output.status.value}: {output.content}"))
        return session.conclude(output.content if isinstance(output.content, str) else None)

    def bare_loop(self) -> BareRun:
        return bare_run


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same agent with none of looplab's boundaries: plain client, plain tools, Chat Completions, and the same
    hook counting the model's replies itself; the model calls made."""
    replies = [0]

    def count(_: Any) -> None:
        replies[0] += 1

    http = plain_http_client(openai, urls["openai"])
    http.event_hooks["response"].append(count)
    client = openai.OpenAI(api_key="not-needed", base_url=urls["openai"], http_client=http)

    def plain(fn: Callable[..., str]) -> Callable[..., str]:
        return lambda fc, **arguments: fn(**arguments)

    with client:
        plain_tools = [agno_tool(t.name, t.description, t.parameters, plain(t.fn)) for t in tools]
        run_agent(
            OpenAIChat(id=model, client=client),
            plain_tools,
            system_prompt,
            task,
            tool_hooks=[stop_after(max_steps, lambda: replies[0])],
        )
    return replies[0]


ADAPTER = Agno()
