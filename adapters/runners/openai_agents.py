"""The OpenAI Agents SDK: an `Agent` with function tools, driven by `Runner.run(max_turns=)`.

The SDK's own loop calls the model, runs the requested tools (concurrently,
as asyncio tasks) and repeats until the model answers without tools. Its
model objects take an `AsyncOpenAI` client, so both OpenAI wire APIs go
through the recording client: Responses (the SDK's default) and Chat
Completions. Anthropic Messages and Gemini's generateContent go through the
SDK's LiteLLM model (`anthropic/<model>`, `gemini/<model>`),
which builds its own HTTP client: it is pointed at the run's recording model
proxy (`adapters/boundary/proxy.py`) with the run's token as its key.
`max_turns=N` allows exactly N model calls and raises `MaxTurnsExceeded`
before call N+1, the same on every API (measured: docs/iteration-caps.md).
A case's delegate is the SDK's agent as a tool (`Agent.as_tool`, `_openai_agents.offered`): the
child is a nested `Runner.run` with its own turn count, which the parent's `max_turns` does not include;
a child's own delegate (a nested tree) is its tool the same way.
Replies come whole, or streamed with `--stream on`: `Runner.run_streamed` (and `as_tool(on_stream=)` for the
child), with `ModelSettings(include_usage=True)` so a Chat Completions stream carries its usage.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    StopAtTools,
)
from agents.exceptions import MaxTurnsExceeded

from looplab.adapters.boundary.plain import plain_openai_client
from looplab.adapters.boundary.proxy import ModelProxy
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault, read_default
from looplab.adapters.runners._litellm import LITELLM_APIS, ViaLiteLLM, litellm_route
from looplab.adapters.runners._openai_agents import (
    function_tool,
    guarded_tools,
    litellm_model,
    offered,
    run_agent,
)
from looplab.adapters.session import Runner as LooplabRunner  # `Runner` here is the SDK's
from looplab.adapters.session import RunSession

__all__ = ["RUNNER"]

KNOB = "Runner.run(max_turns=)"


class OpenAIAgents(ViaLiteLLM, LooplabRunner):
    """Runner `openai_agents`: `Agent` + `Runner.run`, capped by `max_turns`."""

    name = "openai_agents"
    summary = "OpenAI Agents SDK Agent + Runner.run (max_turns)"
    requires = ("agents",)
    listed = 40
    extra = "openai-agents"
    distribution = "openai-agents"
    apis = ("responses", "chat", "messages", "gemini")
    streams = (False, True)
    delegation = "agents as tools (Agent.as_tool): a nested Runner.run, its turns not counted by the parent's max_turns"
    knobs = (KNOB, "Runner.run(max_turns=, error_handlers={'max_turns': ...})")
    ending_tool = "Agent(tool_use_behavior=StopAtTools(stop_at_tool_names=[...]))"

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_turns` counts model calls (measured): turn N+1 raises `MaxTurnsExceeded` before calling."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        default = read_default(("agents.run_config", "DEFAULT_MAX_TURNS"), ("agents.run", "DEFAULT_MAX_TURNS"))
        return dict.fromkeys(self.knobs, default)

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent once; `MaxTurnsExceeded` or `StopRun` propagate to `Runner.run`."""
        return session.run_async(self._run(task, session, self.api_for(session.model)))

    async def _run(self, task: str, session: RunSession, api: str) -> Finished:
        with ExitStack() as stack:
            # A stream on Chat Completions (and LiteLLM's) carries usage only when asked; the SDK asks only OpenAI's.
            model_settings: dict[str, Any] = {"include_usage": True} if session.model.stream else {}
            if api in LITELLM_APIS:
                proxy = stack.enter_context(ModelProxy(session))
                name, url = litellm_route(self.name, self.extra, api, session.model.name, proxy)
                model: Any = litellm_model(name, url, proxy.token)
                # LiteLLM retries nothing unless told: the same retry policy as every SDK client looplab builds.
                model_settings["extra_args"] = {"num_retries": session.model.retries}
            else:
                model_cls = OpenAIResponsesModel if api == "responses" else OpenAIChatCompletionsModel
                model = model_cls(model=session.model.name, openai_client=session.openai_client(is_async=True))
            settings = {"model_settings": ModelSettings(**model_settings)} if model_settings else {}
            # cap:begin
            cap: dict[str, Any] = {} if session.cap is None else {"max_turns": session.cap}
            if session.knob != KNOB:  # the graceful alternative: a final output instead of MaxTurnsExceeded
                cap["error_handlers"] = {"max_turns": lambda _: "(stopped: max_turns reached)"}
            # cap:end
            stream = bool(session.model.stream)
            # The delegate (and its own, in a nested tree): agents of the same model and tools, each its own turns,
            # up to the delegates' `max_turns` (`session.child_cap`; None: the SDK's default, as for the parent).
            tools = offered(
                guarded_tools(session.tools),
                session.delegate,
                session.child_cap,
                stream=stream,
                model=model,
                **settings,
            )
            # The tool (if any) whose result ends the run as its final output.
            ending = {"tool_use_behavior": StopAtTools(stop_at_tool_names=[session.ending_tool])}
            agent = Agent(
                name="looplab",
                instructions=session.system_prompt,
                model=model,
                tools=tools,
                **settings,
                **(ending if session.ending_tool else {}),
            )
            # Per run, so nothing global changes: no trace export (there is no network, and no key).
            run_config = RunConfig(tracing_disabled=True)
            result = await run_agent(
                agent, task, stream=stream, counters=session.report_counters, run_config=run_config, **cap
            )
            return session.conclude(str(result.final_output) if result.final_output is not None else None)

    def bare_loop(self) -> BareRun:
        return bare_run


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same Agent and `max_turns` on Responses with none of looplab's boundaries: plain client, plain tools."""
    client = plain_openai_client(urls["openai"])
    agent = Agent(
        name="looplab",
        instructions=system_prompt,
        tools=[function_tool(t, lambda raw_args, _, fn=t.fn: fn(**json.loads(raw_args))) for t in tools],
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


RUNNER = OpenAIAgents()
