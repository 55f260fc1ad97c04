"""The runner x case matrix and the numbers it comes to."""

from __future__ import annotations

import math
import multiprocessing
import os
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from pydantic import BaseModel

from looplab.harness import Endpoint, RunOutcome, run_one
from looplab.interrupt import signals_held, worker_signals
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
    **options: Any,
) -> list[RunOutcome]:
    """Every runner on every case, `repeat` times; each run independent of the others.

    With `jobs` > 1 the cells run in that many worker processes (processes,
    not threads: `framework_noise` is process-wide and frameworks keep global
    state). The model server stays in this process; workers reach it through
    `where`. The outcomes come back in the same order as with `jobs=1`;
    `on_done` is called here, as each cell finishes.
    """
    plan = [(runner, case) for _ in range(repeat) for case in cases for runner in runners]
    if jobs <= 1 or len(plan) <= 1:
        outcomes = []
        for runner, case in plan:
            outcome = run_one(runner, case, where, **options)
            outcomes.append(outcome)
            if on_done:
                on_done(outcome)
        return outcomes
    slots: list[RunOutcome | None] = [None] * len(plan)
    # spawn, not fork: this process runs the model server's thread, and a forked child would inherit its locks.
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(plan)), mp_context=context, initializer=worker_signals)
    try:
        with signals_held():  # workers are born with the signals blocked, until they ignore Ctrl-C themselves
            pending: dict[Future[RunOutcome], int] = {
                pool.submit(run_one, runner, case, where, **options): i for i, (runner, case) in enumerate(plan)
            }
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                i = pending.pop(future)
                slots[i] = _collect(future, *plan[i])
                if on_done:
                    on_done(slots[i])
    except BaseException:  # Ctrl-C: drop the cells not started yet rather than wait for them
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return [o for o in slots if o is not None]


def _collect(future: Future[RunOutcome], runner: str, case: Case) -> RunOutcome:
    """A worker's outcome; a worker that died (or an outcome that could not be sent back) is that cell's error."""
    try:
        return future.result()
    except Exception as exc:
        return RunOutcome(runner, case.id, error=f"worker process failed: {type(exc).__name__}: {exc}")


def cells(outcomes: Iterable[RunOutcome]) -> list[Cell]:
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
                repeat=seen[(o.runner, o.case)],
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
