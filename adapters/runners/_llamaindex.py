"""LlamaIndex's LLM and tool layer for the `llamaindex` runner: its LLM classes made to fit any model, and the tools.

LlamaIndex's LLMs look every model up in their own tables and parse tool-call arguments themselves; the classes
here accept a model missing from the tables and hand each call to the Guard as the model sent it. `llm_for` builds one
on the run's model boundary, `plain_llm` on a plain client for the bare loop; the tools keep their own JSON schemas.
Gemini's `GoogleGenAI` (llama-index-llms-google-genai) declares a tool from its pydantic class, which these tools lack,
so its subclass here declares each with its JSON schema as given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any

from llama_index.core.agent.workflow import AgentOutput, FunctionAgent
from llama_index.core.base.llms.types import ChatResponse, LLMMetadata, ToolCallBlock
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.tools import FunctionTool, ToolMetadata, ToolSelection
from llama_index.llms.anthropic import Anthropic
from llama_index.llms.openai import OpenAI, OpenAIResponses

from looplab.adapters.boundary.proxy import ModelProxy
from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareTool
from looplab.adapters.contract.model import MESSAGES_MAX_TOKENS
from looplab.adapters.runners._gemini import gemini_class
from looplab.adapters.session import RunSession
from looplab.shared_tools import Tool

#: Assumed for a model missing from LlamaIndex's tables (the scripted model, a local server).
UNKNOWN_WINDOW = 128_000


class _AnyModel:
    """Mixed into an LLM class: a model missing from LlamaIndex's tables is a function-calling chat model."""

    @property
    def metadata(self) -> LLMMetadata:
        try:
            return super().metadata  # type: ignore[misc]
        except ValueError:  # "Unknown model", from the context-window table
            name = self.model  # type: ignore[attr-defined]
            return LLMMetadata(
                context_window=UNKNOWN_WINDOW, is_chat_model=True, is_function_calling_model=True, model_name=name
            )


class _RawCalls(_AnyModel):
    """Mixed into an LLM class: each tool call reaches the tool as the model sent it, with its id.

    The LLMs parse arguments themselves: OpenAI's turn JSON they cannot parse into `{}`, Anthropic's
    raise `JSONDecodeError` out of the run (measured). The Guard gets the text and says what is wrong.
    """

    def get_tool_calls_from_response(self, response: ChatResponse, *args: Any, **kwargs: Any) -> list[ToolSelection]:
        blocks = [b for b in response.message.blocks if isinstance(b, ToolCallBlock)]
        if not blocks:  # whatever the LLM does then (an empty list, or its error)
            return super().get_tool_calls_from_response(response, *args, **kwargs)  # type: ignore[misc]
        return [
            ToolSelection(
                tool_id=b.tool_call_id or "",
                tool_name=b.tool_name,
                tool_kwargs={"raw": b.tool_kwargs, "call_id": b.tool_call_id},  # what the tool bodies take
            )
            for b in blocks
        ]


class _ChatLLM(_RawCalls, OpenAI): ...


class _ResponsesLLM(_RawCalls, OpenAIResponses): ...


class _AnthropicLLM(_RawCalls, Anthropic): ...


class _PlainChatLLM(_AnyModel, OpenAI): ...


@cache
def _gemini_llm_class() -> type[FunctionCallingLLM]:
    """`GoogleGenAI` made to fit looplab's tools; imported on first use, as google-genai is heavy."""
    GoogleGenAI = gemini_class("llamaindex", "llamaindex", "llama_index.llms.google_genai", "GoogleGenAI")
    from google.genai import types

    class _GeminiLLM(_RawCalls, GoogleGenAI):
        """Each tool declared with its own JSON schema (`GoogleGenAI` converts the tool's pydantic class)."""

        def _prepare_chat_with_tools(self, tools: Sequence[Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
            prepared = super()._prepare_chat_with_tools(tools, *args, **kwargs)  # the tool config, the messages
            declarations = [
                types.FunctionDeclaration(
                    name=t.metadata.name,
                    description=t.metadata.description,
                    parameters_json_schema=t.metadata.get_parameters_dict(),
                )
                for t in tools
            ]
            prepared["tools"] = [types.Tool(function_declarations=declarations)] if declarations else None
            return prepared

    return _GeminiLLM


def llm_for(api: str, session: RunSession, stack: ExitStack) -> FunctionCallingLLM:
    """The LlamaIndex LLM for `api`: on the run's recorded client, or (Anthropic) pointed at its proxy."""
    name, key = session.model.name, session.model.key()
    if api == "gemini":
        # max_tokens and context_window given, else it asks the API for the model's limits when it is made (a request
        # outside the run); max_tokens is sent as maxOutputTokens, the limit looplab's Messages requests carry too.
        # max_retries=0: as below; the session's google-genai client retries.
        window = {"max_tokens": MESSAGES_MAX_TOKENS, "context_window": UNKNOWN_WINDOW}
        llm = _gemini_llm_class()(model=name, api_key=key, max_retries=0, **window)
        llm._client = session.gemini_client()  # in place of the one it built from the key, unrecorded
        return llm
    if api == "messages":  # llama-index-llms-anthropic 0.12 fails at run time on anthropic>=1 (measured)
        proxy = stack.enter_context(ModelProxy(session))
        options = {"max_tokens": MESSAGES_MAX_TOKENS, "max_retries": session.model.retries}
        url, timeout = proxy.anthropic_base_url, session.limits.max_seconds
        return _AnthropicLLM(model=name, base_url=url, api_key=proxy.token, timeout=timeout, **options)
    # max_retries=0: LlamaIndex's own retry loop would wrap the SDK client's, which retries as every client does.
    given = {"model": name, "api_key": key, "async_openai_client": session.openai_client(), "max_retries": 0}
    if api == "responses":
        return _ResponsesLLM(**given)
    return _ChatLLM(**given, additional_kwargs={"stream_options": {"include_usage": True}})  # else no usage


def plain_llm(client: Any, model: str) -> FunctionCallingLLM:
    """Chat Completions on a plain `AsyncOpenAI` client, for the bare loop: `llm_for` without the recorder."""
    return _PlainChatLLM(model=model, api_key="not-needed", async_openai_client=client, max_retries=0)


@dataclass
class _SchemaMetadata(ToolMetadata):
    """Tool metadata that hands the model a JSON schema as it is (LlamaIndex derives one from a pydantic class)."""

    schema: dict[str, Any] = field(default_factory=dict)

    def get_parameters_dict(self) -> dict[str, Any]:
        return self.schema


def _schema_tool(tool: Tool | BareTool, fn: Callable[..., str], *, ends_run: bool = False) -> FunctionTool:
    """A LlamaIndex tool with exactly `tool`'s name, description and JSON schema, running `fn` on a thread, so
    that one reply's calls (concurrent workflow steps) really overlap; `ends_run`: its result is the agent's
    response (`return_direct`)."""
    metadata = _SchemaMetadata(
        description=tool.description, name=tool.name, schema=tool.parameters, return_direct=ends_run
    )
    return FunctionTool(async_fn=partial(asyncio.to_thread, fn), metadata=metadata)


def guarded_tools(session: RunSession) -> list[FunctionTool]:
    """The Guard's tools, each body the Guard (LlamaIndex puts no is_error flag on the wire: the text says it)."""
    ending = session.ending_tool
    return [_schema_tool(t, partial(_guarded, session, t.name), ends_run=t.name == ending) for t in session.tools.tools]


def _guarded(session: RunSession, name: str, raw: Any = None, call_id: str | None = None) -> str:
    return session.tools.call(name, raw, call_id).result


def delegating_tool(
    delegate: Delegate, llm: FunctionCallingLLM, tools: list[FunctionTool], how: dict[str, Any], **cap: Any
) -> FunctionTool:
    """The delegate as a tool of its parent, LlamaIndex's orchestrator idiom (sub-agents as tools): a `FunctionAgent`
    on the parent's LLM, tools and agent options `how`, which the body runs as a workflow of its own, the question its
    `user_msg`, with the parent's `max_iterations` options (its own count). A delegate with a delegate of its own (a
    nested tree) is given it the same way.

    Not an `AgentWorkflow` handoff: `handoff(to_agent, reason)` hands the parent's chat over (the child's task would
    be the parent's first user message, never the question) and takes the agent's name from the model.
    """
    own = tools if delegate.delegate is None else [*tools, delegating_tool(delegate.delegate, llm, tools, how, **cap)]
    about = {"name": delegate.name, "description": delegate.description, "system_prompt": delegate.instructions}
    child = FunctionAgent(llm=llm, tools=own, **how, **about)

    async def ask(raw: Any = None, call_id: str | None = None) -> str:  # the kwargs `_RawCalls` passes
        question = delegate.question_in(raw)  # a ValueError: the workflow hands its text to the model as an error
        output: AgentOutput = await child.run(user_msg=question, memory=offline_memory(llm), **cap)
        return str(output.response.content or "")

    metadata = _SchemaMetadata(description=delegate.description, name=delegate.name, schema=delegate.parameters)
    return FunctionTool(async_fn=ask, metadata=metadata)


def plain_tools(tools: Sequence[BareTool]) -> list[FunctionTool]:
    """Plain tool functions as LlamaIndex tools, with the same names, descriptions and JSON schemas."""
    return [_schema_tool(t, t.fn) for t in tools]


def offline_memory(llm: FunctionCallingLLM) -> ChatMemoryBuffer:
    """The agent's default memory with a tokenizer that loads nothing (tiktoken's: 0.2 s, from a file or the network);
    bytes over-count tokens, but in a run this memory holds only the task (the turns stay in the scratchpad)."""
    return ChatMemoryBuffer.from_defaults(llm=llm, tokenizer_fn=str.encode)
