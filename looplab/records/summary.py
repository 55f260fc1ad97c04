"""What a matrix of outcomes comes to: one cell per outcome, and each runner's numbers over them.

With repeats (a cell run twice or more), each runner's pass rate and medians carry their 95 % intervals
(`looplab.records.intervals`): what the numbers are worth when the model varies from run to run.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

from looplab.records.intervals import median_interval, wilson

if TYPE_CHECKING:  # an outcome's module reads the suite's check types: a document's reader needs none of it
    from looplab.records.outcome import RunOutcome

__all__ = ["Cell", "RunnerSummary", "median", "percentile", "summarize"]

#: An interval as the summary stores it: `[low, high]`.
Span = tuple[float, float]


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
    #: The most times any of its cells ran; the intervals below are there only when this is 2 or more.
    repeats: int = 1
    #: Its pass rate's 95 % interval (Wilson), `[low, high]`, over every run.
    completion_interval: Span | None = None
    #: Each median's 95 % interval (`intervals.median_interval`), `[low, high]`, over the runs that ran.
    model_calls_interval: Span | None = None
    tokens_median: float | None = None
    tokens_interval: Span | None = None
    cost_usd_interval: Span | None = None
    wall_s_median: float | None = None
    wall_s_interval: Span | None = None


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


def _interval(values: Sequence[float], spread: bool) -> Span | None:
    """A median's 95 % interval, where the runs vary (`spread`) and there are values."""
    return median_interval(values).ends if spread and values else None


def summarize(outcomes: Iterable[RunOutcome]) -> list[RunnerSummary]:
    """Per runner, in the order the outcomes name them: its passes, its medians, and with repeats their intervals."""
    by_runner: dict[str, list[RunOutcome]] = {}
    for o in outcomes:
        by_runner.setdefault(o.runner, []).append(o)
    summaries = []
    for runner, runs in by_runner.items():
        done = [o.result for o in runs if o.result is not None]
        calls = [r.totals.model_calls for r in done]
        tools = [r.totals.tool_calls for r in done]
        tokens = [r.totals.input_tokens + r.totals.output_tokens for r in done]
        walls = [r.totals.wall_s for r in done]
        costs = [r.totals.cost_usd for r in done if r.totals.cost_usd is not None]
        if len(costs) < len(done):  # a model without a price: the cost is unknown, not the median of the rest
            costs = []
        passed = sum(o.passed for o in runs)
        reasons = Counter(str(r.stop_reason) for r in done)
        if len(done) < len(runs):
            reasons["not run"] = len(runs) - len(done)
        repeats = max(Counter(o.case for o in runs).values())  # the runs of its most repeated case
        spread = repeats >= 2  # one run a cell says nothing of how the runs vary
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
                repeats=repeats,
                completion_interval=wilson(passed, len(runs)).ends if spread else None,
                model_calls_interval=_interval(calls, spread),
                tokens_median=median(tokens),
                tokens_interval=_interval(tokens, spread),
                cost_usd_interval=_interval(costs, spread),
                wall_s_median=median(walls),
                wall_s_interval=_interval(walls, spread),
            )
        )
    return summaries
