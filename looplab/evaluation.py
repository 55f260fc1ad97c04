"""The runner x case matrix and the numbers it comes to."""

from __future__ import annotations

import math
import os
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from looplab import isolation, schedule
from looplab.environments import RunnerEnv
from looplab.harness import Endpoint, RunOutcome
from scenarios.cases import Case


class RunnerSummary(BaseModel):
    """One runner over the matrix: how often it passed, and what a task cost it."""

    runner: str
    runs: int
    passed: int
    not_run: int
    completion_rate: float
    model_calls_median: float | None
    model_calls_p95: float | None
    tool_calls_median: float | None
    cost_usd_median: float | None
    cost_usd_p95: float | None
    stop_reasons: dict[str, int]


class Cell(BaseModel):
    """One runner on one case (one repeat): passed or not, and the first check that failed."""

    runner: str
    case: str
    repeat: int
    passed: bool
    stop_reason: str | None
    failed_checks: list[str]
    error: str | None = None


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def default_jobs() -> int:
    """Worker processes for the matrix: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def run_matrix(
    runners: Sequence[str],
    cases: Sequence[Case],
    where: Endpoint,
    *,
    repeat: int = 1,
    on_done: Callable[[RunOutcome], None] | None = None,
    jobs: int = 1,
    concurrency: int | None = None,
    select: Callable[[str, str, int], bool] | None = None,
    isolated: Callable[[str], RunnerEnv] | None = None,
    **options: Any,
) -> list[RunOutcome]:
    """Every runner on every case, `repeat` times; each run independent of the others.

    Up to `concurrency` cells are in flight at once (default: one per job), on threads: in this
    process when `jobs` is 1, else spread over `jobs` worker processes (see `looplab.schedule`).
    The model server stays in this process; workers reach it through `where`. The outcomes come
    back in plan order whatever the concurrency; `on_done` is called here, as each cell finishes.
    `select(runner, case_id, repeat)` keeps a slice of the matrix (a shard, the cells `--resume` lacks).
    `isolated(runner)` gives each runner's environment: its cells then run there, in lanes of its
    interpreter, `jobs` lanes at a time (see `looplab.isolation`).
    """
    planned = plan(runners, cases, repeat, select)
    concurrency = max(1, jobs if concurrency is None else concurrency)
    cells_here = [(runner, case) for runner, case, _ in planned]
    slots: list[RunOutcome | None] = [None] * len(planned)

    def done(i: int, outcome: RunOutcome) -> None:
        # The repeat index comes from the plan, not from counting: a slice of the matrix keeps the full one's.
        outcome.repeat = planned[i][2]
        slots[i] = outcome
        if on_done:
            on_done(outcome)

    if isolated is not None:
        isolation.run_isolated(cells_here, where, isolated, jobs, concurrency, done, options)
    elif jobs <= 1 or len(cells_here) <= 1 or concurrency <= 1:
        schedule.run_here(cells_here, where, concurrency, done, options)
    else:
        schedule.run_in_lanes(cells_here, where, jobs, concurrency, done, options)
    return [o for o in slots if o is not None]


def plan(
    runners: Sequence[str],
    cases: Sequence[Case],
    repeat: int = 1,
    select: Callable[[str, str, int], bool] | None = None,
) -> list[tuple[str, Case, int]]:
    """The matrix's cells in order, `(runner, case, repeat index)`, less those `select` leaves out."""
    return [
        (runner, case, k)
        for k in range(1, repeat + 1)
        for case in cases
        for runner in runners
        if select is None or select(runner, case.id, k)
    ]


def cells(outcomes: Iterable[RunOutcome]) -> list[Cell]:
    """One `Cell` per outcome; its repeat is the outcome's own, else counted in order within (runner, case)."""
    seen: Counter[tuple[str, str]] = Counter()
    out = []
    for o in outcomes:
        seen[(o.runner, o.case)] += 1
        failed = [c.name for c in o.checks if not c.passed]
        reason = str(o.result.stop_reason) if o.result else None
        out.append(
            Cell(
                runner=o.runner,
                case=o.case,
                repeat=o.repeat if o.repeat is not None else seen[(o.runner, o.case)],
                passed=o.passed,
                stop_reason=reason,
                failed_checks=failed,
                error=o.error,
            )
        )
    return out


def summarize(outcomes: Iterable[RunOutcome]) -> list[RunnerSummary]:
    by_runner: dict[str, list[RunOutcome]] = {}
    for o in outcomes:
        by_runner.setdefault(o.runner, []).append(o)
    summaries = []
    for runner, runs in by_runner.items():
        done = [o.result for o in runs if o.result is not None]
        calls = [r.totals.model_calls for r in done]
        tools = [r.totals.tool_calls for r in done]
        costs = [r.totals.cost_usd for r in done if r.totals.cost_usd is not None]
        if len(costs) < len(done):  # a model without a price: the cost is unknown, not the median of the rest
            costs = []
        passed = sum(o.passed for o in runs)
        reasons = Counter(str(r.stop_reason) for r in done)
        if len(done) < len(runs):
            reasons["not run"] = len(runs) - len(done)
        summaries.append(
            RunnerSummary(
                runner=runner,
                runs=len(runs),
                passed=passed,
                not_run=len(runs) - len(done),
                completion_rate=round(passed / len(runs), 4),
                model_calls_median=median(calls),
                model_calls_p95=percentile(calls, 95),
                tool_calls_median=median(tools),
                cost_usd_median=median(costs),
                cost_usd_p95=percentile(costs, 95),
                stop_reasons=dict(sorted(reasons.items())),
            )
        )
    return summaries
