"""Terminal output with rich: one run's steps, the side-by-side table, listings."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from adapters import RunnerInfo
    from looplab.harness import RunOutcome
    from scenarios.cases import Case

ANSWER_EXCERPT = 160


@cache
def console() -> Console:
    return Console(highlight=False)


def _args(args: object) -> str:
    if isinstance(args, dict):
        return ", ".join(f"{k}={v!r}" for k, v in args.items())
    return repr(args)


def run_detail(outcome: RunOutcome) -> None:
    """The run's trajectory, one line per model call and tool call, then the answer and checks."""
    out = console()
    out.rule(f"[bold]{outcome.runner}[/] · {outcome.case}")
    if outcome.result is None:
        out.print(Text(f"not run: {outcome.error}", style="red"))
        return
    r = outcome.result
    for step in r.trace.steps:
        m = step.model_call
        out.print(
            f"step {step.index:>2}  [dim]model {m.endpoint} {m.latency_s * 1000:.0f} ms, "
            f"{m.input_tokens}/{m.output_tokens} tok, {m.finish_reason}[/]"
        )
        for call in step.tool_calls:
            mark = ("✗", "red") if call.is_error else ("→", "green")
            first = call.result_preview.splitlines()[0] if call.result_preview else ""
            out.print(Text.assemble(f"         {call.name}({_args(call.args)}) ", mark, (first[:100], "dim")))
    colour = "green" if r.stop_reason == "final_answer" else "yellow"
    out.print(Text.assemble("stop: ", (str(r.stop_reason), colour), f" ({r.stop_detail})" if r.stop_detail else ""))
    if r.answer:
        out.print(Text(f"answer: {r.answer}"))
    for c in outcome.checks:
        out.print(Text.assemble("  ", ("✓", "green") if c.passed else ("✗", "red"), f" {c.name} ", (c.detail, "dim")))


def summary_table(outcomes: Iterable[RunOutcome]) -> None:
    """The side-by-side table, then one line per run with its answer (or why it did not run)."""
    outcomes = list(outcomes)
    table = Table(
        title="looplab run",
        title_justify="left",
        header_style="bold underline",
        box=None,
        padding=(0, 1, 0, 0),
        pad_edge=False,
    )
    for col in ("runner", "case", "stop", "checks", "calls", "tools", "tok in", "tok out", "wall s"):
        table.add_column(col, no_wrap=True, justify="left" if col in ("runner", "case", "stop") else "right")
    for o in outcomes:
        if o.result is None:
            table.add_row(o.runner, o.case, "[red]not run[/]", "", "", "", "", "", "")
            continue
        r, t = o.result, o.result.totals
        passed = sum(c.passed for c in o.checks)
        checks = f"[{'green' if o.passed else 'red'}]{passed}/{len(o.checks)}[/]"
        table.add_row(
            r.runner,
            o.case,
            str(r.stop_reason),
            checks,
            str(t.model_calls),
            str(t.tool_calls),
            str(t.input_tokens),
            str(t.output_tokens),
            f"{t.wall_s:.2f}",
        )
    out = console()
    out.print(table)
    for o in outcomes:
        if o.result is None:
            out.print(Text(f"{o.runner} · {o.case}: not run — {o.error}"))
        else:
            answer = (o.result.answer or f"(no answer: {o.result.stop_detail or o.result.stop_reason})").replace(
                "\n", " "
            )
            if len(answer) > ANSWER_EXCERPT:
                answer = answer[:ANSWER_EXCERPT] + "…"
            out.print(Text(f"{o.runner} · {o.case}: {answer}"))


def runners_table(runners: Iterable[RunnerInfo]) -> None:
    table = Table(title="runners", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("runner", "state", "enable with", "what it runs"):
        table.add_column(col, no_wrap=col != "what it runs")
    for info in runners:
        state = "[green]installed[/]" if info.installed() else "[yellow]missing[/]"
        table.add_row(info.name, state, Text(f"pip install 'looplab[{info.extra}]'"), info.summary)
    console().print(table)


def cases_table(cases: Iterable[Case]) -> None:
    table = Table(title="cases", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("case", "suite", "target", "max_steps", "what it shows"):
        table.add_column(col)
    for case in cases:
        table.add_row(case.id, case.suite, case.target, str(case.limits.max_steps), case.description)
    console().print(table)
