"""The OpenAI Agents SDK: an `Agent` with function tools, driven by `Runner.run(max_turns=)`.

The SDK's own loop calls the model, runs the requested tools (concurrently,
as asyncio tasks) and repeats until the model answers without tools. Its
model objects take an `AsyncOpenAI` client, so both OpenAI wire APIs go
through the recording client: Responses (the SDK's default) and Chat
Completions. Anthropic Messages and Gemini's generateContent go through the
SDK's LiteLLM model (`anthropic/<model>`, `gemini/<model>`, not streamed),
which builds its own HTTP client: it is pointed at the run's recording model
proxy (`adapters/boundary/proxy.py`) with the run's token as its key.
`max_turns=N` allows exactly N model calls and raises `MaxTurnsExceeded`
before call N+1, the same on every API (measured: docs/iteration-caps.md).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
)
from agents.exceptions import MaxTurnsExceeded
from agents.tool_context import ToolContext

from looplab.adapters.boundary.plain import plain_openai_client
from looplab.adapters.boundary.proxy import ModelProxy
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault, read_default
from looplab.adapters.contract.tools import ToolBoundary
from looplab.adapters.runners._litellm import LITELLM_APIS, ViaLiteLLM, litellm_route
from looplab.adapters.session import Adapter, RunSession
from looplab.shared_tools import Tool

__all__ = ["ADAPTER", "KNOB", "OpenAIAgents", "bare_run"]

KNOB = "Runner.run(max_turns=)"


class OpenAIAgents(ViaLiteLLM, Adapter):
    """Runner `openai_agents`: `Agent` + `Runner.run`, capped by `max_turns`."""

    name = "openai_agents"
    summary = "OpenAI Agents SDK Agent + Runner.run (max_turns)"
    requires = ("agents",)
    listed = 40
    extra = "openai-agents"
    distribution = "openai-agents"
    apis = ("responses", "chat", "messages", "gemini")
    knobs = (KNOB, "Runner.run(max_turns=, error_handlers={'max_turns': ...})")

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_turns` counts model calls (measured): turn N+1 raises `MaxTurnsExceeded` before calling."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        default = read_default(("agents.run_config", "DEFAULT_MAX_TURNS"), ("agents.run", "DEFAULT_MAX_TURNS"))
        return dict.fromkeys(self.knobs, default)

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent once; `MaxTurnsExceeded` or `StopRun` propagate to `Adapter.run`."""
        return session.run_async(self._run(task, session, self.api_for(session.model)))

    async def _run(self, task: str, session: RunSession, api: str) -> Finished:
        with ExitStack() as stack:
            settings: dict[str, Any] = {}
            if api in LITELLM_APIS:
                proxy = stack.enter_context(ModelProxy(session))
                name, url = litellm_route(self.name, self.extra, api, session.model.name, proxy)
                model: Any = _litellm_model(name, url, proxy.token)
                # LiteLLM retries nothing unless told: the same retry policy as every SDK client looplab builds.
                settings["model_settings"] = ModelSettings(extra_args={"num_retries": session.model.retries})
            else:
                model_cls = OpenAIResponsesModel if api == "responses" else OpenAIChatCompletionsModel
                model = model_cls(model=session.model.name, openai_client=session.openai_client(is_async=True))
            agent = Agent(
                name="looplab",
                instructions=session.system_prompt,
                tools=[_function_tool(t, _guarded(session.tools, t.name)) for t in session.tools.tools],
                model=model,
                **settings,
            )
            # cap:begin
            cap: dict[str, Any] = {} if session.cap is None else {"max_turns": session.cap}
            if session.knob != KNOB:  # the graceful alternative: a final output instead of MaxTurnsExceeded
                cap["error_handlers"] = {"max_turns": lambda _: "(stopped: max_turns reached)"}
            # cap:end
            # Per run, so nothing global changes: no trace export (there is no network, and no key).
            result = await Runner.run(agent, task, run_config=RunConfig(tracing_disabled=True), **cap)
            return session.conclude(str(result.final_output) if result.final_output is not None else None)

    def bare_loop(self) -> BareRun:
        return bare_run


def _litellm_model(name: str, base_url: str, key: str) -> Any:
    """The SDK's LiteLLM model, on LiteLLM offline and quiet (`litellm_route` imported it so)."""
    from agents.extensions.models.litellm_model import LitellmModel

    return LitellmModel(model=name, base_url=base_url, api_key=key)


def _function_tool(tool: Tool | BareTool, call: Callable[[str, str | None], str]) -> FunctionTool:
    """`tool` as the SDK sees it: its own name, description and schema; the body is `call(raw_args, call_id)`."""

    async def invoke(ctx: ToolContext[Any], raw_args: str) -> str:
        # On a thread, so that a turn's parallel calls (asyncio tasks in the SDK) really overlap.
        return await asyncio.to_thread(call, raw_args, ctx.tool_call_id)

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.parameters,
        on_invoke_tool=invoke,
        # Strict mode would rewrite the schema (all fields required, no defaults); keep it as given.
        strict_json_schema=False,
    )


def _guarded(guard: ToolBoundary, name: str) -> Callable[[str, str | None], str]:
    """A tool body that hands the raw JSON string to the Guard, so bad arguments become its observations."""
    # Neither OpenAI API has an is_error field: the result text says it.
    return lambda raw_args, call_id: guard.call(name, raw_args, call_id).result


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same Agent and `max_turns` on Responses with none of looplab's boundaries: plain client, plain tools."""
    client = plain_openai_client(urls["openai"])
    agent = Agent(
        name="looplab",
        instructions=system_prompt,
        tools=[_function_tool(t, lambda raw_args, _, fn=t.fn: fn(**json.loads(raw_args))) for t in tools],
        model=OpenAIResponsesModel(model=model, openai_client=client),
    )

    async def run() -> int:
        async with client:
            try:
                result = await Runner.run(agent, task, run_config=RunConfig(tracing_disabled=True), max_turns=max_steps)
            except MaxTurnsExceeded as exc:  # raised before call max_steps + 1
                return len(exc.run_data.raw_responses) if exc.run_data else max_steps
            return len(result.raw_responses)

    return asyncio.run(run())


ADAPTER = OpenAIAgents()
