"""Google ADK: an `LlmAgent` driven by a `Runner` over an in-memory session, capped by `RunConfig.max_llm_calls`.

ADK's own model classes take a provider SDK client, so each wire API goes through the run's recording
client, no proxy and no LiteLLM: Chat Completions (`OpenAILlm`, ADK's class for a `gpt-*` name), Gemini's
generateContent (`Gemini`, ADK's native class, on a `google-genai` client), Responses (`OpenAIResponsesLlm`)
and Anthropic Messages (`AnthropicLlm`). `max_llm_calls=N` allows exactly N model calls (measured:
docs/iteration-caps.md). On the wire, ADK sends a tool's text as `{"result": text}` over Chat Completions and
Gemini (bare text over Responses and Messages), and turns arguments that are not a JSON object into `{}`
(OpenAI APIs, with a warning) or an `AssertionError` (Messages).
ADK only opens spans on the global OpenTelemetry provider, a no-op unless the process installs one.
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
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import Api
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault
from looplab.adapters.contract.tools import ToolBoundary
from looplab.adapters.session import Adapter, RunSession

__all__ = [
    "ADAPTER",
    "GoogleAdk",
    "GuardTool",
    "KNOB",
    "ToolCall",
    "bare_run",
    "build_model",
    "guard_call",
    "run_agent",
]

#: Where `max_steps` maps: the per-run `RunConfig` handed to `Runner.run_async`.
KNOB = "Runner.run_async(run_config=RunConfig(max_llm_calls=))"
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


class GoogleAdk(Adapter):
    """Runner `google_adk`: `LlmAgent` + `Runner`, capped by `RunConfig.max_llm_calls`."""

    name = "google_adk"
    summary = "Google ADK LlmAgent + Runner (RunConfig(max_llm_calls=N))"
    requires = ("google.adk", "openai", "anthropic")
    listed = 60
    extra = "google-adk"
    distribution = "google-adk"
    # Gemini second: the scripted model's default stays Chat Completions, the API the bare loop (bench) speaks;
    # a google: model still gets gemini, its provider's first API here.
    apis = ("chat", "gemini", "responses", "messages")
    knobs = (KNOB,)

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_llm_calls` counts model calls, checked before each: N allows exactly N (measured)."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """What `RunConfig()` resolves: `ADK_MAX_LLM_CALLS` if set, else `_DEFAULT_MAX_LLM_CALLS`."""
        source = "google.adk.agents.run_config.RunConfig().max_llm_calls (ADK_MAX_LLM_CALLS or _DEFAULT_MAX_LLM_CALLS)"
        return {KNOB: KnobDefault(value=RunConfig().max_llm_calls, source=source)}

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent once; `LlmCallsLimitExceededError` or `StopRun` propagate to `Adapter.run`."""
        model = build_model(self.api_for(session.model), session)
        return session.run_async(self._run(task, session, model))

    async def _run(self, task: str, session: RunSession, model: Any) -> Finished:
        call = guard_call(session.tools)
        names = {t.name for t in session.tools.tools}

        async def to_guard(tool: BaseTool, args: dict[str, Any], tool_context: ToolContext) -> dict[str, Any] | None:
            # ADK would answer a name it does not know itself; the Guard answers (and records) it instead.
            return None if tool.name in names else await call(tool.name, args, tool_context.function_call_id)

        tools = [GuardTool(t.name, t.description, t.parameters, call) for t in session.tools.tools]
        agent = LlmAgent(
            name="looplab", model=model, instruction=session.system_prompt, tools=tools, before_tool_callback=to_guard
        )
        # cap:begin
        config = RunConfig() if session.cap is None else RunConfig(max_llm_calls=session.cap)
        # cap:end
        return session.conclude(await run_agent(agent, task, config))

    def bare_loop(self) -> BareRun:
        return bare_run


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


ADAPTER = GoogleAdk()
