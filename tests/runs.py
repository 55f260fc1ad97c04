"""Running one runner against a scripted policy, for the conformance tests."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import adapters
from adapters.base import DEFAULT_RETRIES, Api, Limits, RunResult
from adapters.pricing import Pricing
from looplab.harness import Endpoint, ModelChoice
from scenarios.scripted.server import ScriptedModelServer
from shared_tools import Approver, Guard, Tool, ToolCallRecord, Workspace, default_tools
from tests.conftest import FIXTURE_REPO, SYSTEM_PROMPT, TASK

#: The runners under test: all of them, or those named in LOOPLAB_RUNNERS (comma-separated), as the
#: per-adapter nox sessions do when only one framework is installed.
#: (`external` needs a command: tests/test_external_runner.py gives it one.)
#: (A runner whose program this machine lacks, such as `node`, cannot run here.)
#: (A runner that cannot share this environment runs these tests in its own: tests/test_own_environments.py.)
DEFAULT_RUNNERS = ",".join(
    name
    for name, info in adapters.RUNNERS.items()
    if info.by_default and info.in_all and all(shutil.which(c) is not None for c in info.commands)
)
ALL_RUNNERS = [r for r in os.environ.get("LOOPLAB_RUNNERS", DEFAULT_RUNNERS).split(",") if r]


def run_runner(
    runner: str,
    server: ScriptedModelServer,
    limits: Limits | None = None,
    *,
    api: Api | None = None,
    repo: Path = FIXTURE_REPO,
    tools: list[Tool] | None = None,
    task: str = TASK,
    system_prompt: str = SYSTEM_PROMPT,
    pricing=None,
    retries: int = DEFAULT_RETRIES,
    approver: Approver | None = None,
) -> RunResult:
    """One run of `runner` with the model served by `server`, in a fresh workspace of `repo`."""
    limits = limits or Limits()
    adapter = adapters.load(runner)
    urls = {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url}
    choice = ModelChoice(api=api, pricing=pricing or Pricing(), retries=retries)
    spec = Endpoint(choice, urls).spec_for(adapter)
    with Workspace(repo) as ws:
        tools = tools if tools is not None else default_tools()
        guard = Guard(ws, tools=tools, max_repeats=limits.max_repeats, approver=approver)
        return adapter.run(task, guard, limits, spec, system_prompt=system_prompt)


def tool_steps(result: RunResult, detail: Callable[[ToolCallRecord], tuple] | None = None) -> list[list[tuple]]:
    """Each step's tool calls, as (name, args, outcome) or `detail(call)`, sorted within the step.

    The tools of one model reply may run at once (parallel-reads), so their records' order within the
    step is the scheduler's; the steps themselves are in order.
    """
    shape = detail or (lambda c: (c.name, repr(c.args), c.outcome))
    return [sorted(shape(c) for c in step.tool_calls) for step in result.trace.steps]
