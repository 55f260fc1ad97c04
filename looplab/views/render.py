"""What the terminal shows of runs: one run's steps, the progress bar over the matrix, and the run command's
closing summary (the side-by-side table, each distinct answer once, where the runners' differences are laid out).

The console and the tables that fit its width are in `looplab.views.terminal`, the listings of runners and cases
in `looplab.views.listings`, and eval's matrix and per-runner summary in `looplab.views.eval_tables`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from looplab.views.terminal import Col, console, indented, print_table, wrap_text

if TYPE_CHECKING:
    from looplab.adapters.contract.result import RunResult
    from looplab.adapters.contract.trace import Attempt
    from looplab.records.outcome import RunOutcome

__all__ = ["TOKENS_IN", "TOKENS_OUT", "matrix_progress", "run_detail", "summary_table"]

#: Longest answer printed under the run table; the rest is in the results document.
ANSWER_CHARS = 800


def _args(args: object) -> str:
    if isinstance(args, dict):
        return ", ".join(f"{k}={v!r}" for k, v in args.items())
    return repr(args)


def run_detail(outcome: RunOutcome, *, out: Console | None = None) -> None:
    """The run's trajectory, one line per model call and tool call, then the answer and checks."""
    out = out or console()
    out.rule(f"[bold]{outcome.runner}[/] · {outcome.case}")
    if outcome.result is None:
        out.print(Text(f"not run: {outcome.error}", style="red"))
        return
    r = outcome.result
    for step in r.trace.steps:
        m = step.model_call
        _failed_attempts(m.failed_attempts, out)
        out.print(
            f"step {step.index:>2}  [dim]model {m.endpoint} {m.latency_s * 1000:.0f} ms, "
            f"{m.input_tokens}/{m.output_tokens} tok, {m.finish_reason}[/]"
        )
        for call in step.tool_calls:
            mark = ("✗", "red") if call.is_error else ("→", "green")
            first = call.result_preview.splitlines()[0] if call.result_preview else ""
            out.print(Text.assemble(f"         {call.name}({_args(call.args)}) ", mark, " ", (first[:100], "dim")))
    _failed_attempts(r.trace.unanswered, out)
    colour = "green" if r.stop_reason == "final_answer" else "yellow"
    out.print(Text.assemble("stop: ", (str(r.stop_reason), colour), f" ({r.stop_detail})" if r.stop_detail else ""))
    if r.answer:
        out.print(Text(f"answer: {r.answer}"))
    if r.warnings:
        from looplab.shared_tools.records import shorten  # here: the tools package is heavy for a listing

        first = shorten(r.warnings[0].splitlines()[0], 100)
        out.print(Text(f"the framework left {len(r.warnings)} message(s) in the record: {first}", "dim"))
    for c in outcome.checks:
        out.print(Text.assemble("  ", ("✓", "green") if c.passed else ("✗", "red"), f" {c.name} ", (c.detail, "dim")))


def _failed_attempts(attempts: Iterable[Attempt], out: Console) -> None:
    """One line per model attempt that got no answer, above the step it was for."""
    for a in attempts:
        what = f"HTTP {a.status}" if a.status is not None else "no response"
        when = f"after {a.latency_s * 1000:.0f} ms"
        out.print(Text(f"step {a.step:>2}  attempt {a.attempt} failed: {what} {when}: {a.error[:100]}", "red"))


def wire_api(result: RunResult) -> str:
    """The wire API(s) a run's model calls went through, as `--api` names them ("—": it made none)."""
    return "+".join(result.trace.apis) or "—"


#: Columns more than one table shows, laid out the same way in each.
TOKENS_IN = Col("tok in", short="in", means="input tokens", right=True)
TOKENS_OUT = Col("tok out", short="out", means="output tokens", right=True)
WALL_S = Col("wall s", short="s", means="wall seconds", right=True)

#: The run table's columns: the wire API goes under the runner's name when the row is too wide for it.
RUN_COLUMNS = (
    Col("runner"),
    Col("api", fold="under"),
    Col("stop"),
    Col("checks", right=True),
    Col("calls", right=True),
    Col("tools", right=True),
    TOKENS_IN,
    TOKENS_OUT,
    WALL_S,
)


def summary_table(outcomes: Iterable[RunOutcome], *, out: Console | None = None) -> None:
    """Per case: the side-by-side table (each runner's wire API in its row), then each distinct answer once."""
    out = out or console()
    outcomes = list(outcomes)
    by_case: dict[str, list[RunOutcome]] = {}
    for o in outcomes:
        by_case.setdefault(o.case, []).append(o)
    for case, mine in by_case.items():
        rows = []
        for o in mine:
            if o.result is None:
                rows.append([o.runner, "", Text("not run", style="red"), "", "", "", "", "", ""])
                continue
            r, t = o.result, o.result.totals
            passed = sum(c.passed for c in o.checks)
            rows.append(
                [
                    r.runner,
                    wire_api(r),
                    str(r.stop_reason),
                    Text(f"{passed}/{len(o.checks)}", style="green" if o.passed else "red"),
                    str(t.model_calls) + (f" +{t.failed_model_calls}✗" if t.failed_model_calls else ""),
                    str(t.tool_calls),
                    str(t.input_tokens),
                    str(t.output_tokens),
                    f"{t.wall_s:.2f}",
                ]
            )
        notes = (
            ["calls: answered model calls (+N✗: attempts that got no answer)"]
            if any(o.result is not None and o.result.totals.failed_model_calls for o in mine)
            else []
        )
        print_table(f"looplab run · {case}", RUN_COLUMNS, rows, notes, out=out)
        _answers(mine, out)


def _answer_text(o: RunOutcome) -> str:
    """What a run concluded, as one paragraph: its answer, or why it has none."""
    if o.result is None:
        return f"not run: {o.error}"
    r = o.result
    text = r.answer if r.answer else f"(no answer: {r.stop_detail or r.stop_reason})"
    return " ".join(text.split())  # whitespace differences are not different answers


def _answers(outcomes: list[RunOutcome], out: Console) -> None:
    """Each distinct answer once, under the runners that gave it (all of them, when they agree)."""
    groups: dict[str, list[str]] = {}
    for o in outcomes:
        groups.setdefault(_answer_text(o), []).append(o.runner)
    width = out.width
    lines = wrap_text(Text("answers" if len(groups) > 1 else "answer", style="bold"), width, out)
    for text, runners in groups.items():
        if len(outcomes) > 1 and len(runners) == len(outcomes):
            who = f"all {len(runners)} runners:"
        else:
            who = ", ".join(runners) + (f" ({len(runners)} of {len(outcomes)}):" if len(runners) > 1 else ":")
        if len(text) > ANSWER_CHARS:
            cut = text.rfind(" ", 0, ANSWER_CHARS)
            cut = cut if cut > 0 else ANSWER_CHARS
            text = f"{text[:cut]} (+{len(text) - cut} characters in the results document)"
        lines += wrap_text(Text(who, style="bold"), width, out)
        lines += indented(Text(text, style="red" if text.startswith("not run:") else ""), width, out)
    for line in lines:
        out.print(line, overflow="fold")


def where_to_look(results: Path | str, *, out: Console | None = None) -> None:
    """The run command's last lines: where the runners' differences are laid out."""
    out = out or console()
    places = [
        ("looplab eval", "every case × runner: passed checks, stops, model calls and cost (the matrix)"),
        (f"looplab report {results}", "this run as an HTML report: the trajectories side by side, step by step"),
        ("looplab scorecard", "how each framework behaves, cell by cell"),
        ("docs/iteration-caps.md", "what each framework's iteration cap counts, measured"),
    ]
    lines = wrap_text(Text("where the runners differ", style="bold"), out.width, out)
    for where, what in places:
        lines += indented(Text.assemble((where, "bold"), f" — {what}"), out.width, out, hanging=True)
    out.print()
    for line in lines:
        out.print(line, overflow="fold")


@contextmanager
def matrix_progress(total: int, starting: str = "starting") -> Iterator[Callable[[RunOutcome], None]]:
    """A progress bar over the matrix; yields the callback that advances it by one finished run.

    Until the first run ends the line says `starting` (what is being started: worker processes, runners), so
    the seconds before the first result are not a bare `0/N`.
    """
    # bar_width=None: the bar takes what the other columns leave, so the line fits a narrow terminal.
    columns = (TextColumn("{task.description}"), BarColumn(bar_width=None), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console(), transient=True) as progress:
        task = progress.add_task(starting, total=total)

        def advance(outcome: RunOutcome) -> None:
            progress.update(task, advance=1, description=f"{outcome.runner} · {outcome.case}")

        yield advance
