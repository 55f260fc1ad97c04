"""Terminal output with rich: one run's steps, the side-by-side table, listings."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from adapters import RunnerInfo
    from looplab.harness import RunOutcome
    from scenarios.cases import Case

ANSWER_EXCERPT = 90


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
        out.print(f"[red]not run:[/] {outcome.error}")
        return
    r = outcome.result
    for step in r.trace.steps:
        m = step.model_call
        out.print(
            f"step {step.index:>2}  [dim]model {m.endpoint} {m.latency_s * 1000:.0f} ms, "
            f"{m.input_tokens}/{m.output_tokens} tok, {m.finish_reason}[/]"
        )
        for call in step.tool_calls:
            mark = "[red]✗[/]" if call.is_error else "[green]→[/]"
            first = call.result_preview.splitlines()[0] if call.result_preview else ""
            out.print(f"         {call.name}({_args(call.args)}) {mark} [dim]{first[:100]}[/]")
    colour = "green" if r.stop_reason == "final_answer" else "yellow"
    out.print(f"stop: [{colour}]{r.stop_reason}[/]" + (f" ({r.stop_detail})" if r.stop_detail else ""))
    if r.answer:
        out.print(Text(f"answer: {r.answer}"))
    for c in outcome.checks:
        out.print(f"  {'[green]✓[/]' if c.passed else '[red]✗[/]'} {c.name} [dim]{c.detail}[/]")


def summary_table(outcomes: Iterable[RunOutcome]) -> None:
    table = Table(title="looplab run", title_justify="left")
    for col in ("runner", "case", "stop", "checks", "model calls", "tool calls", "tokens in/out", "wall s", "answer"):
        table.add_column(col, no_wrap=col != "answer", overflow="fold")
    for o in outcomes:
        if o.result is None:
            table.add_row(o.runner, o.case, "[red]not run[/]", "", "", "", "", "", Text(o.error or ""))
            continue
        r, t = o.result, o.result.totals
        passed = sum(c.passed for c in o.checks)
        checks = f"[{'green' if o.passed else 'red'}]{passed}/{len(o.checks)}[/]"
        answer = (r.answer or "—").replace("\n", " ")
        if len(answer) > ANSWER_EXCERPT:
            answer = answer[:ANSWER_EXCERPT] + "…"
        table.add_row(
            r.runner, o.case, str(r.stop_reason), checks, str(t.model_calls), str(t.tool_calls),
            f"{t.input_tokens}/{t.output_tokens}", f"{t.wall_s:.2f}", Text(answer),
        )
    console().print(table)


def runners_table(runners: Iterable[RunnerInfo]) -> None:
    table = Table(title="runners", title_justify="left")
    for col in ("runner", "state", "enable with", "what it runs"):
        table.add_column(col)
    for info in runners:
        state = "[green]installed[/]" if info.installed() else "[yellow]missing[/]"
        table.add_row(info.name, state, f"pip install 'looplab[{info.extra}]'", info.summary)
    console().print(table)


def cases_table(cases: Iterable[Case]) -> None:
    table = Table(title="cases", title_justify="left")
    for col in ("case", "suite", "target", "max_steps", "what it shows"):
        table.add_column(col)
    for case in cases:
        table.add_row(case.id, case.suite, case.target, str(case.limits.max_steps), case.description)
    console().print(table)
