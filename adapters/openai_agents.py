"""The OpenAI Agents SDK: an `Agent` with function tools, driven by `Runner.run(max_turns=)`.

The SDK's own loop calls the model, runs the requested tools (concurrently,
as asyncio tasks) and repeats until the model answers without tools. Its
model objects take an `AsyncOpenAI` client, so both OpenAI wire APIs go
through the recording client: Responses (the SDK's default) and Chat
Completions. Anthropic Messages goes through the SDK's LiteLLM model, which
builds its own HTTP client: it is pointed at the run's recording model proxy
(`adapters/proxy.py`) with the run's token as its key.
"""

from __future__ import annotations

import asyncio
import json
import os
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

from adapters.bare import BareTool, plain_http_client
from adapters.base import (
    SYSTEM_PROMPT,
    Adapter,
    Finished,
    KnobDefault,
    Limits,
    MissingExtra,
    ModelSpec,
    NativeCap,
    RunSession,
    ToolBoundary,
    installed_version,
    read_default,
)
from adapters.proxy import ModelProxy
from shared_tools import Tool

KNOB = "Runner.run(max_turns=)"


class OpenAIAgents(Adapter):
    """Runner `openai_agents`: `Agent` + `Runner.run`, capped by `max_turns`."""

    name = "openai_agents"
    extra = "openai-agents"
    distribution = "openai-agents"
    apis = ("responses", "chat", "messages")
    knobs = (KNOB, "Runner.run(max_turns=, error_handlers={'max_turns': ...})")

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_turns` counts model calls (measured): turn N+1 raises `MaxTurnsExceeded` before calling."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        default = read_default(("agents.run_config", "DEFAULT_MAX_TURNS"), ("agents.run", "DEFAULT_MAX_TURNS"))
        return dict.fromkeys(self.knobs, default)

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent once; `MaxTurnsExceeded` or `StopRun` propagate to `Adapter.run`."""
        api = self.api_for(session.model)
        return session.run_async(self._run(task, session, api))

    def version(self, model: ModelSpec | None = None) -> str:
        own = installed_version(self.distribution)
        if model is None or model.provider != "anthropic":
            return own
        return f"{own} + litellm {installed_version('litellm')}"

    async def _run(self, task: str, session: RunSession, api: str) -> Finished:
        with ExitStack() as stack:
            if api == "messages":
                proxy = stack.enter_context(ModelProxy(session))
                name = f"anthropic/{session.model.name}"
                model: Any = _litellm_model(name, proxy.anthropic_base_url, proxy.token)
            else:
                model_cls = OpenAIResponsesModel if api == "responses" else OpenAIChatCompletionsModel
                model = model_cls(model=session.model.name, openai_client=session.openai_client(is_async=True))
            return await self._agent_run(task, session, model, api)

    async def _agent_run(self, task: str, session: RunSession, model: Any, api: str) -> Finished:
        # LiteLLM retries nothing unless told: the same retry policy as every SDK client looplab builds.
        retries = ModelSettings(extra_args={"num_retries": session.model.retries}) if api == "messages" else None
        agent = Agent(
            name="looplab",
            instructions=SYSTEM_PROMPT,
            tools=[_function_tool(t, _guarded(session.tools, t.name)) for t in session.tools.tools],
            model=model,
            **({"model_settings": retries} if retries else {}),
        )
        # cap:begin
        cap: dict[str, Any] = {} if session.cap is None else {"max_turns": session.cap}
        if session.knob != KNOB:  # the graceful alternative: a final output instead of MaxTurnsExceeded
            cap["error_handlers"] = {"max_turns": lambda _: "(stopped: max_turns reached)"}
        # cap:end
        result = await Runner.run(
            agent,
            task,
            # Per run, so nothing global changes: no trace export (there is no network, and no key).
            run_config=RunConfig(tracing_disabled=True),
            **cap,
        )
        return session.conclude(str(result.final_output) if result.final_output is not None else None)


def _litellm_model(name: str, base_url: str, key: str) -> Any:
    """The SDK's LiteLLM model, quiet and offline: LiteLLM fetches a price map over the network at import otherwise."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
        from agents.extensions.models.litellm_model import LitellmModel
    except ImportError:
        raise MissingExtra("openai_agents", "openai-agents", "litellm") from None
    litellm.suppress_debug_info = True  # else it prints a provider list for a model it has no price for
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


def bare_run(task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int) -> int:
    """The same Agent and `max_turns` on Responses with none of looplab's boundaries: plain client, plain tools."""
    import openai

    http = plain_http_client(openai, urls["openai"], is_async=True)
    client = openai.AsyncOpenAI(api_key="not-needed", base_url=urls["openai"], http_client=http)
    agent = Agent(
        name="looplab",
        instructions=SYSTEM_PROMPT,
        tools=[_function_tool(t, lambda raw_args, _, fn=t.fn: fn(**json.loads(raw_args))) for t in tools],
        model=OpenAIResponsesModel(model=model, openai_client=client),
    )

    async def run() -> int:
        async with http:
            try:
                result = await Runner.run(agent, task, run_config=RunConfig(tracing_disabled=True), max_turns=max_steps)
            except MaxTurnsExceeded as exc:  # raised before call max_steps + 1
                return len(exc.run_data.raw_responses) if exc.run_data else max_steps
            return len(result.raw_responses)

    return asyncio.run(run())


ADAPTER = OpenAIAgents()
