"""Terminal output with rich: one run's steps, the side-by-side table, listings."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from adapters import RunnerInfo
    from adapters.trace import Attempt
    from looplab.evaluation import Cell, RunnerSummary
    from looplab.harness import RunOutcome
    from scenarios.cases import Case

ANSWER_EXCERPT = 160
#: Stop reasons as the matrix cells spell them, short enough for six runner columns.
SHORT_STOP = {
    "final_answer": "answer",
    "max_steps": "cap",
    "timeout": "timeout",
    "budget": "budget",
    "repetition": "repeat",
    "rejected": "rejected",
    "error": "error",
}


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
        _failed_attempts(m.failed_attempts)
        out.print(
            f"step {step.index:>2}  [dim]model {m.endpoint} {m.latency_s * 1000:.0f} ms, "
            f"{m.input_tokens}/{m.output_tokens} tok, {m.finish_reason}[/]"
        )
        for call in step.tool_calls:
            mark = ("✗", "red") if call.is_error else ("→", "green")
            first = call.result_preview.splitlines()[0] if call.result_preview else ""
            out.print(Text.assemble(f"         {call.name}({_args(call.args)}) ", mark, (first[:100], "dim")))
    _failed_attempts(r.trace.unanswered)
    colour = "green" if r.stop_reason == "final_answer" else "yellow"
    out.print(Text.assemble("stop: ", (str(r.stop_reason), colour), f" ({r.stop_detail})" if r.stop_detail else ""))
    if r.answer:
        out.print(Text(f"answer: {r.answer}"))
    if r.warnings:
        first = r.warnings[0].splitlines()[0][:100]
        out.print(Text(f"the framework warned {len(r.warnings)} times (kept in the record): {first}", "dim"))
    for c in outcome.checks:
        out.print(Text.assemble("  ", ("✓", "green") if c.passed else ("✗", "red"), f" {c.name} ", (c.detail, "dim")))


def _failed_attempts(attempts: Iterable[Attempt]) -> None:
    """One line per model attempt that got no answer, above the step it was for."""
    for a in attempts:
        what = f"HTTP {a.status}" if a.status is not None else "no response"
        out = f"step {a.step:>2}  attempt {a.attempt} failed: {what} after {a.latency_s * 1000:.0f} ms: {a.error[:100]}"
        console().print(Text(out, "red"))


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
            str(t.model_calls) + (f" +{t.failed_model_calls}✗" if t.failed_model_calls else ""),
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
    table = Table(
        title="runners",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        caption="enable one with pip install 'looplab[EXTRA]' (and what pip cannot install, where named); "
        "'own env': its framework cannot share this environment, and --isolate creates one for it",
        caption_justify="left",
    )
    for col in ("runner", "state", "extra", "what it runs"):
        table.add_column(col, no_wrap=col in ("runner", "state"))
    for info in runners:
        if info.installed():
            state = "[green]installed[/]"
        else:  # one that cannot share this environment is created for it by --isolate
            state = "[yellow]missing[/]" if info.in_all else "[cyan]own env[/]"
        extra = info.extra + (f" + {info.programs}" if info.programs else "")
        table.add_row(info.name, state, Text(extra), info.summary)
    console().print(table)


def cases_table(cases: Iterable[Case]) -> None:
    table = Table(title="cases", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("case", "persona", "max_steps", "what it shows"):
        table.add_column(col, no_wrap=col != "what it shows")
    for case in cases:
        table.add_row(case.id, case.model.persona, str(case.limits.max_steps), case.description)
    console().print(table)


@contextmanager
def matrix_progress(total: int) -> Iterator[Callable[[RunOutcome], None]]:
    """A progress bar over the matrix; yields the callback that advances it by one finished run."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console(), transient=True) as progress:
        task = progress.add_task("matrix", total=total)

        def advance(outcome: RunOutcome) -> None:
            progress.update(task, advance=1, description=f"{outcome.runner} · {outcome.case}")

        yield advance


def matrix_table(cells: Iterable[Cell], runners: list[str], cases: list[str]) -> None:
    """Rows cases, columns runners; each cell the stop reason, or the first failed check."""
    by_key: dict[tuple[str, str], list[Cell]] = {}
    for cell in cells:
        by_key.setdefault((cell.case, cell.runner), []).append(cell)
    table = Table(
        title="eval: case × runner",
        caption="✓ passed, with its stop · ✗ runs failed, the stop and the first failed check · – not in this run",
        title_justify="left",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
    )
    table.add_column("case", no_wrap=True)
    for runner in runners:
        table.add_column(runner, overflow="fold")
    for case in cases:
        row = []
        for runner in runners:
            runs = by_key.get((case, runner), [])
            bad = [c for c in runs if not c.passed]
            if not runs:  # another shard's cell, or one --resume kept from before
                row.append(Text("–", style="dim"))
            elif not bad:
                stops = sorted({SHORT_STOP.get(str(c.stop_reason), str(c.stop_reason)) for c in runs})
                row.append(Text("✓ " + ", ".join(stops), style="green"))
            else:
                first = bad[0]
                why = first.error or (first.failed_checks[0] if first.failed_checks else "failed")
                row.append(Text(f"✗ {len(bad)}/{len(runs)} {first.stop_reason or 'not run'}: {why}", style="red"))
        table.add_row(case, *row)
    console().print(table)


def runner_summary(summaries: Iterable[RunnerSummary]) -> None:
    """Per runner: completion rate, model calls and cost per task (median, p95), stop reasons."""
    table = Table(title="eval: per runner", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0))
    for col in ("runner", "passed", "calls med/p95", "tools med", "cost med/p95 $", "stops"):
        table.add_column(col, no_wrap=col != "stops", overflow="fold")

    def num(x: float | None, fmt: str = "g") -> str:
        return "—" if x is None else format(x, fmt)

    for s in summaries:
        stops = ", ".join(f"{k} {v}" for k, v in s.stop_reasons.items())
        ran = s.runs > s.not_run  # runs without a cost median: nothing ran, or the model has no price
        unknown = ran and s.cost_usd_median is None
        cost = "unknown" if unknown else f"{num(s.cost_usd_median, '.4f')}/{num(s.cost_usd_p95, '.4f')}"
        table.add_row(
            s.runner,
            f"{s.passed}/{s.runs} ({s.completion_rate:.0%})",
            f"{num(s.model_calls_median)}/{num(s.model_calls_p95)}",
            num(s.tool_calls_median),
            cost,
            stops,
        )
    console().print(table)
