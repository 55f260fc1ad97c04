"""Agno's pieces the `agno` runner assembles: its model classes on looplab's clients, a tool, one run, the bare loop.

Agno's model classes each cache the provider SDK client they make in a `client` field; a run hands them its recorded
one instead: Chat Completions (`OpenAIChat`, the default), Responses (`OpenAIResponses`) and Anthropic Messages
(`Claude`, which has no base URL of its own: its client carries the endpoint), and Gemini's generateContent
(`Gemini`, on the session's google-genai client). A run takes its replies whole (`Agent.run(task)`) or streamed
(`Agent.run(task, stream=True)`: Agno's event stream, in which each model call streams, on Chat Completions with
`stream_options={"include_usage": True}`, agno/models/openai/chat.py:688).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import openai
from agno.agent import Agent, RunOutput
from agno.models.anthropic import Claude
from agno.models.openai import OpenAIChat, OpenAIResponses
from agno.run.agent import RunErrorEvent
from agno.run.base import RunStatus
from agno.tools.function import Function
from agno.utils import log as agno_log

from looplab.adapters.boundary.plain import plain_http_client
from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareTool
from looplab.adapters.contract.model import MESSAGES_MAX_TOKENS as MAX_TOKENS
from looplab.adapters.contract.model import Api
from looplab.adapters.runners._gemini import gemini_class
from looplab.adapters.session import RunSession

# Agno's loggers write to the `sys.stdout` of import time and do not propagate, so a run's messages (Agno logs a
# failing model call as an ERROR) would land on the terminal: sent to the root logger instead, they are kept with
# the run that logged them (`boundary.noise`).
for _logger in (agno_log.agent_logger, agno_log.team_logger, agno_log.workflow_logger):
    _logger.handlers.clear()
    _logger.propagate = True


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


def run_agent(
    model: Any, tools: list[Function], system_prompt: str, task: str, *, stream: bool = False, **options: Any
) -> RunOutput:
    """One `Agent.run` with the system prompt as given (Agno builds none around it) and no telemetry, whole or
    streamed; its `RunOutput` either way."""
    agent = Agent(model=model, tools=tools, system_message=system_prompt, telemetry=False, **options)
    if not stream:
        return agent.run(task)
    output: RunOutput | None = None
    failed: RunErrorEvent | None = None
    for event in agent.run(task, stream=True, yield_run_output=True):  # read to its end, the output last
        if isinstance(event, RunOutput):
            output = event
        elif isinstance(event, RunErrorEvent):
            failed = event
    if output is not None:
        return output
    # A run that fails ends its stream with a RunErrorEvent and no output (agno/agent/_run.py:1304, where a whole
    # run returns its RunOutput with status error and the error as its content): that output, from the event.
    why = failed.content if failed is not None else "Agno's stream ended without an output or an error"
    return RunOutput(status=RunStatus.error, content=why)


def delegating_tool(
    delegate: Delegate, model: Any, tools: list[Function], *, stream: bool = False, **options: Any
) -> Function:
    """The delegate as a tool whose function runs a child `Agent` (the parent's model, tools and mode; `options`: the
    delegates' cap) on the question, the way a `Team` runs a member (agno/team/_default_tools.py:785): a separate
    `Agent.run` with its own `tool_call_limit`. (`Agent.as_tool()` is only a marker for AgentOS; `tools=[]` refuses
    it.) A delegate with a delegate of its own (a nested tree) gets it the same way: a tool built here, for the
    child's run."""
    child_tools = tools
    if delegate.delegate is not None:
        child_tools = [*tools, delegating_tool(delegate.delegate, model, tools, stream=stream, **options)]

    def ask(fc: Any, **arguments: Any) -> str:
        try:
            question = delegate.question_in(arguments)
        except ValueError as bad:  # an observation for the model, as a Guard tool's bad arguments are
            return str(bad)
        output = run_agent(model, child_tools, delegate.instructions, question, stream=stream, **options)
        # As a Team words a member's empty reply (agno/team/_default_tools.py:839); a failed run's content says why.
        content = output.content.strip() if isinstance(output.content, str) else ""
        return content or "No response from the member agent."

    return agno_tool(delegate.name, delegate.description, delegate.parameters, ask)


def bare_run(
    task: str,
    tools: Sequence[BareTool],
    urls: dict[str, str],
    model: str,
    max_steps: int,
    *,
    system_prompt: str,
    stop_after: Callable[[int, Callable[[], int]], Any],
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
