"""Runs cases through runners: a fresh workspace and Guard per run, one model endpoint for all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import adapters
from adapters.base import Adapter, Api, LooplabError, ModelSpec, RunResult, parse_model
from adapters.recorder import Pricing
from scenarios.cases import Case, CheckResult, check
from shared_tools import Guard, Workspace, default_tools

SCRIPTED = "scripted"
PROVIDER_OF_API: dict[str, str] = {"messages": "anthropic", "chat": "openai", "responses": "openai"}


@dataclass(frozen=True)
class ModelChoice:
    """What the user asked for on the command line: `scripted` or `provider:name`."""

    model: str = SCRIPTED
    base_url: str | None = None
    api: Api | None = None
    pricing: Pricing = field(default_factory=Pricing)

    def __post_init__(self) -> None:
        if self.model != SCRIPTED:
            parse_model(self.model)  # fail early, before any run starts


@dataclass
class Endpoint:
    """A resolved model endpoint; for the scripted model, the loopback server's base URLs."""

    choice: ModelChoice
    scripted_urls: dict[str, str] | None = None

    def spec_for(self, adapter: Adapter) -> ModelSpec:
        choice = self.choice
        if self.scripted_urls is None:
            provider, name = parse_model(choice.model)
            return ModelSpec(provider, name, choice.base_url, None, choice.api, choice.pricing)  # type: ignore[arg-type]
        api = choice.api or adapter.apis[0]
        provider = PROVIDER_OF_API[api]
        return ModelSpec(provider, SCRIPTED, self.scripted_urls[provider], "scripted", choice.api, choice.pricing)  # type: ignore[arg-type]


@contextmanager
def endpoint(choice: ModelChoice) -> Iterator[Endpoint]:
    """Start the scripted model server if it is the model asked for; stop it afterwards."""
    if choice.model != SCRIPTED:
        provider, name = parse_model(choice.model)
        ModelSpec(provider, name, choice.base_url).key()  # type: ignore[arg-type]  # a missing key fails here, once
        yield Endpoint(choice)
        return
    from scenarios.scripted.server import ScriptedModelServer

    with ScriptedModelServer() as server:
        yield Endpoint(choice, {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url})


@dataclass
class RunOutcome:
    """One runner on one case: a result with its checks, or the one-line reason there is none."""

    runner: str
    case: str
    result: RunResult | None = None
    checks: list[CheckResult] = field(default_factory=list)
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.result is not None and all(c.passed for c in self.checks)


def run_one(runner: str, case: Case, where: Endpoint, max_steps: int | None = None) -> RunOutcome:
    """Run one case through one runner. Never raises: a failure is a row, not a crash."""
    outcome = RunOutcome(runner, case.id)
    limits = case.limits if max_steps is None else case.limits.model_copy(update={"max_steps": max_steps})
    try:
        adapter = adapters.load(runner)
        with Workspace(case.repo_path) as ws:
            before = ws.fingerprint()
            guard = Guard(ws, tools=default_tools(), max_repeats=limits.max_repeats)
            result = adapter.run(case.task, guard, limits, where.spec_for(adapter))
            changed = ws.fingerprint() != before
    except LooplabError as exc:
        outcome.error = str(exc)
        return outcome
    except Exception as exc:  # a crash in one runner never stops the others
        outcome.error = f"{type(exc).__name__}: {exc}"
        return outcome
    result.case = case.id
    outcome.result = result
    outcome.checks = check(case, result, changed)
    return outcome


def write_outputs(outcomes: list[RunOutcome], out_dir: Path) -> tuple[Path, Path]:
    """`results.json` (a list of RunResults) and `traces.jsonl` (one line per step) in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results = [o.result for o in outcomes if o.result is not None]
    results_path = write_results(results, out_dir / "results.json")
    traces_path = out_dir / "traces.jsonl"
    with traces_path.open("w", encoding="utf-8") as fh:
        for r in results:
            for line in r.trace.jsonl():
                fh.write(json.dumps({"runner": r.runner, "case": r.case, "model": r.model, **json.loads(line)}) + "\n")
    return results_path, traces_path


def write_results(results: list[RunResult], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([r.model_dump(mode="json") for r in results], indent=2) + "\n", encoding="utf-8")
    return path


def default_out_dir() -> Path:
    return Path("looplab-runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
