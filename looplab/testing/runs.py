"""One runner against a scripted policy, on the built-in investigation, in a fresh workspace.

What the conformance checks and looplab's own tests run: the case `vip-compound`'s repo, task and system prompt
by default, the model served by a `ScriptedModelServer` over loopback HTTP, the tools behind a Guard.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

from looplab.adapters import registry
from looplab.adapters.contract.cancel import Cancellation
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import DEFAULT_RETRIES, Api
from looplab.adapters.contract.pricing import Pricing
from looplab.adapters.contract.result import RunResult
from looplab.run.harness import Endpoint, ModelChoice
from looplab.scenarios.cases import Case, load_cases
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Approver, Guard, Tool, ToolCallRecord, Workspace, default_tools

#: The case the checks run: a failing test whose cause is a few files away.
INVESTIGATION = "vip-compound"


@functools.cache
def investigation() -> Case:
    """The built-in case the checks run (its repo, task and system prompt)."""
    return load_cases()[INVESTIGATION]


def default_runners() -> list[str]:
    """The runners that run here by default: not `external` (it needs a command), sharing this environment (one
    that cannot runs these checks in its own), with their programs (such as `node`) on PATH."""
    return [
        name for name, info in registry.RUNNERS.items() if info.by_default and info.in_all and info.programs_found()
    ]


def runners_from_environment() -> list[str]:
    """The runners LOOPLAB_RUNNERS names (comma-separated), as a version session sets it; [] when it names none."""
    return [r for r in os.environ.get("LOOPLAB_RUNNERS", "").split(",") if r]


def run_runner(
    runner: str,
    server: ScriptedModelServer,
    limits: Limits | None = None,
    *,
    api: Api | None = None,
    repo: Path | None = None,
    tools: list[Tool] | None = None,
    task: str | None = None,
    system_prompt: str | None = None,
    pricing: Pricing | None = None,
    retries: int = DEFAULT_RETRIES,
    approver: Approver | None = None,
    cancel: Cancellation | None = None,
) -> RunResult:
    """One run of `runner` with the model served by `server`, in a fresh workspace of `repo` (the investigation's)."""
    case = investigation()
    limits = limits or Limits()
    adapter = registry.load(runner)
    urls = server.base_urls
    choice = ModelChoice(api=api, pricing=pricing or Pricing(), retries=retries)
    spec = Endpoint(choice, urls).spec_for(adapter)
    with Workspace(repo or case.repo_path) as ws:
        tools = tools if tools is not None else default_tools()
        guard = Guard(ws, tools=tools, max_repeats=limits.max_repeats, approver=approver)
        prompt = system_prompt or case.system_prompt
        return adapter.run(task or case.stated_task, guard, limits, spec, system_prompt=prompt, cancel=cancel)


def tool_steps(result: RunResult, detail: Callable[[ToolCallRecord], tuple] | None = None) -> list[list[tuple]]:
    """Each step's tool calls, as (name, args, outcome) or `detail(call)`, sorted within the step.

    The tools of one model reply may run at once (parallel-reads), so their records' order within the
    step is the scheduler's; the steps themselves are in order.
    """
    shape = detail or (lambda c: (c.name, repr(c.args), c.outcome))
    return [sorted(shape(c) for c in step.tool_calls) for step in result.trace.steps]
