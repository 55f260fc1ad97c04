"""The per-runner headline of a results document: what each runner did and spent over the document's runs, and
its own cap (the knob and the values `max_steps` set it to); a table in the terminal and at the head of the
report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from looplab.adapters.contract.pricing import format_cost, total_cost
from looplab.views.render import TOKENS_IN, TOKENS_OUT, WALL_S
from looplab.views.runs import RunView, runs_from
from looplab.views.terminal import Col, print_table

__all__ = ["print_headline"]


@dataclass
class HeadlineRow:
    """One runner over the file's runs: what it cost and how it is capped."""

    runner: str
    runs: int
    passed: int | None
    model_calls: int
    failed_model_calls: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    wall_s: float
    first_request_bytes: int | None
    cap_knob: str
    cap_values: str
    version: str


#: The columns of the terminal's table of native caps (`native_cap_row`): the knob's text is long, so it folds.
NATIVE_CAP_COLUMNS = (
    Col("runner"),
    Col("version", prose=True),
    Col("knob = value", prose=True, fold="line"),
)


def _ordered(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def headline(runs: Sequence[RunView]) -> list[HeadlineRow]:
    """Per runner: runs, passes, model and tool calls, tokens, cost, wall time, native cap and version."""
    rows = []
    for runner in _ordered(v.runner for v in runs):
        mine = [v for v in runs if v.runner == runner]
        done = [v.result for v in mine if v.result is not None]
        checked = [v for v in mine if v.passed is not None]
        firsts = sorted(r.trace.steps[0].model_call.request_bytes for r in done if r.trace.steps)
        caps = Counter((r.native_cap.knob, str(r.native_cap.value)) for r in done)
        knob = caps.most_common(1)[0][0][0] if caps else "—"
        values = Counter(str(r.native_cap.value) for r in done)
        usual = values.most_common(1)[0][0] if values else "—"
        # The usual value first, then where a case set another (tight-budget's 2).
        others = sorted({f"{r.native_cap.value} in {r.case}" for r in done if str(r.native_cap.value) != usual})
        rows.append(
            HeadlineRow(
                runner=runner,
                runs=len(mine),
                passed=sum(bool(v.passed) for v in checked) if checked else None,
                model_calls=sum(r.totals.model_calls for r in done),
                failed_model_calls=sum(r.totals.failed_model_calls for r in done),
                tool_calls=sum(r.totals.tool_calls for r in done),
                input_tokens=sum(r.totals.input_tokens for r in done),
                output_tokens=sum(r.totals.output_tokens for r in done),
                cost_usd=None if (cost := total_cost(r.totals.cost_usd for r in done)) is None else round(cost, 6),
                wall_s=round(sum(r.totals.wall_s for r in done), 3),
                first_request_bytes=firsts[len(firsts) // 2] if firsts else None,
                cap_knob=knob,
                cap_values="; ".join([usual, *others]),
                version=", ".join(_ordered(r.runner_version for r in done)) or "—",
            )
        )
    return rows


def native_cap_row(row: HeadlineRow) -> list[str]:
    """A runner's own cap as the terminal shows it (`NATIVE_CAP_COLUMNS`): its version, the knob and its values."""
    return [row.runner, row.version, f"{row.cap_knob} = {row.cap_values}"]


def print_headline(doc: Any, *, out: Console | None = None) -> None:
    """A results document's per-runner headline: what each runner did and spent, then its native cap."""
    rows = headline(runs_from(doc))
    numbers = []
    caps = []
    for row in rows:
        numbers.append(
            [
                row.runner,
                "—" if row.passed is None else f"{row.passed}/{row.runs}",
                f"{row.model_calls:,}" + (f" +{row.failed_model_calls:,}✗" if row.failed_model_calls else ""),
                f"{row.tool_calls:,}",
                f"{row.input_tokens:,}",
                f"{row.output_tokens:,}",
                format_cost(row.cost_usd),
                f"{row.wall_s:.2f}",
                "—" if row.first_request_bytes is None else f"{row.first_request_bytes:,}",
            ]
        )
        caps.append(native_cap_row(row))
    cols = (
        Col("runner"),
        Col("passed", right=True),
        Col("calls", right=True),
        Col("tools", right=True),
        TOKENS_IN,
        TOKENS_OUT,
        Col("cost $", short="$", means="dollars", right=True),
        WALL_S,
        Col("req1 B", short="B1", means="req1 B (below)", right=True),
    )
    notes = [
        "calls: answered model calls (+N✗: attempts that got no answer) · "
        "req1 B: median bytes of the first model request (task + what the framework adds)"
    ]
    print_table("per runner", cols, numbers, notes, out=out)
    print_table("native caps", NATIVE_CAP_COLUMNS, caps, out=out)
