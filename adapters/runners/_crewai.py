"""CrewAI's pieces the `crewai` runner assembles: its native provider on looplab's clients, a tool, a crew of one,
the executor that tells a tool body its call id, and the bare loop.

CrewAI's native providers build their own SDK clients from a base URL and a key when the LLM is made (its OpenAI one
a sync and an async client), and keep them in two private attributes: the run puts its recorded clients there, so
every request passes the model boundary in process. Chat Completions (its default) and Responses go through its OpenAI
provider, Anthropic Messages through its Anthropic one, Gemini's generateContent through its Gemini one
(`crewai[google-genai]`, which pins google-genai 1.65), whose one `google.genai.Client` (`_client`) serves sync and
async calls alike: a crew's `kickoff()` makes only sync ones (measured on 1.15.30), so it is the session's sync
client. That provider decides from the model's name whether it can call tools (`gemini-1.5` and later); looplab's
tools need it, so it is told so for any model name. CrewAI sizes each tool result with Gemini's countTokens (one
request a tool call, on the same client: recorded, not a model call; where it fails, CrewAI estimates instead).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from looplab.adapters.boundary.plain import plain_openai_client
from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareTool
from looplab.adapters.contract.declaration import findable
from looplab.adapters.contract.errors import MissingExtra
from looplab.adapters.contract.model import Api
from looplab.shared_tools import Tool

# CrewAI's anonymous telemetry has no per-run switch, only this variable; set before the import, which
# builds its exporter. (Tracing has one: `Crew(tracing=False)`.)
os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"

from crewai import LLM, Agent, Crew, Task  # noqa: E402
from crewai.agents.agent_executor import AgentExecutor  # noqa: E402
from crewai.tools import BaseTool  # noqa: E402
from crewai.tools.agent_tools.base_agent_tools import BaseAgentTool  # noqa: E402
from crewai.tools.base_tool import Tool as CrewTool  # noqa: E402
from crewai.utilities.agent_utils import extract_tool_call_info  # noqa: E402

#: A `Task`'s required `expected_output`, which CrewAI puts after the task as "the expected criteria for your final
#: answer".
EXPECTED_OUTPUT = "the answer your task and instructions ask for"
call_id: ContextVar[str | None] = ContextVar("looplab_crewaicall_id", default=None)


class Executor(AgentExecutor):
    """CrewAI's executor, telling the tool body which tool call of the model it runs (CrewAI passes only arguments)."""

    def _execute_single_native_tool_call(self, tool_call: Any) -> dict[str, Any]:
        info = extract_tool_call_info(tool_call)
        token = call_id.set(info[0] if info else None)
        try:
            return super()._execute_single_native_tool_call(tool_call)
        finally:
            call_id.reset(token)


# CrewAI builds a flow's steps from the class's own body only: the subclass runs its parent's flow.
Executor._flow_definition = AgentExecutor.flow_definition()


def crew_tool(tool: Tool | BareTool, fn: Callable[..., str]) -> BaseTool:
    """`tool` for CrewAI, body `fn`: the model sees its JSON schema as given; no fields, so CrewAI validates nothing."""

    class Args(BaseModel):
        model_config = ConfigDict(extra="allow")

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return dict(tool.parameters)

    return CrewTool(name=tool.name, description=tool.description, args_schema=Args, func=fn)


def build_llm(api: Api, model: str, base_url: str | None, key: str, *, stream: bool = False) -> Any:
    """CrewAI's native provider for `api` (OpenAI's, Anthropic's for `messages`, Gemini's for `gemini`), pointed at
    `base_url` (Gemini's builds its client from the key alone: its client is replaced by `on_clients`), asking for
    whole replies or, `stream=True` (the LLM's own field), streamed ones: on Chat Completions with the usage chunk."""
    given = {"model": model, "base_url": base_url, "api_key": key, "stream": stream}
    if api == "gemini":
        if not findable("google.genai"):  # CrewAI's Gemini provider needs crewai[google-genai]
            raise MissingExtra("crewai", "crewai", "google.genai")
        llm = LLM(provider="gemini", **given)
        llm.supports_tools = True  # else a model not named `gemini-1.5` or later gets no tools
        return llm
    if api == "messages":
        if importlib.util.find_spec("anthropic") is None:  # CrewAI's Anthropic provider needs crewai[anthropic]
            raise MissingExtra("crewai", "crewai", "anthropic")
        return LLM(provider="anthropic", **given)
    kind = "responses" if api == "responses" else "completions"
    return LLM(provider="openai", api=kind, **given)


def on_clients(llm: Any, clients: Callable[..., Any]) -> Any:
    """`llm` sending through `clients(is_async=...)`'s SDK clients, in place of the ones it built when it was made
    (CrewAI keeps them in `_client` and `_async_client`, on 1.15.29 and 1.15.30; its Gemini provider only the one
    `_client`, sync: see the module's docstring)."""
    if llm.llm_type == "gemini":
        llm._client = clients(is_async=False)
        return llm
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


def delegating_tool(delegate: Delegate, llm: Any, tools: list[BaseTool], **options: Any) -> BaseTool:
    """The delegate as a coworker, by CrewAI's own delegation tool body (`BaseAgentTool._execute`: the coworker's
    `execute_task` on a `Task` whose description is what it is asked), named and described after the delegate. A
    delegate with a delegate of its own (a nested tree) is given it the same way, with the same `options`.

    Not `allow_delegation=True`'s "Delegate work to coworker" / "Ask question to coworker": their description names
    the coworkers by role only, never what one does, and they take the coworker's role from the model.
    """
    own = tools if delegate.delegate is None else [*tools, delegating_tool(delegate.delegate, llm, tools, **options)]
    child = Agent(
        role=delegate.name,
        goal=delegate.description,
        backstory=delegate.instructions,  # as `crew_of_one` gives the parent its system prompt
        llm=llm,
        tools=own,
        cache=False,
        max_retry_limit=0,
        **options,
    )
    about = delegate.parameters["properties"]["question"]["description"]

    class Question(BaseModel):
        question: str = Field(description=about)

    class Ask(BaseAgentTool):
        def _run(self, question: str, **_: Any) -> str:  # an error the child raises comes back as text
            return self._execute(child.role, question)

    return Ask(name=delegate.name, description=delegate.description, args_schema=Question, agents=[child])


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
