"""Cases are data: a TOML file names the fixture repo, the task, the limits and the checks.

A suite is a folder under `scenarios/` with a `cases/` folder of `*.toml`
files; each case's `repo` is a folder of that suite. Adding either needs no
code change.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from adapters.base import Limits, RunResult, StopReason

SCENARIOS_DIR = Path(__file__).resolve().parent


class Checks(BaseModel):
    """What a run must show for the case to pass; every field is optional."""

    model_config = ConfigDict(extra="forbid")

    stop_reason: StopReason | None = None
    answer_mentions: list[str] = Field(default_factory=list)
    tools_called: list[str] = Field(default_factory=list)
    tools_not_called: list[str] = Field(default_factory=list)
    max_model_calls: int | None = None
    workspace_unchanged: bool = False


class Case(BaseModel):
    """One investigation to run through every runner."""

    model_config = ConfigDict(extra="forbid")

    id: str
    description: str = ""
    suite: str = ""
    repo: str
    target: str
    task: str
    limits: Limits = Field(default_factory=Limits)
    checks: Checks = Field(default_factory=Checks)

    @property
    def repo_path(self) -> Path:
        return SCENARIOS_DIR / self.suite / self.repo


class CheckResult(BaseModel):
    name: str
    passed: bool
    detail: str


@cache
def load_cases() -> dict[str, Case]:
    """Every case of every suite, by id."""
    cases: dict[str, Case] = {}
    for path in sorted(SCENARIOS_DIR.glob("*/cases/*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        case = Case.model_validate({**data, "suite": path.parent.parent.name})
        if case.id in cases:
            raise ValueError(f"duplicate case id {case.id!r} in {path}")
        if not case.repo_path.is_dir():
            raise ValueError(f"{path}: repo folder {case.repo_path} does not exist")
        cases[case.id] = case
    return cases


def check(case: Case, result: RunResult, workspace_changed: bool) -> list[CheckResult]:
    """Evaluate a case's checks against one run."""
    c, out = case.checks, []
    if c.stop_reason is not None:
        out.append(
            CheckResult(
                name="stop_reason",
                passed=result.stop_reason == c.stop_reason,
                detail=f"expected {c.stop_reason}, got {result.stop_reason}",
            )
        )
    answer = (result.answer or "").lower()
    for word in c.answer_mentions:
        out.append(
            CheckResult(
                name=f"answer mentions {word}",
                passed=word.lower() in answer,
                detail=f"{word!r} {'in' if word.lower() in answer else 'not in'} the answer",
            )
        )
    called = {call.name for call in result.trace.tool_calls}
    for tool in c.tools_called:
        out.append(CheckResult(name=f"called {tool}", passed=tool in called, detail=f"tools called: {sorted(called)}"))
    for tool in c.tools_not_called:
        ran = any(t.name == tool and t.outcome == "ok" for t in result.trace.tool_calls)
        out.append(
            CheckResult(name=f"{tool} did not run", passed=not ran, detail=f"{tool} {'ran' if ran else 'never ran'}")
        )
    if c.max_model_calls is not None:
        n = result.totals.model_calls
        out.append(
            CheckResult(
                name=f"at most {c.max_model_calls} model calls",
                passed=n <= c.max_model_calls,
                detail=f"{n} model calls",
            )
        )
    if c.workspace_unchanged:
        out.append(
            CheckResult(
                name="workspace unchanged",
                passed=not workspace_changed,
                detail="changed" if workspace_changed else "byte-for-byte the same",
            )
        )
    if result.stop_reason != StopReason.FINAL_ANSWER:
        out.append(
            CheckResult(
                name="no answer on a non-final stop", passed=result.answer is None, detail=f"answer={result.answer!r}"
            )
        )
    return out
