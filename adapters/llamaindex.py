"""LlamaIndex: a `FunctionAgent` workflow, run once with `agent.run(user_msg=task, max_iterations=...)`.

Speaks OpenAI Chat Completions by default (LlamaIndex's `OpenAI` LLM) and the Responses API (`OpenAIResponses`), both on
the run's recorded `AsyncOpenAI` client; Anthropic Messages through its `Anthropic` LLM, which builds its own client
from a base URL, so it is pointed at the run's recording proxy. The agent streams every model call (its default).

The agent raises `WorkflowRuntimeError` on receiving reply `max_iterations`, unread (measured: docs/iteration-caps.md),
so `max_steps=N` sets N+1: reply N is read (an answer is final, its tools run) and the model boundary refuses call N+1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from llama_index.core.agent.workflow import AgentOutput, FunctionAgent
from llama_index.core.base.llms.types import ChatResponse, LLMMetadata, ToolCallBlock
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.tools import FunctionTool, ToolMetadata, ToolSelection
from llama_index.core.workflow.errors import WorkflowRuntimeError
from llama_index.llms.anthropic import Anthropic
from llama_index.llms.openai import OpenAI, OpenAIResponses

from adapters.bare import BareTool, plain_openai_client
from adapters.base import Adapter, Finished, KnobDefault, Limits, NativeCap, RunSession, read_default
from adapters.proxy import ModelProxy
from shared_tools import Tool

MAPPED = "FunctionAgent.run(max_iterations=max_steps + 1)"
KNOB = "FunctionAgent.run(max_iterations=)"
GENERATE = "FunctionAgent.run(max_iterations=, early_stopping_method='generate')"
#: Assumed for a model missing from LlamaIndex's tables (the scripted model, a local server).
UNKNOWN_WINDOW = 128_000
#: The workflow's own timeout fires this long after looplab's deadline: a backstop, never first.
TIMEOUT_GRACE_S = 5.0


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


@dataclass
class _SchemaMetadata(ToolMetadata):
    """Tool metadata that hands the model a JSON schema as it is (LlamaIndex derives one from a pydantic class)."""

    schema: dict[str, Any] = field(default_factory=dict)

    def get_parameters_dict(self) -> dict[str, Any]:
        return self.schema


def schema_tool(tool: Tool | BareTool, fn: Callable[..., str]) -> FunctionTool:
    """A LlamaIndex tool with exactly `tool`'s name, description and JSON schema, running `fn` on a thread, so
    that one reply's calls (concurrent workflow steps) really overlap."""
    metadata = _SchemaMetadata(description=tool.description, name=tool.name, schema=tool.parameters)
    return FunctionTool(async_fn=partial(asyncio.to_thread, fn), metadata=metadata)


def guarded_tool(tool: Tool, session: RunSession) -> FunctionTool:
    """One of the Guard's tools, its body the Guard (LlamaIndex puts no is_error flag on the wire: the text says it)."""
    return schema_tool(tool, lambda raw=None, call_id=None: session.tools.call(tool.name, raw, call_id).result)


def offline_memory(llm: FunctionCallingLLM) -> ChatMemoryBuffer:
    """The agent's default memory with a tokenizer that loads nothing (tiktoken's: 0.2 s, from a file or the network);
    bytes over-count tokens, but in a run this memory holds only the task (the turns stay in the scratchpad)."""
    return ChatMemoryBuffer.from_defaults(llm=llm, tokenizer_fn=str.encode)


def build_llm(api: str, session: RunSession, stack: ExitStack) -> FunctionCallingLLM:
    """The LlamaIndex LLM for `api`: on the run's recorded client, or (Anthropic) pointed at its proxy."""
    name, key = session.model.name, session.model.key()
    if api == "messages":  # llama-index-llms-anthropic 0.12 fails at run time on anthropic>=1 (measured)
        proxy = stack.enter_context(ModelProxy(session))
        options = {"max_tokens": 4096, "max_retries": session.model.retries, "timeout": session.limits.max_seconds}
        return _AnthropicLLM(model=name, base_url=proxy.anthropic_base_url, api_key=proxy.token, **options)
    # max_retries=0: LlamaIndex's own retry loop would wrap the SDK client's, which retries as every client does.
    given = {"model": name, "api_key": key, "async_openai_client": session.openai_client(), "max_retries": 0}
    if api == "responses":
        return _ResponsesLLM(**given)
    return _ChatLLM(**given, additional_kwargs={"stream_options": {"include_usage": True}})  # else no usage


class LlamaIndexAgent(Adapter):
    """Runner `llamaindex`: a `FunctionAgent` workflow capped by `max_iterations`."""

    name = "llamaindex"
    extra = "llamaindex"
    distribution = "llama-index-core"
    apis = ("chat", "responses", "messages")
    knobs = (MAPPED, KNOB, GENERATE)

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_iterations=max_steps + 1`: the agent raises on receiving its last allowed reply, unread."""
        return NativeCap(knob=KNOB, value=limits.max_steps + 1)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """What `run()` without `max_iterations` gets: the constant `_init_context` falls back to."""
        default = read_default(("llama_index.core.agent.workflow.base_agent", "DEFAULT_MAX_ITERATIONS"))
        return dict.fromkeys(self.knobs, default)

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the workflow once; `WorkflowRuntimeError` at the cap, or `StopRun`, propagates to `Adapter.run`."""
        return session.run_async(self._run(task, session, self.api_for(session.model)))

    async def _run(self, task: str, session: RunSession, api: str) -> Finished:
        with ExitStack() as stack:
            llm = build_llm(api, session, stack)
            tools = [guarded_tool(t, session) for t in session.tools.tools]
            timeout = session.remaining_s() + TIMEOUT_GRACE_S  # none by default; this one backs up looplab's deadline
            agent = FunctionAgent(llm=llm, tools=tools, system_prompt=session.system_prompt, timeout=timeout)
            # cap:begin
            cap: dict[str, Any] = {}
            if session.cap is not None:
                cap["max_iterations"] = session.cap + 1 if session.knob == MAPPED else session.cap
            if session.knob == GENERATE:  # at the cap, one more call (no tools) instead of the exception
                cap["early_stopping_method"] = "generate"
            # cap:end
            output: AgentOutput = await agent.run(user_msg=task, memory=offline_memory(llm), **cap)
            return session.conclude(output.response.content)  # it returns on a reply without tool calls


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same agent and cap with none of looplab's boundaries; a runaway makes `max_steps + 1` requests here."""

    async def main() -> int:
        async with plain_openai_client(urls["openai"]) as client:
            llm = _PlainChatLLM(model=model, api_key="not-needed", async_openai_client=client, max_retries=0)
            agent = FunctionAgent(llm=llm, tools=[schema_tool(t, t.fn) for t in tools], system_prompt=system_prompt)
            handler, replies = agent.run(user_msg=task, max_iterations=max_steps + 1, memory=offline_memory(llm)), 0
            with suppress(WorkflowRuntimeError):  # the cap: the last reply was received and not read
                async for event in handler.stream_events():
                    replies += isinstance(event, AgentOutput)  # one per model reply
                await handler
        return replies

    return asyncio.run(main())


ADAPTER = LlamaIndexAgent()
