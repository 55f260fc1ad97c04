"""Pydantic AI: `Agent(...).run(task, usage_limits=UsageLimits(request_limit=max_steps))`.

Speaks the OpenAI Responses API by default (what Pydantic AI's `openai:` prefix picks), Chat Completions
with `--api chat`, the Anthropic Messages API for an `anthropic` model and Gemini's generateContent
(`GoogleModel`, which sends a tool's text as `{"return_value": text}`) for a `google` one. The provider SDK
client comes from the session, so every request passes the recorder. Replies come whole, or streamed with
`--stream on` (`Agent.run(event_stream_handler=...)`, Pydantic AI's way to stream each request of a run that
goes on to its end). At the cap Pydantic AI raises `UsageLimitExceeded` (carrying no history); the partial trace
comes from the boundaries, as for every runner.
"""

from __future__ import annotations

from pydantic_ai.usage import RunUsage, UsageLimits

from looplab.adapters.contract.bare import BareRun
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault
from looplab.adapters.runners._pydantic_ai import (
    agent,
    bare_run,
    build_model,
    guarded_tool,
    offered,
    run_options,
)
from looplab.adapters.session import Runner, RunSession

__all__ = ["RUNNER"]


class PydanticAI(Runner):
    """Pydantic AI's `Agent`, capped by `UsageLimits.request_limit`; it delegates through a tool that runs another
    `Agent` with the parent's usage, so the parent's limits count the child's requests."""

    name = "pydantic_ai"
    summary = "Pydantic AI Agent + UsageLimits(request_limit)"
    requires = ("pydantic_ai",)
    listed = 50
    extra = "pydantic-ai"
    distribution = "pydantic-ai-slim"
    apis = ("responses", "chat", "messages", "gemini")
    streams = (False, True)
    delegation = "agent delegation: a tool that runs another Agent with usage=ctx.usage"
    knobs = (
        "Agent.run(usage_limits=UsageLimits(request_limit=))",
        "Agent.run(usage_limits=UsageLimits(tool_calls_limit=))",
    )
    token_knob = "Agent.run(usage_limits=UsageLimits(total_tokens_limit=))"

    def native_cap(self, limits: Limits) -> NativeCap:
        """`request_limit` counts model responses; checked before each request, so N allows exactly N calls."""
        return NativeCap(knob=self.knobs[0], value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """The `UsageLimits()` a run without `usage_limits` gets."""
        unset = UsageLimits()
        source = "pydantic_ai.usage.UsageLimits()"
        return {
            self.knobs[0]: KnobDefault(value=unset.request_limit, source=f"{source}.request_limit"),
            self.knobs[1]: KnobDefault(value=unset.tool_calls_limit, source=f"{source}.tool_calls_limit"),
            self.token_knob: KnobDefault(value=unset.total_tokens_limit, source=f"{source}.total_tokens_limit"),
        }

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent; `UsageLimitExceeded` at the cap propagates, `session.conclude` names it."""
        model = build_model(self.api_for(session.model), session)
        tools = [guarded_tool(t, session) for t in session.tools.tools]
        # cap:begin
        field = {self.knobs[0]: "request_limit", self.knobs[1]: "tool_calls_limit"}.get(session.knob)

        def limits(cap: int | None) -> UsageLimits:
            # UsageLimits() unset still caps requests at its default; that default is what an unset run gets.
            return UsageLimits() if cap is None else UsageLimits(**{field or "total_tokens_limit": cap})

        # cap:end
        # The delegate (and its own, in a nested tree): agents of the run's tools, each run on its parent's usage
        # with limits of its own (`Agent.run(usage_limits=)` per run), the delegates' (`session.child_cap`).
        tools = offered(model, tools, session.delegate, session, run_options(session, limits(session.child_cap)))
        parent = agent(model, session.system_prompt, tools, session)
        usage = RunUsage()  # handed in, so that what it counted is read when the run raises too
        try:
            result = session.run_async(parent.run(task, usage=usage, **run_options(session, limits(session.cap))))
        finally:
            session.report_counters({"RunUsage.requests": usage.requests})
        return session.conclude(result.output)

    def bare_loop(self) -> BareRun:
        return bare_run


RUNNER = PydanticAI()
