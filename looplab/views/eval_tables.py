"""What `looplab eval` prints: the case × runner matrix and the per-runner summary."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from looplab.views.terminal import Col, Value, console, indented, note_lines, print_table, tabular_lines, wrap_text

if TYPE_CHECKING:
    from looplab.records.summary import Cell, RunnerSummary

__all__ = ["SHORT_STOP", "matrix_table", "pass_rate", "runner_summary", "spread"]

#: Stop reasons as the matrix cells spell them (the legend under the matrix names the long form).
SHORT_STOP = {
    "final_answer": "answer",
    "max_steps": "cap",
    "timeout": "timeout",
    "budget": "budget",
    "repetition": "repeat",
    "rejected": "rejected",
    "error": "error",
    "cancelled": "cancelled",
}


def _stops(runs: list[Cell]) -> str:
    return ", ".join(sorted({SHORT_STOP.get(str(c.stop_reason), str(c.stop_reason)) for c in runs}))


def matrix_table(cells: Iterable[Cell], runners: list[str], cases: list[str], *, out: Console | None = None) -> None:
    """Rows cases, columns runners; each cell passed or not, the row's stops at its end; failed cells listed under it.

    The columns are headed by the runners' names (broken after `_`, `-`, `@` or `.`); on a terminal too
    narrow for those they are numbered, and the legend names them.
    """
    out = out or console()
    by_key: dict[tuple[str, str], list[Cell]] = {}
    for cell in cells:
        by_key.setdefault((cell.case, cell.runner), []).append(cell)
    failures: list[Text] = []
    rows: list[list[Value]] = []
    for case in cases:
        row: list[Value] = [case]
        ran: list[Cell] = []
        for runner in runners:
            runs = by_key.get((case, runner), [])
            ran += runs
            bad = [c for c in runs if not c.passed]
            if not runs:  # another shard's cell, or one --resume kept from before
                row.append(Text("–", style="dim"))
            elif not bad:
                row.append(Text("✓", style="green"))
            else:
                row.append(Text("✗", style="red"))
                first = bad[0]
                why = first.error or (first.failed_checks[0] if first.failed_checks else "failed")
                failures.append(
                    Text.assemble(
                        ("✗ ", "red"),
                        (f"{case} × {runner}", "bold"),
                        f": {len(bad)} of {len(runs)} failed, stop {first.stop_reason or 'not run'}: {why}",
                    )
                )
        rows.append([*row, _stops(ran)])
    used = sorted({str(c.stop_reason) for runs in by_key.values() for c in runs if c.stop_reason})
    shortened = [f"{SHORT_STOP[s]} = {s}" for s in used if SHORT_STOP.get(s, s) != s]
    notes = ["✓ passed · ✗ failed (listed below) · – not in this run"]
    if shortened:
        notes.append("stops: " + ", ".join(shortened))
    title = "eval: case × runner"
    named = [Col("case"), *(Col(_broken(r, 1)) for r in runners), Col("stops", prose=True)]
    lines = tabular_lines(title, named, rows, notes, width=out.width, out=out)
    if lines is None:
        legend = "runners: " + " · ".join(f"{n} {r}" for n, r in enumerate(runners, 1))
        numbered = [Col("case"), *(Col(str(n)) for n in range(1, len(runners) + 1)), Col("stops", prose=True)]
        lines = tabular_lines(title, numbered, rows, [legend, *notes], width=out.width, out=out)
    if lines is None:  # too many runners even for numbers: a line per case
        lines = wrap_text(Text(title, style="bold"), out.width, out) + _matrix_counts(runners, rows, out)
        lines += note_lines(notes, out.width, out)
    out.print()
    for line in lines + [line for f in failures for line in indented(f, out.width, out, hanging=True)]:
        out.print(line, overflow="fold")


def _matrix_counts(runners: list[str], rows: list[list[Value]], out: Console) -> list[Text]:
    """The matrix too wide for any table: per case, how many runners passed, and which did not."""
    lines: list[Text] = []
    for case, *marks, _ in rows:
        passed = sum(str(m) == "✓" for m in marks)
        failed = [r for r, m in zip(runners, marks, strict=True) if str(m) == "✗"]
        absent = [r for r, m in zip(runners, marks, strict=True) if str(m) == "–"]
        text = Text.assemble((str(case), "bold"), f": ✓ {passed} of {len(runners)}")
        if failed:
            text.append(f" · ✗ {', '.join(failed)}", style="red")
        if absent:
            text.append(f" · – {', '.join(absent)}", style="dim")
        lines += wrap_text(text, out.width, out)
    return lines


def _broken(name: str, width: int) -> str:
    """`name` over lines no wider than `width` where it can be, broken after `_`, `-`, `@` or `.`."""
    pieces: list[str] = []
    start = 0
    for k, ch in enumerate(name):
        if ch in "_-@." and k + 1 < len(name):
            pieces.append(name[start : k + 1])
            start = k + 1
    pieces.append(name[start:])
    width = max(width, *(cell_len(p) for p in pieces))
    lines = [""]
    for piece in pieces:
        if lines[-1] and cell_len(lines[-1] + piece) > width:
            lines.append(piece)
        else:
            lines[-1] += piece
    # A header's lines stack in its cell: spaces would let the table wrap them again differently.
    return "\n".join(lines)


def _num(x: float | None, fmt: str = "g") -> str:
    return "—" if x is None else format(x, fmt)


def spread(value: float | None, interval: Sequence[float] | None, fmt: str = "g") -> str:
    """A median (or rate) with its 95 % interval after it, `9 [8–11]`; the value alone without one."""
    if interval is None or value is None:
        return _num(value, fmt)
    low, high = (format(x, fmt) for x in interval)
    shown = format(value, fmt)
    return shown if low == high == shown else f"{shown} [{low}–{high}]"  # every run alike: no spread to show


def pass_rate(passed: int, runs: int, interval: Sequence[float] | None) -> str:
    """`14/20 (70%)`, with its 95 % interval where there is one: `14/20 70% [48–85%]`."""
    if interval is None:
        return f"{passed}/{runs} ({passed / runs:.0%})" if runs else "0/0"
    return f"{passed}/{runs} {passed / runs:.0%} [{interval[0] * 100:.0f}–{interval[1]:.0%}]"


def runner_summary(summaries: Iterable[RunnerSummary], *, out: Console | None = None) -> None:
    """Per runner: completion rate, model calls and cost per task (median, p95), stop reasons; with repeats, the
    pass rate and the medians of model calls, tokens, cost and time with their 95 % intervals instead."""
    summaries = list(summaries)
    if any(s.repeats >= 2 for s in summaries):
        _summary_with_intervals(summaries, out)
        return
    rows = []
    for s in summaries:
        stops = ", ".join(f"{k} {v}" for k, v in s.stop_reasons.items())
        ran = s.runs > s.not_run  # runs without a cost median: nothing ran, or the model has no price
        unknown = ran and s.cost_usd_median is None
        cost = "unknown" if unknown else f"{_num(s.cost_usd_median, '.4f')}/{_num(s.cost_usd_p95, '.4f')}"
        rows.append(
            [
                s.runner,
                pass_rate(s.passed, s.runs, None),
                f"{_num(s.model_calls_median)}/{_num(s.model_calls_p95)}",
                _num(s.tool_calls_median),
                cost,
                stops,
            ]
        )
    cols = (
        Col("runner"),
        Col("passed", right=True),
        Col("calls med/p95", short="calls", means="model calls a task, median/p95", right=True),
        Col("tools med", short="tools", means="tool calls a task, median", right=True),
        Col("cost med/p95 $", short="$", means="dollars a task, median/p95", right=True),
        Col("stops", prose=True, fold="line"),
    )
    print_table("eval: per runner", cols, rows, out=out)


def _summary_with_intervals(summaries: list[RunnerSummary], out: Console | None) -> None:
    rows = []
    for s in summaries:
        unknown = s.runs > s.not_run and s.cost_usd_median is None
        rows.append(
            [
                s.runner,
                pass_rate(s.passed, s.runs, s.completion_interval),
                spread(s.model_calls_median, s.model_calls_interval),
                spread(s.tokens_median, s.tokens_interval, ",.0f"),
                "unknown" if unknown else spread(s.cost_usd_median, s.cost_usd_interval, ".4f"),
                spread(s.wall_s_median, s.wall_s_interval, ".2f"),
                ", ".join(f"{k} {v}" for k, v in s.stop_reasons.items()),
            ]
        )
    cols = (
        Col("runner"),
        Col("passed [95%]", short="passed", means="runs passed, the pass rate and its 95% interval", right=True),
        Col("calls", means="model calls a task, median [95% interval]", right=True),
        Col("tokens", means="tokens in + out a task, median [95% interval]", right=True),
        Col("cost $", short="$", means="dollars a task, median [95% interval]", right=True),
        Col("time s", short="s", means="wall seconds a task, median [95% interval]", right=True),
        Col("stops", prose=True, fold="line"),
    )
    repeats = max(s.repeats for s in summaries)
    notes = [
        f"over {repeats} repeats: [low–high] is a 95% interval (pass rate: Wilson; a median: from the order "
        "statistics, the range of the runs where a runner has 5 or fewer)"
    ]
    print_table("eval: per runner", cols, rows, notes, out=out)
