"""Google ADK's pieces the `google_adk` runner assembles: its model classes on looplab's clients, the Guard as an ADK
tool, an agent that hands unknown tool names to the Guard, one run, the bare loop.

ADK's own model classes take a provider SDK client, so each wire API goes through the run's recording client, no
proxy and no LiteLLM: Chat Completions (`OpenAILlm`, ADK's class for a `gpt-*` name), Gemini's generateContent
(`Gemini`, ADK's native class, on a `google-genai` client), Responses (`OpenAIResponsesLlm`) and Anthropic Messages
(`AnthropicLlm`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from google.adk.agents import LlmAgent, RunConfig
from google.adk.agents.invocation_context import LlmCallsLimitExceededError
from google.adk.integrations.openai import OpenAILlm, OpenAIResponsesLlm
from google.adk.models.anthropic_llm import AnthropicLlm
from google.adk.models.google_llm import Gemini
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import BaseTool, ToolContext
from google.genai import types

from looplab.adapters.boundary.plain import plain_openai_client
from looplab.adapters.contract.bare import BareTool
from looplab.adapters.contract.model import Api
from looplab.adapters.contract.tools import ToolBoundary
from looplab.adapters.session import RunSession

#: A tool call as ADK hands it over: name, parsed arguments, call id -> the function response dict.
ToolCall = Callable[[str, dict[str, Any], str | None], Awaitable[dict[str, Any]]]


class GuardTool(BaseTool):
    """A tool as ADK declares it (the Guard's own name, description and JSON schema), run by `call`."""

    def __init__(self, name: str, description: str, schema: dict[str, Any], call: ToolCall) -> None:
        super().__init__(name=name, description=description)
        self.schema, self.call = schema, call

    def _get_declaration(self) -> types.FunctionDeclaration:
        # `parameters_json_schema` is passed on to each provider as given; `parameters` would be Gemini's Schema.
        return types.FunctionDeclaration(
            name=self.name, description=self.description, parameters_json_schema=self.schema
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> dict[str, Any]:
        """Called by ADK with the arguments it parsed from the model's call."""
        return await self.call(self.name, args, tool_context.function_call_id)


def guard_call(boundary: ToolBoundary) -> ToolCall:
    """The Guard as ADK's tool body: `{"result": text}` (ADK's own wrapping of a plain value) or `{"error": text}`."""

    async def call(name: str, args: dict[str, Any], call_id: str | None) -> dict[str, Any]:
        # On a thread: ADK runs a reply's parallel calls as tasks, so they really overlap.
        record = await asyncio.to_thread(boundary.call, name, args, call_id)
        return {"error" if record.is_error else "result": record.result}

    return call


def build_model(api: Api, session: RunSession) -> Any:
    """ADK's model class for `api`, on the session's recording SDK client."""
    name = session.model.name
    if api == "gemini":
        return Gemini(model=name, client=session.gemini_client())
    if api == "messages":
        return AnthropicLlm(model=name, client=session.anthropic_client())
    return (OpenAILlm if api == "chat" else OpenAIResponsesLlm)(model=name, client=session.openai_client())


def guarded_agent(
    name: str, model: Any, instruction: str, tools: Sequence[BaseTool], call: ToolCall, **fields: Any
) -> LlmAgent:
    """An `LlmAgent` with `tools`; a call to a name none of them has goes to the Guard (`call`), which records it."""
    known = {t.name for t in tools}

    async def to_guard(tool: BaseTool, args: dict[str, Any], tool_context: ToolContext) -> dict[str, Any] | None:
        # ADK would answer a name it does not know itself; the Guard answers (and records) it instead.
        return None if tool.name in known else await call(tool.name, args, tool_context.function_call_id)

    return LlmAgent(
        name=name, model=model, instruction=instruction, tools=list(tools), before_tool_callback=to_guard, **fields
    )


async def run_agent(agent: LlmAgent, task: str, config: RunConfig) -> str | None:
    """One run of `agent` on `task` in a fresh in-memory session: the final response's text, if any."""
    runner = Runner(app_name="looplab", agent=agent, session_service=InMemorySessionService())
    adk_session = await runner.session_service.create_session(app_name="looplab", user_id="looplab")
    message = types.Content(role="user", parts=[types.Part(text=task)])
    answer = None
    async for event in runner.run_async(
        user_id="looplab", session_id=adk_session.id, new_message=message, run_config=config
    ):
        if event.is_final_response() and event.content and event.content.parts:
            answer = "".join(p.text or "" for p in event.content.parts if not p.thought) or None
    return answer


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same agent with none of looplab's boundaries: plain client, plain tools, Chat Completions."""

    async def plain(name: str, args: dict[str, Any], call_id: str | None) -> dict[str, Any]:
        return {"result": fns[name](**args)}

    fns = {t.name: t.fn for t in tools}
    calls: list[object] = []  # one per model response

    async def run() -> None:
        async with plain_openai_client(urls["openai"]) as client:
            agent = LlmAgent(
                name="looplab",
                model=OpenAILlm(model=model, client=client),
                instruction=system_prompt,
                tools=[GuardTool(t.name, t.description, t.parameters, plain) for t in tools],
                after_model_callback=lambda **_: calls.append(None),
            )
            with contextlib.suppress(LlmCallsLimitExceededError):
                await run_agent(agent, task, RunConfig(max_llm_calls=max_steps))

    asyncio.run(run())
    return len(calls)
