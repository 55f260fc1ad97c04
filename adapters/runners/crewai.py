"""CrewAI: one `Agent` with one `Task` in a `Crew` of one, capped by `Agent(max_iter=)`.

CrewAI's native providers build their own SDK clients from a base URL and a key when the LLM is made (its OpenAI one
a sync and an async client), and keep them in two private attributes: the run puts its recorded clients there, so
every request passes the model boundary in process. Chat Completions (its default) and Responses go through its OpenAI
provider, Anthropic Messages through its Anthropic one.

`max_iter=max_steps`: CrewAI's wrap-up call after `max_iter` tool-using calls (no tools, "give your best final answer")
is refused at the model boundary, so every call is offered the tools, an answer on the last is final, and a run still
wanting tools ends `max_steps`. See docs/iteration-caps.md.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict

from looplab.adapters.boundary.plain import plain_openai_client
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.errors import MissingExtra
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import Api
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault
from looplab.adapters.session import Adapter, RunSession
from looplab.shared_tools import Tool

# CrewAI's anonymous telemetry has no per-run switch, only this variable; set before the import, which
# builds its exporter. (Tracing has one: `Crew(tracing=False)`.)
os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"

from crewai import LLM, Agent, Crew, Task  # noqa: E402
from crewai.agents.agent_executor import AgentExecutor  # noqa: E402
from crewai.tools import BaseTool  # noqa: E402
from crewai.tools.base_tool import Tool as CrewTool  # noqa: E402
from crewai.utilities.agent_utils import extract_tool_call_info  # noqa: E402

__all__ = [
    "ADAPTER",
    "CrewAI",
    "EXPECTED_OUTPUT",
    "FIELDS",
    "KNOB",
    "bare_run",
    "build_llm",
    "crew_of_one",
    "crew_tool",
    "on_clients",
]

KNOB = "Agent(max_iter=)"
#: A `Task`'s required `expected_output`, which CrewAI puts after the task as "the expected criteria for your final
#: answer".
EXPECTED_OUTPUT = "the answer your task and instructions ask for"
#: Each knob's `Agent` field.
FIELDS = {KNOB: "max_iter", "Agent(max_execution_time=)": "max_execution_time"}

_call_id: ContextVar[str | None] = ContextVar("looplab_crewai_call_id", default=None)


class _Executor(AgentExecutor):
    """CrewAI's executor, telling the tool body which tool call of the model it runs (CrewAI passes only arguments)."""

    def _execute_single_native_tool_call(self, tool_call: Any) -> dict[str, Any]:
        info = extract_tool_call_info(tool_call)
        token = _call_id.set(info[0] if info else None)
        try:
            return super()._execute_single_native_tool_call(tool_call)
        finally:
            _call_id.reset(token)


# CrewAI builds a flow's steps from the class's own body only: the subclass runs its parent's flow.
_Executor._flow_definition = AgentExecutor.flow_definition()


def crew_tool(tool: Tool | BareTool, fn: Callable[..., str]) -> BaseTool:
    """`tool` for CrewAI, body `fn`: the model sees its JSON schema as given; no fields, so CrewAI validates nothing."""

    class Args(BaseModel):
        model_config = ConfigDict(extra="allow")

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return dict(tool.parameters)

    return CrewTool(name=tool.name, description=tool.description, args_schema=Args, func=fn)


def _guarded(session: RunSession, name: str) -> Callable[..., str]:
    """The Guard as a tool body (OpenAI's APIs carry no error flag: the text says it)."""
    return lambda **kwargs: session.tools.call(name, kwargs, _call_id.get()).result


def build_llm(api: Api, model: str, base_url: str | None, key: str) -> Any:
    """CrewAI's native provider for `api` (OpenAI's, or Anthropic's for `messages`), pointed at `base_url`."""
    if api == "messages":
        if importlib.util.find_spec("anthropic") is None:  # CrewAI's Anthropic provider needs crewai[anthropic]
            raise MissingExtra("crewai", "crewai", "anthropic")
        return LLM(model=model, provider="anthropic", base_url=base_url, api_key=key)
    kind = "responses" if api == "responses" else "completions"
    return LLM(model=model, provider="openai", api=kind, base_url=base_url, api_key=key)


def on_clients(llm: Any, clients: Callable[..., Any]) -> Any:
    """`llm` sending through `clients(is_async=...)`'s SDK clients, in place of the ones it built when it was made
    (CrewAI keeps them in `_client` and `_async_client`, on 1.15.29 and 1.15.30)."""
    llm._client, llm._async_client = clients(is_async=False), clients(is_async=True)
    return llm


def crew_of_one(task: str, backstory: str, llm: Any, tools: list[BaseTool], **options: Any) -> Crew:
    """The system prompt as the agent's `backstory` (role and goal are required: the agent's name, the task)."""
    # cache=False: a cached result would answer a repeated call without the tool (or the Guard) seeing it.
    # max_retry_limit=0: else a failed run re-runs the whole task; the SDK client's retries suffice.
    agent = Agent(
        role="looplab", goal=task, backstory=backstory, llm=llm, tools=tools, cache=False, max_retry_limit=0, **options
    )
    # A Task must say what its output is (CrewAI adds it to the task's prompt): words true of any case, which leave
    # what the answer holds to the task and the system prompt.
    job = Task(description=task, expected_output=EXPECTED_OUTPUT, agent=agent)
    return Crew(agents=[agent], tasks=[job], tracing=False)


class CrewAI(Adapter):
    """Runner `crewai`: an `Agent` + `Task` in a `Crew`, capped by `max_iter`."""

    name = "crewai"
    summary = "CrewAI Agent + Task in a Crew of one (max_iter)"
    requires = ("crewai",)
    in_all = False
    listed = 70
    extra = "crewai"
    distribution = "crewai"
    apis = ("chat", "responses", "messages")
    knobs = tuple(FIELDS)

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_iter=max_steps`: the calls past it (CrewAI's wrap-up call) are refused at the model boundary."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """The `Agent` fields' defaults (`max_execution_time`: seconds, None is no limit)."""
        return {
            knob: KnobDefault(value=Agent.model_fields[f].default, source=f"crewai.Agent.model_fields['{f}'].default")
            for knob, f in FIELDS.items()
        }

    def loop(self, task: str, session: RunSession) -> Finished:
        """Kick off the crew; the model boundary's refusal at the cap, or an error CrewAI raises, ends the run."""
        api = self.api_for(session.model)
        llm = build_llm(api, session.model.name, session.model.base_url, session.model.key())
        llm = on_clients(llm, session.anthropic_client if api == "messages" else session.openai_client)
        tools = [crew_tool(t, _guarded(session, t.name)) for t in session.tools.tools]
        # cap:begin
        # max_iter=max_steps; the wrap-up call CrewAI makes after it is refused at the model boundary
        cap = {} if session.cap is None else {FIELDS[session.knob]: session.cap}
        # cap:end
        output = crew_of_one(task, session.system_prompt, llm, tools, executor_class=_Executor, **cap).kickoff()
        return session.conclude(output.raw)

    def bare_loop(self) -> BareRun:
        return bare_run


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same crew on Chat Completions with plain tools and plain SDK clients; the requests made (its count).

    No boundary refuses the wrap-up call: `max_iter=max_steps - 1` makes at most `max_steps` (`max_iter=0` fails).
    """
    url = urls["openai"]
    llm = on_clients(build_llm("chat", model, url, "not-needed"), partial(plain_openai_client, url))
    plain = [crew_tool(t, t.fn) for t in tools]
    with contextlib.suppress(Exception):  # e.g. a wrap-up reply still asking for tools fails CrewAI's validation
        crew_of_one(task, system_prompt, llm, plain, max_iter=max(1, max_steps - 1)).kickoff()
    return llm.get_token_usage_summary().successful_requests


ADAPTER = CrewAI()
