"""A runner's numbers over repeats as attributes of its runs' root spans (`looplab.views.otel`).

With repeats (the document's summary says the runner's cells ran twice or more: `looplab eval --repeat K`), each
root `invoke_agent` span carries the runner's numbers over all its runs with their 95 % intervals:
`looplab.runner.repeats`, `.runs`, `.passed`, `.pass_rate` (a fraction) and `.pass_rate_ci95.low`/`.high` (Wilson),
and the medians a run `looplab.runner.model_calls_median`, `.tokens_median` (in + out), `.cost_usd_median` and
`.wall_s_median`, each with its `..._median_ci95.low`/`.high` (from the order statistics:
`looplab.records.intervals`). Every run of a runner repeats its runner's values, so a query over one trace finds
them; without repeats there are none. (`_ci95` is a namespace of its own, not a child of the value, since an
OpenTelemetry attribute name may not also be a namespace.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from looplab.records.summary import RunnerSummary

#: The medians a run whose intervals a runner's root spans carry, with repeats (`RunnerSummary`'s `{name}_median`
#: and `{name}_interval`).
RUNNER_MEDIANS = ("model_calls", "tokens", "cost_usd", "wall_s")


def runner_attributes(summary: RunnerSummary) -> dict[str, Any]:
    """A runner's numbers over repeats as root-span attributes (named in the module docstring): its pass rate and
    medians with their 95 % intervals; none when its cells ran once (`repeats` below 2)."""
    if summary.repeats < 2:
        return {}
    attributes: dict[str, Any] = {
        "looplab.runner.repeats": summary.repeats,
        "looplab.runner.runs": summary.runs,
        "looplab.runner.passed": summary.passed,
        "looplab.runner.pass_rate": summary.completion_rate,
        **_ci95("looplab.runner.pass_rate_ci95", summary.completion_interval),
    }
    for name in RUNNER_MEDIANS:
        median = getattr(summary, f"{name}_median")
        if median is not None:  # no cost median: a model without a price
            attributes[f"looplab.runner.{name}_median"] = median
            attributes |= _ci95(f"looplab.runner.{name}_median_ci95", getattr(summary, f"{name}_interval"))
    return attributes


def _ci95(prefix: str, interval: Sequence[float] | None) -> dict[str, float]:
    """An interval's ends as `{prefix}.low` and `{prefix}.high`; none without one."""
    if interval is None:
        return {}
    low, high = interval
    return {f"{prefix}.low": low, f"{prefix}.high": high}
