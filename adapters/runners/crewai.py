"""CrewAI: one `Agent` with one `Task` in a `Crew` of one, capped by `Agent(max_iter=)`.

CrewAI's native providers run on the session's recorded SDK clients (`_crewai`: how they are swapped in), for
Chat Completions, Responses, Anthropic Messages and Gemini's generateContent, so every request passes the model
boundary in process. Replies come whole by default, or streamed with `--stream on` (`LLM(stream=True)`, the LLM's
own field; on Chat Completions CrewAI asks for the usage chunk itself). Measured on 1.15.30: streamed on the Responses
API, its provider drops a reply's function calls (its stream handler lacks the whole one's return of them), so the run
ends at the first tool call with CrewAI's `ValueError` ("Invalid response from LLM call - None or empty.").

`max_iter=max_steps`: CrewAI's wrap-up call after `max_iter` tool-using calls (no tools, "give your best final answer")
is refused at the model boundary, so every call is offered the tools, an answer on the last is final, and a run still
wanting tools ends `max_steps`. See docs/iteration-caps.md. Measured on Gemini's API the knobs count the same; only
CrewAI's own ending differs when nothing refuses that wrap-up call and its reply still asks for tools: its Gemini
provider raises `ValueError` ("Invalid response from LLM call - None or empty."), its OpenAI one a `ValidationError`.
A case's delegate is a second `Agent`, a coworker asked through CrewAI's own delegation tool body
(`_crewai.delegating_tool`): it runs the question as a `Task` with an executor of its own, so its own `max_iter`,
which the parent's does not count.
"""

from __future__ import annotations

from collections.abc import Callable

from looplab.adapters.contract.bare import BareRun
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault

# CrewAI's `Agent` by way of `_crewai`, which switches CrewAI's telemetry off before importing it.
from looplab.adapters.runners._crewai import (
    Agent,
    Executor,
    bare_run,
    build_llm,
    call_id,
    crew_of_one,
    crew_tool,
    delegating_tool,
    on_clients,
)
from looplab.adapters.session import Runner, RunSession

__all__ = ["RUNNER"]

KNOB = "Agent(max_iter=)"
#: Each knob's `Agent` field. `max_execution_time` is not one: it counts seconds of the machine's time, so what it
#: stops against a call-counting probe depends on how fast the machine is (measured: 1 s ended either way).
FIELDS = {KNOB: "max_iter"}


def _guarded(session: RunSession, name: str) -> Callable[..., str]:
    """The Guard as a tool body (OpenAI's APIs carry no error flag: the text says it)."""
    return lambda **kwargs: session.tools.call(name, kwargs, call_id.get()).result


class CrewAI(Runner):
    """Runner `crewai`: an `Agent` + `Task` in a `Crew`, capped by `max_iter`."""

    name = "crewai"
    summary = "CrewAI Agent + Task in a Crew of one (max_iter)"
    requires = ("crewai",)
    in_all = False
    listed = 70
    extra = "crewai"
    distribution = "crewai"
    apis = ("chat", "responses", "messages", "gemini")
    streams = (False, True)
    knobs = tuple(FIELDS)
    delegation = "a coworker asked by CrewAI's delegation tool body (BaseAgentTool): its own max_iter, not the parent's"
    delegation_races = {
        "parallel": "a reply's two calls of one coworker run at once, in threads, on its one executor: at times the "
        "second is refused ('Executor is already running. Cannot invoke the same executor instance concurrently.')"
    }

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_iter=max_steps`: the calls past it (CrewAI's wrap-up call) are refused at the model boundary."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """The `Agent` field's default."""
        return {
            knob: KnobDefault(value=Agent.model_fields[f].default, source=f"crewai.Agent.model_fields['{f}'].default")
            for knob, f in FIELDS.items()
        }

    def loop(self, task: str, session: RunSession) -> Finished:
        """Kick off the crew; the model boundary's refusal at the cap, or an error CrewAI raises, ends the run."""
        api = self.api_for(session.model)
        model = session.model
        llm = build_llm(api, model.name, model.base_url, model.key(), stream=model.stream)
        by_api = {"messages": session.anthropic_client, "gemini": session.gemini_client}
        llm = on_clients(llm, by_api.get(api, session.openai_client))
        tools = [crew_tool(t, _guarded(session, t.name)) for t in session.tools.tools]
        # cap:begin
        # max_iter=max_steps; the wrap-up call CrewAI makes after it is refused at the model boundary
        cap = {} if session.cap is None else {FIELDS[session.knob]: session.cap}
        # cap:end
        if (d := session.delegate) is not None:  # the same LLM and tools, the delegates' cap; not the tool itself
            below = {} if session.child_cap is None else {FIELDS[session.knob]: session.child_cap}
            tools = [*tools, delegating_tool(d, llm, tools, executor_class=Executor, **below)]
        output = crew_of_one(task, session.system_prompt, llm, tools, executor_class=Executor, **cap).kickoff()
        return session.conclude(output.raw)

    def bare_loop(self) -> BareRun:
        return bare_run


RUNNER = CrewAI()
