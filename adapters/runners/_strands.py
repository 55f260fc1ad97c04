"""Strands Agents' pieces the `strands` runner assembles: its model classes on looplab's clients, a tool, a delegate.

Chat Completions is `OpenAIModel` on the session's recorded `AsyncOpenAI`, streamed or not as the session asks; the
Responses API (`OpenAIResponsesModel`) and Anthropic Messages (`AnthropicModel`) are built from `client_args`, and
Gemini's generateContent (`GeminiModel`) on the session's `google-genai` client, all three always streamed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import openai
from strands import Agent
from strands.models.anthropic import AnthropicModel
from strands.models.openai import OpenAIModel
from strands.models.openai_responses import OpenAIResponsesModel
from strands.tools.tools import PythonAgentTool
from strands.types.tools import AgentTool, ToolResult, ToolSpec

from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.model import MESSAGES_MAX_TOKENS as MAX_TOKENS  # AnthropicModel requires one
from looplab.adapters.contract.model import Api
from looplab.adapters.runners._gemini import gemini_class
from looplab.adapters.session import RunSession


def build_model(api: Api, session: RunSession) -> Any:
    """The Strands model for `api`; every request goes through the session's recording HTTP client."""
    name, spec = session.model.name, session.model
    if api == "gemini":  # always streamed
        GeminiModel = gemini_class("strands", "strands", "strands.models.gemini", "GeminiModel")
        return GeminiModel(client=session.gemini_client(), model_id=name)
    if api == "chat":  # streamed, Strands asks for usage in the stream (`stream_options={"include_usage": True}`)
        return OpenAIModel(client=session.openai_client(), model_id=name, stream=bool(spec.stream))
    options = {"api_key": spec.key(), "base_url": spec.base_url, "max_retries": spec.retries}
    if api == "messages":
        http = session.http_client(anthropic, is_async=True)
        return AnthropicModel(client_args={**options, "http_client": http}, model_id=name, max_tokens=MAX_TOKENS)

    replies: list[Any] = []

    async def keep(reply: Any) -> None:
        replies.append(reply)

    class Recorded(OpenAIResponsesModel):
        """Strands opens an `AsyncOpenAI` per request and closes it, HTTP client included: each gets a fresh one. It
        stops reading at `response.completed`, leaving the reply open (unrecorded): closed here, before tools run."""

        def _resolve_client_args(self) -> dict[str, Any]:
            http = session.http_client(openai, is_async=True)
            http.event_hooks["response"].append(keep)
            return {**options, "http_client": http}

        async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
            try:
                async for chunk in super().stream(*args, **kwargs):
                    yield chunk
            finally:
                while replies:
                    await replies.pop().aclose()

    return Recorded(model_id=name)


def agent_tool(name: str, description: str, schema: dict[str, Any], call: Callable[..., ToolResult]) -> PythonAgentTool:
    """A Strands tool with this name, description and JSON schema; `call(tool_use)` answers it."""
    spec: ToolSpec = {"name": name, "description": description, "inputSchema": {"json": schema}}
    return PythonAgentTool(name, spec, call)


def delegating_tool(delegate: Delegate, model: Any, tools: list[AgentTool], hooks: list[Any]) -> AgentTool:
    """The delegate as Strands' own agent-as-tool (`Agent.as_tool`): a child `Agent` on the parent's model and tools,
    asked with the tool's one `input` string as its prompt; it answers with `str(result)`, its reply's text.

    The wrapper runs `child.stream_async(prompt)` with no `limits` (strands/agent/_agent_as_tool.py:243), so nothing
    but the run's boundary caps the child; a child that stops on its own answers the parent as a success (316-323).
    A child with a delegate of its own (a nested tree) is given it the same way, as its tool, uncapped as well.
    """
    below = tools if delegate.delegate is None else [*tools, delegating_tool(delegate.delegate, model, tools, hooks)]
    child = Agent(
        model=model,
        tools=below,
        system_prompt=delegate.instructions,
        name=delegate.name,
        callback_handler=None,
        retry_strategy=None,
        hooks=hooks,
    )
    return child.as_tool(name=delegate.name, description=delegate.description)
