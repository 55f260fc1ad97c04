"""LlamaIndex: a `FunctionAgent` workflow, run once with `agent.run(user_msg=task, max_iterations=...)`.

Speaks OpenAI Chat Completions by default (LlamaIndex's `OpenAI` LLM) and the Responses API (`OpenAIResponses`), both on
the run's recorded `AsyncOpenAI` client; Anthropic Messages through its `Anthropic` LLM, which builds its own client
from a base URL, so it is pointed at the run's recording proxy; Gemini's generateContent through its `GoogleGenAI` LLM
(llama-index-llms-google-genai) on the run's recorded async google-genai client. The agent streams every model call
(its default, `FunctionAgent(streaming=True)`), or takes each reply whole with `--stream off` (`streaming=False`).
The LLM classes and tools it is given come from `adapters._llamaindex`.

The agent raises `WorkflowRuntimeError` on receiving reply `max_iterations`, unread (measured: docs/iteration-caps.md),
so `max_steps=N` sets N+1: reply N is read (an answer is final, its tools run) and the model boundary refuses call N+1.
A case's delegate is a second `FunctionAgent` run by a tool of the parent's (`_llamaindex.delegating_tool`): a workflow
of its own with the delegates' cap options (`session.child_cap`), whose iterations the parent's `max_iterations` does
not count.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import ExitStack, suppress
from typing import Any

from llama_index.core.agent.workflow import AgentOutput, FunctionAgent
from llama_index.core.workflow.errors import WorkflowRuntimeError

from looplab.adapters.boundary.plain import plain_openai_client
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault, read_default
from looplab.adapters.runners._llamaindex import (
    delegating_tool,
    guarded_tools,
    llm_for,
    offline_memory,
    plain_llm,
    plain_tools,
)
from looplab.adapters.session import Runner, RunSession

__all__ = ["RUNNER"]

MAPPED = "FunctionAgent.run(max_iterations=max_steps + 1)"
KNOB = "FunctionAgent.run(max_iterations=)"
GENERATE = "FunctionAgent.run(max_iterations=, early_stopping_method='generate')"
#: The workflow's own timeout fires this long after looplab's deadline: a backstop, never first.
TIMEOUT_GRACE_S = 5.0


class LlamaIndexAgent(Runner):
    """Runner `llamaindex`: a `FunctionAgent` workflow capped by `max_iterations`."""

    name = "llamaindex"
    summary = "LlamaIndex FunctionAgent workflow (max_iterations)"
    requires = ("llama_index.core", "llama_index.llms.openai", "llama_index.llms.anthropic")
    in_all = False
    listed = 90
    extra = "llamaindex"
    distribution = "llama-index-core"
    apis = ("chat", "responses", "messages", "gemini")
    streams = (True, False)
    knobs = (MAPPED, KNOB, GENERATE)
    delegation = "a FunctionTool that runs another FunctionAgent: its own max_iterations, not counted by the parent's"
    ending_tool = "ToolMetadata(return_direct=True)"

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_iterations=max_steps + 1`: the agent raises on receiving its last allowed reply, unread."""
        return NativeCap(knob=KNOB, value=limits.max_steps + 1)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """What `run()` without `max_iterations` gets: the constant `_init_context` falls back to."""
        default = read_default(("llama_index.core.agent.workflow.base_agent", "DEFAULT_MAX_ITERATIONS"))
        return dict.fromkeys(self.knobs, default)

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the workflow once; `WorkflowRuntimeError` at the cap, or `StopRun`, propagates to `Runner.run`."""
        return session.run_async(self._run(task, session, self.api_for(session.model)))

    async def _run(self, task: str, session: RunSession, api: str) -> Finished:
        with ExitStack() as stack:
            llm = llm_for(api, session, stack)
            tools = guarded_tools(session)
            timeout = session.remaining_s() + TIMEOUT_GRACE_S  # none by default; this one backs up looplab's deadline
            how = {"timeout": timeout, "streaming": session.model.stream}
            # cap:begin
            cap = _cap_options(session.knob, session.cap)
            # cap:end
            if (d := session.delegate) is not None:  # the same LLM and tools, the delegates' cap; not the tool itself
                tools = [*tools, delegating_tool(d, llm, tools, how, **_cap_options(session.knob, session.child_cap))]
            agent = FunctionAgent(llm=llm, tools=tools, system_prompt=session.system_prompt, **how)
            output: AgentOutput = await agent.run(user_msg=task, memory=offline_memory(llm), **cap)
            return session.conclude(output.response.content)  # it returns on a reply without tool calls

    def bare_loop(self) -> BareRun:
        return bare_run


def _cap_options(knob: str, value: int | None) -> dict[str, Any]:
    """`run()`'s cap options for `knob` at `value` (None: `max_iterations` left to its default)."""
    cap: dict[str, Any] = {}
    if value is not None:
        cap["max_iterations"] = value + 1 if knob == MAPPED else value
    if knob == GENERATE:  # at the cap, one more call (no tools) instead of the exception
        cap["early_stopping_method"] = "generate"
    return cap


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same agent and cap with none of looplab's boundaries; a runaway makes `max_steps + 1` requests here."""

    async def main() -> int:
        async with plain_openai_client(urls["openai"]) as client:
            plain = plain_llm(client, model)
            agent = FunctionAgent(llm=plain, tools=plain_tools(tools), system_prompt=system_prompt)
            handler, replies = agent.run(user_msg=task, max_iterations=max_steps + 1, memory=offline_memory(plain)), 0
            with suppress(WorkflowRuntimeError):  # the cap: the last reply was received and not read
                async for event in handler.stream_events():
                    replies += isinstance(event, AgentOutput)  # one per model reply
                await handler
        return replies

    return asyncio.run(main())


RUNNER = LlamaIndexAgent()
