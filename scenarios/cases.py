"""Cases are data: a TOML file names the fixture repo, the task, the limits, the faults and the checks.

A suite is a folder under `scenarios/` with a `cases/` folder of `*.toml`
files; a case's `repo` is a folder of that suite, and its optional `overlay`
another folder whose files are laid over the repo's (a variant without a
copy). A suite's `system_prompt.txt` is the system prompt of its cases that set none of their own.
Adding a case, a variant or a fixture repo needs no code change.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.result import RunResult
from looplab.scenarios.scripted.conversation import PERSONA_HEADER, Persona
from looplab.shared_tools import Fault

__all__ = [
    "Case",
    "CheckResult",
    "Checks",
    "DEFAULT_SUITE",
    "ObservationCheck",
    "SCENARIOS_DIR",
    "SYSTEM_PROMPT_FILE",
    "ScriptedModel",
    "check",
    "default_system_prompt",
    "load_case",
    "load_cases",
]

SCENARIOS_DIR = Path(__file__).resolve().parent
#: The suite a run without a case (a bench request, a bare loop) takes its system prompt from.
DEFAULT_SUITE = "invoice_discount"
#: A suite's default system prompt: this file in the suite's folder.
SYSTEM_PROMPT_FILE = "system_prompt.txt"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ObservationCheck(_Strict):
    """Some call of `tool` returned an observation containing `text`."""

    tool: str
    text: str


class Checks(_Strict):
    """What a run must show for the case to pass; every field is optional."""

    stop_reason: StopReason | list[StopReason] | None = Field(None, description="The stop reason, or the allowed ones.")
    answer_mentions: list[str] = Field(default_factory=list)
    answer_excludes: list[str] = Field(default_factory=list)
    tools_called: list[str] = Field(default_factory=list)
    tools_not_called: list[str] = Field(default_factory=list, description="Tools that must never run (outcome ok).")
    files_read: list[str] = Field(default_factory=list, description="Paths read_file returned content for.")
    refused: list[str] = Field(default_factory=list, description="First arguments of calls that must be refused.")
    observation_contains: list[ObservationCheck] = Field(default_factory=list)
    parallel_calls: int | None = Field(None, description="Some step holds at least this many tool calls.")
    failed_calls: int | None = Field(
        None, description="At least this many requested tool calls did not run (refused, invalid, unknown)."
    )
    max_model_calls: int | None = None
    max_wall_s: float | None = None
    workspace_unchanged: bool = False


class ScriptedModel(_Strict):
    """How the scripted model plays this case: its persona and its price (for cost budgets)."""

    persona: Persona = "careful"
    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    @property
    def headers(self) -> dict[str, str]:
        """The request headers that tell the scripted model how to play: its persona travels beside the request,
        so the model name stays `scripted` whatever the persona."""
        return {PERSONA_HEADER: self.persona}


class Case(_Strict):
    """One investigation to run through every runner."""

    id: str
    description: str = ""
    suite: str = ""
    repo: str
    overlay: str | None = None
    target: str
    task: str
    system_prompt: str = Field(description="What every runner is told first; the suite's system_prompt.txt if unset.")
    allow_writes: bool = Field(False, description="Offer write_file (still behind the approval gate).")
    limits: Limits = Field(default_factory=Limits)
    faults: list[Fault] = Field(default_factory=list)
    model: ScriptedModel = Field(default_factory=ScriptedModel)
    checks: Checks = Field(default_factory=Checks)

    @property
    def repo_path(self) -> Path:
        return SCENARIOS_DIR / self.suite / self.repo

    @property
    def overlay_path(self) -> Path | None:
        return SCENARIOS_DIR / self.suite / self.overlay if self.overlay else None


class CheckResult(BaseModel):
    name: str
    passed: bool
    detail: str


def default_system_prompt(suite: str = DEFAULT_SUITE) -> str:
    """The suite's system prompt (its `system_prompt.txt`), for its cases that set none and for runs without a case."""
    return _suite_prompt(SCENARIOS_DIR / suite)


def _suite_prompt(folder: Path) -> str:
    path = folder / SYSTEM_PROMPT_FILE
    try:
        return path.read_text(encoding="utf-8").rstrip("\n")  # the file's last newline is not the prompt's
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise LooplabError(f"{path}: the suite's system prompt cannot be read: {why}") from None


def load_case(path: Path) -> Case:
    """One case file; a bad one is a one-line `LooplabError` naming the file and the field."""
    suite = path.parent.parent.name
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise LooplabError(f"{path}: not valid TOML: {exc}") from None
    if "system_prompt" not in data:  # the case sets none: its suite's
        try:
            data["system_prompt"] = _suite_prompt(path.parent.parent)
        except LooplabError as exc:
            raise LooplabError(f"{path}: no system_prompt of its own, and {exc}") from None
    try:
        case = Case.model_validate({**data, "suite": suite})
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise LooplabError(f"{path}: {where}: {err['msg']}") from None
    for folder in (case.repo_path, case.overlay_path):
        if folder is not None and not folder.is_dir():
            raise LooplabError(f"{path}: folder {folder} does not exist")
    return case


@cache
def load_cases() -> dict[str, Case]:
    """Every case of every suite, by id."""
    cases: dict[str, Case] = {}
    for path in sorted(SCENARIOS_DIR.glob("*/cases/*.toml")):
        case = load_case(path)
        if case.id in cases:
            raise LooplabError(f"{path}: duplicate case id {case.id!r}")
        cases[case.id] = case
    return cases


def check(
    case: Case, result: RunResult, workspace_changed: bool, *, one_tool_a_reply: bool = False
) -> list[CheckResult]:
    """Evaluate a case's checks against one run."""
    c, out = case.checks, []
    calls = result.trace.tool_calls

    def add(name: str, passed: bool, detail: str) -> None:
        out.append(CheckResult(name=name, passed=passed, detail=detail))

    if c.stop_reason is not None:
        allowed = c.stop_reason if isinstance(c.stop_reason, list) else [c.stop_reason]
        expected = " or ".join(map(str, allowed))
        add("stop_reason", result.stop_reason in allowed, f"expected {expected}, got {result.stop_reason}")
    answer = (result.answer or "").lower()
    for word in c.answer_mentions:
        add(f"answer mentions {word}", word.lower() in answer, "yes" if word.lower() in answer else "no")
    for word in c.answer_excludes:
        add(
            f"answer does not mention {word}",
            word.lower() not in answer,
            "no" if word.lower() not in answer else "it does",
        )
    called = sorted({call.name for call in calls})
    for tool in c.tools_called:
        add(f"called {tool}", tool in called, f"tools called: {called}")
    for tool in c.tools_not_called:
        ran = [call for call in calls if call.name == tool and call.outcome == "ok"]
        add(f"{tool} did not run", not ran, f"{tool} ran {len(ran)} times")
    read = [call.first_arg for call in calls if call.name == "read_file" and call.outcome == "ok"]
    for path in c.files_read:
        add(f"read {path}", path in read, f"files read: {read}")
    for arg in c.refused:
        outcomes = [call.outcome for call in calls if call.first_arg == arg]
        add(f"refused {arg}", bool(outcomes) and set(outcomes) == {"refused"}, f"outcomes: {outcomes or 'never asked'}")
    for obs in c.observation_contains:
        found = any(call.name == obs.tool and obs.text in call.result for call in calls)
        add(f"{obs.tool} observation contains {obs.text!r}", found, "found" if found else "not found")
    if c.parallel_calls is not None:
        name = f"a step with {c.parallel_calls} tool calls"
        most = max((len(s.tool_calls) for s in result.trace.steps), default=0)
        if one_tool_a_reply:
            add(name, True, "not applicable: the runner's loop lets the model name one tool a reply")
        else:
            add(name, most >= c.parallel_calls, f"most tool calls in a step: {most}")
    if c.failed_calls is not None:
        requested = sum(len(s.model_call.tool_calls_requested) for s in result.trace.steps)
        failed = requested - sum(call.outcome == "ok" for call in calls)
        detail = f"{failed} of {requested} requested"
        add(f"at least {c.failed_calls} failed tool calls", failed >= c.failed_calls, detail)
    if c.max_model_calls is not None:
        n = result.totals.model_calls
        add(f"at most {c.max_model_calls} model calls", n <= c.max_model_calls, f"{n} model calls")
    if c.max_wall_s is not None:
        wall = result.totals.wall_s
        add(f"wall time at most {c.max_wall_s:g} s", wall <= c.max_wall_s, f"{wall:.2f} s")
    if case.limits.max_cost_usd is not None:
        spent, budget = result.totals.cost_usd, case.limits.max_cost_usd
        within = spent is not None and spent <= budget  # an unknown spend is not within any budget
        add("spent within max_cost_usd", within, f"{'unknown' if spent is None else f'{spent:.6f}'} of {budget:g}")
    if c.workspace_unchanged:
        add("workspace unchanged", not workspace_changed, "changed" if workspace_changed else "byte-for-byte the same")
    if result.stop_reason != StopReason.FINAL_ANSWER:
        add("no answer on a non-final stop", result.answer is None, f"answer={result.answer!r}")
    return out
