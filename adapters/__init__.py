"""Runners and the normalized contracts they share.

The registry names each runner's module and the modules its extra installs,
so listing runners imports no framework; `load()` imports one on demand.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
from dataclasses import dataclass

from adapters.base import Adapter, LooplabError, MissingExtra

#: Where `--runner external` reads its command (the CLI sets it from `--cmd`; worker processes inherit it).
EXTERNAL_COMMAND_ENV = "LOOPLAB_EXTERNAL_CMD"


@dataclass(frozen=True)
class RunnerInfo:
    """Where a runner lives and what it needs installed."""

    name: str
    module: str
    extra: str
    requires: tuple[str, ...]
    summary: str
    #: Programs it runs, which pip cannot install (e.g. `node`): looked up on PATH.
    commands: tuple[str, ...] = ()
    #: What to install besides the extra, in words (`npm` is needed only while its packages are not cached).
    programs: str = ""
    #: Whether it runs when no runner is named (`external` needs a command first).
    by_default: bool = True
    #: Whether its framework installs beside the others (`looplab[all]`); one that cannot (its pins conflict
    #: with another framework's) runs in a runner environment of its own (`--isolate`).
    in_all: bool = True
    #: Whether its loop lets the model name one tool a reply (a text protocol such as DSPy's fields), so a
    #: model's parallel calls arrive one a step.
    one_tool_a_reply: bool = False

    def programs_found(self) -> bool:
        """Whether the programs it runs are on PATH (what a runner environment cannot install)."""
        return all(shutil.which(c) is not None for c in self.commands)

    def installed(self) -> bool:
        return all(_findable(m) for m in self.requires) and self.programs_found()

    def elsewhere(self) -> bool:
        """Whether it can run only in its own runner environment: it cannot share this one and is not in it."""
        return not self.in_all and not self.installed()


def _findable(module: str) -> bool:
    """Whether `module` can be imported, without importing it (a dotted name whose parent is missing is not)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


RUNNERS: dict[str, RunnerInfo] = {
    info.name: info
    for info in (
        RunnerInfo(
            "handrolled",
            "adapters.handrolled",
            "anthropic",
            ("anthropic",),
            "hand-written loop on the Anthropic SDK (or the OpenAI SDK with an openai: model)",
        ),
        RunnerInfo(
            "anthropic_tool_runner",
            "adapters.anthropic_tool_runner",
            "anthropic",
            ("anthropic",),
            "the Anthropic SDK's beta tool runner (max_iterations)",
        ),
        RunnerInfo(
            "langchain",
            "adapters.langchain",
            "langchain",
            ("langchain", "langchain_openai", "langchain_anthropic"),
            "LangChain 1.x create_agent",
        ),
        RunnerInfo(
            "langgraph",
            "adapters.langgraph",
            "langgraph",
            ("langgraph", "langchain_openai", "langchain_anthropic"),
            "a LangGraph StateGraph: model node, tools node, step counter",
        ),
        RunnerInfo(
            "openai_agents",
            "adapters.openai_agents",
            "openai-agents",
            ("agents",),
            "OpenAI Agents SDK Agent + Runner.run (max_turns)",
        ),
        RunnerInfo(
            "pydantic_ai",
            "adapters.pydantic_ai",
            "pydantic-ai",
            ("pydantic_ai",),
            "Pydantic AI Agent + UsageLimits(request_limit)",
        ),
        RunnerInfo(
            "google_adk",
            "adapters.google_adk",
            "google-adk",
            ("google.adk", "openai", "anthropic"),
            "Google ADK LlmAgent + Runner (RunConfig(max_llm_calls=N))",
        ),
        RunnerInfo(
            "crewai",
            "adapters.crewai",
            "crewai",
            ("crewai",),
            "CrewAI Agent + Task in a Crew of one (max_iter)",
            in_all=False,
        ),
        RunnerInfo(
            "smolagents",
            "adapters.smolagents",
            "smolagents",
            ("smolagents", "openai"),
            "smolagents ToolCallingAgent (max_steps)",
        ),
        RunnerInfo(
            "llamaindex",
            "adapters.llamaindex",
            "llamaindex",
            ("llama_index.core", "llama_index.llms.openai", "llama_index.llms.anthropic"),
            "LlamaIndex FunctionAgent workflow (max_iterations)",
            in_all=False,
        ),
        RunnerInfo(
            "dspy",
            "adapters.dspy",
            "dspy",
            ("dspy",),
            "DSPy ReAct: tool and arguments as text fields (max_iters)",
            one_tool_a_reply=True,
        ),
        RunnerInfo(
            "strands",
            "adapters.strands",
            "strands",
            ("strands",),
            "Strands Agents Agent (invoke_async(limits={'turns': N}))",
        ),
        RunnerInfo(
            "ts_anthropic_tool_runner",
            "adapters.ts_anthropic_tool_runner",
            "mcp",
            ("mcp",),
            "the Anthropic TypeScript SDK's toolRunner (max_iterations), in node",
            commands=("node",),
            programs="Node.js 20+ (node; npm on first use)",
        ),
        RunnerInfo(
            "ts_ai_sdk",
            "adapters.ts_ai_sdk",
            "mcp",
            ("mcp",),
            "the AI SDK's generateText (stopWhen: stepCountIs), in node",
            commands=("node",),
            programs="Node.js 20+ (node; npm on first use)",
        ),
        RunnerInfo(
            "external",
            "adapters.external",
            "mcp",
            ("mcp",),
            "any command (--cmd): the model through a recording proxy, the tools over MCP",
            by_default=False,
        ),
    )
}


def load(name: str) -> Adapter:
    """Import a runner's adapter; a missing framework raises `MissingExtra` naming the extra."""
    info = RUNNERS.get(name)
    if info is None:
        raise LooplabError(f"unknown runner {name!r}; known runners: {', '.join(RUNNERS)}")
    for module in info.requires:
        if not _findable(module):
            raise MissingExtra(name, info.extra, module)
    for command in info.commands:
        if shutil.which(command) is None:
            raise LooplabError(f"runner {name!r} needs {command!r} on PATH, which this machine does not have")
    return importlib.import_module(info.module).ADAPTER
