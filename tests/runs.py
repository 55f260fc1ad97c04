"""The runners under test, and one run of a runner against a scripted policy (`looplab.testing.runs`)."""

from __future__ import annotations

from typing import Any

import pytest

from looplab.adapters import registry
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import RunResult
from looplab.run import matrix
from looplab.scenarios.cases import Case, load_cases
from looplab.scenarios.scripted.faults import Fault, HttpFaults
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.testing.runs import default_runners, run_runner, runners_from_environment, tool_steps

__all__ = [
    "ALL_RUNNERS",
    "GEMINI_RETRIES_A_BROKEN_REPLY",
    "cells",
    "run_behind_faults",
    "run_runner",
    "tool_steps",
]

#: The runners under test: those that run here by default, or those named in LOOPLAB_RUNNERS (comma-separated),
#: as the per-adapter nox sessions do when only one framework is installed. (`external` needs a command:
#: tests/runners/test_external_runner.py gives it one; a runner that cannot share this environment runs these tests
#: in its own: tests/run/test_own_environments.py.)
ALL_RUNNERS = runners_from_environment() or default_runners()
#: The runners that reach Gemini through something other than google-genai (LiteLLM, lm15, the TypeScript providers):
#: these retry a reply that breaks off, as on their other wire APIs; google-genai retries none, streamed or not.
GEMINI_RETRIES_A_BROKEN_REPLY = frozenset({"openai_agents", "smolagents", "dspy", "ts_ai_sdk", "ts_langgraph"})


def run_behind_faults(
    runner: str, statuses: list[Fault], then: Fault | None = None, **options: Any
) -> tuple[RunResult, HttpFaults]:
    """One run of `runner` (within 30 s) behind an endpoint that serves `statuses` first, then `then` or the
    scripted model's replies; the result and what the endpoint served."""
    faults: list[HttpFaults] = []

    def wrap(app: Any) -> HttpFaults:
        faults.append(HttpFaults(app, statuses, then=then))
        return faults[0]

    with ScriptedModelServer(wrap=wrap) as server:
        result = run_runner(runner, server, Limits(max_seconds=30), **options)
    return result, faults[0]


#: The cells whose outcome the framework leaves to thread timing (its declaration's `delegation_races`), each with
#: what was measured: the matrix tests skip them, saying why, and a test of each pins what holds whichever way the
#: race goes.
RACES = {cell: f"{cell[0]}: {why}" for cell, why in matrix.races(registry.RUNNERS, load_cases().values()).items()}


def without_races(cells: list[tuple[str, str]]) -> list[Any]:
    """`cells`, each of `RACES` marked to be skipped with what was measured."""
    return [
        pytest.param(*cell, marks=pytest.mark.skip(reason=RACES[cell])) if cell in RACES else cell for cell in cells
    ]


def cells(runners: list[str], cases: dict[str, Case]) -> list[tuple[str, str]]:
    """Each `(runner, case id)` whose case applies to the runner (a delegation case needs a framework that delegates),
    as the matrix plans them."""
    return [(r, c) for c in cases for r in runners if cases[c].runs_on(registry.RUNNERS[r.partition("@")[0]])]
