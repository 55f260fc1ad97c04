"""Strands Agents: `Agent(...).invoke_async(task, limits={"turns": max_steps})`.

Speaks Chat Completions by default (`OpenAIModel` on the session's recorded `AsyncOpenAI`), the Responses API
(`OpenAIResponsesModel`) and Anthropic Messages (`AnthropicModel`), both built from `client_args`, and Gemini's
generateContent (`GeminiModel` on the session's `google-genai` client). Those three always stream (they have no
other mode: `--stream off` is refused for them), and a reply that breaks off mid-stream is not retried (the SDK
retries only until a response starts), so the run ends `error`. On Chat Completions replies come whole unless
`--stream on` asks (`OpenAIModel(stream=...)`, Strands' own switch, default on; its stream asks for usage): whole,
the SDK retries a reply that breaks off.
`limits={"turns": N}` allows exactly N model calls, then the agent returns normally (`stop_reason="limit_turns"`);
unset, nothing bounds the loop (measured: docs/iteration-caps.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from strands import Agent
from strands.hooks import BeforeModelCallEvent, BeforeToolCallEvent
from strands.models.openai import OpenAIModel
from strands.types.tools import ToolResult, ToolUse

from looplab.adapters.boundary.plain import plain_openai_client
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault, signature_default
from looplab.adapters.runners._strands import agent_tool, build_model, delegating_tool
from looplab.adapters.session import Runner, RunSession

__all__ = ["RUNNER"]

TURNS, HOOK = "Agent.invoke_async(limits={'turns': })", "hook: BeforeModelCallEvent counter (cancel)"
TOKENS = "Agent.invoke_async(limits={'total_tokens': })"


class Strands(Runner):
    """Strands Agents' `Agent`, capped by `invoke_async(limits={"turns": N})`."""

    name = "strands"
    summary = "Strands Agents Agent (invoke_async(limits={'turns': N}))"
    requires = ("strands",)
    listed = 110
    extra = "strands"
    distribution = "strands-agents"
    apis = ("chat", "responses", "messages", "gemini")
    streams = (False, True)  # on its first API, Chat Completions; the others only stream (`stream_for`)
    knobs = (TURNS, HOOK)
    token_knob = TOKENS
    delegation = "agents as tools: Agent.as_tool(), the child runs uncapped; the parent's turns count only its own"
    delegation_gaps = {
        "parallel": "Agent.as_tool wraps one Agent, one request at a time: a reply's second call of it is refused"
        " ('is already processing a request', strands/agent/_agent_as_tool.py:202)",
    }

    def native_cap(self, limits: Limits) -> NativeCap:
        """`turns` counts model calls (one per cycle, measured): N allows exactly N calls."""
        return NativeCap(knob=TURNS, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """All unset by default: `invoke_async(limits=None)`, and `Agent(hooks=None)` registers no counter."""
        limits = signature_default(Agent.invoke_async, "limits")
        return {TURNS: limits, TOKENS: limits, HOOK: signature_default(Agent, "hooks")}

    def stream_for(self, model: ModelSpec) -> bool:
        """Streamed, the only way on the Responses API, Messages and Gemini (their `stream` methods always ask for
        one: strands/models/openai_responses.py:578, anthropic.py:1027, gemini.py:646); on Chat Completions whole
        unless asked, as before `--stream` (the SDK retries a whole reply that breaks off, not a stream)."""
        if (api := self.api_for(model)) == "chat":
            return bool(model.stream)
        if model.stream is False:
            raise LooplabError(
                f"runner {self.name!r} cannot run with --stream off: over {api} its loop streams every reply"
            )
        return True

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent once; `StopRun` from the model boundary propagates to `Runner.run`."""

        def guard(tool_use: ToolUse, **_: Any) -> ToolResult:  # sync: Strands runs it on a thread, so calls overlap
            # `input` is already a dict: Strands parses the JSON itself and replaces text that is not JSON with {}.
            record = session.tools.call(tool_use["name"], tool_use["input"], tool_use["toolUseId"])
            status = "error" if record.is_error else "success"
            return {"toolUseId": tool_use["toolUseId"], "status": status, "content": [{"text": record.result}]}

        def unknown_to_guard(event: BeforeToolCallEvent) -> None:
            # Strands answers an unknown name itself ("Unknown tool: ..."); the Guard should see and record it.
            if event.selected_tool is None:
                event.selected_tool = agent_tool(event.tool_use["name"], "", {"type": "object"}, guard)

        hooks: list[Any] = [unknown_to_guard]
        # cap:begin
        budget = {TURNS: "turns", TOKENS: "total_tokens"}.get(session.knob)
        limits = None if session.cap is None or budget is None else {budget: session.cap}
        if session.knob == HOOK and session.cap is not None:
            calls, cap = [0], session.cap

            def stop_at_cap(event: BeforeModelCallEvent) -> None:
                calls[0] += 1
                if calls[0] > cap:  # no request goes out; Strands returns this text as its final message
                    event.cancel = f"(stopped: the hook cancelled model call {calls[0]})"

            hooks.append(stop_at_cap)
        # cap:end
        model = build_model(self.api_for(session.model), session)
        tools = [agent_tool(t.name, t.description, t.parameters, guard) for t in session.tools.tools]
        if session.delegate is not None:  # the child (and its own, if any): the same model and tools, no cap of its own
            tools = [*tools, delegating_tool(session.delegate, model, tools, [unknown_to_guard])]
        agent = Agent(
            model=model,
            tools=tools,
            system_prompt=session.system_prompt,
            callback_handler=None,  # the default prints the streamed text to stdout
            retry_strategy=None,  # its own throttling retries (4 s to 240 s apart) on top of the SDK's: only the SDK's
            hooks=hooks,
        )
        # No OpenTelemetry export: Strands only uses the global tracer provider, a no-op unless the process sets one.
        result = session.run_async(agent.invoke_async(task, limits=limits))
        session.report_counters({"AgentResult.metrics.cycle_count": result.metrics.cycle_count})
        # The reply's text blocks (`str(result)` ends each with a newline).
        text = "".join(block["text"] for block in result.message.get("content", []) if "text" in block)
        return session.conclude(text if result.stop_reason == "end_turn" else None)

    def bare_loop(self) -> BareRun:
        return bare_run


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same agent with none of looplab's boundaries: plain client, plain tools, Chat Completions."""
    fns = {t.name: t.fn for t in tools}

    def plain(tool_use: ToolUse, **_: Any) -> ToolResult:
        text = fns[tool_use["name"]](**tool_use["input"])
        return {"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": text}]}

    async def run() -> int:
        async with plain_openai_client(urls["openai"]) as client:
            agent = Agent(
                model=OpenAIModel(client=client, model_id=model, stream=False),
                tools=[agent_tool(t.name, t.description, t.parameters, plain) for t in tools],
                system_prompt=system_prompt,
                callback_handler=None,
                retry_strategy=None,
            )
            result = await agent.invoke_async(task, limits={"turns": max_steps})
        return len(result.metrics.latest_agent_invocation.cycles)

    return asyncio.run(run())


RUNNER = Strands()
