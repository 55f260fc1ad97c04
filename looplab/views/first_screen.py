"""The screen `looplab run` ends with, laid out for the terminal's width: the answer first.

1. How the runners differ (`differences.compare`'s rows), in the words of someone choosing a framework.
2. Per runner, how each case ended and after how many model calls (answered, stopped on an error, stopped at the
   cap), with what the runners spent where they spent differently: a column whose every value is the same (a
   scripted model's zero cost) says nothing and is left out.
3. Where the records are, and the command that opens the side-by-side report.

Each runner's own cap (the knob and the value `max_steps` set it to) is one more table, on request
(`native_caps=True`, `looplab run --native-caps`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.pricing import format_cost
from looplab.records import results
from looplab.records.measurements import CapsDoc
from looplab.views import differences, scorecard, terminal
from looplab.views.eval_tables import SHORT_STOP
from looplab.views.headline import NATIVE_CAP_COLUMNS, headline, native_cap_row
from looplab.views.render import WALL_S
from looplab.views.runs import RunView, first_runs, runs_from
from looplab.views.terminal import Col, Value

__all__ = ["print_repeats", "print_screen"]

#: What the short stop words of the per-runner table stand for, as its legend spells them out.
ENDED = {
    "final_answer": "a final answer",
    "max_steps": "stopped at max_steps",
    "error": "stopped on an error",
    "budget": "stopped at a token, dollar or time budget",
    "timeout": "stopped at its time limit",
    "repetition": "stopped repeating one call",
    "rejected": "stopped on a refused effect",
    "cancelled": "cancelled",
}
#: Past this many failed cells, the list under the table stops and the report has the rest.
MOST_FAILURES_LISTED = 4


def _ending(view: RunView) -> Text:
    """A run as a cell: its stop in a word and its model calls (`answer 5`), ✗ when it failed a check."""
    if view.result is None:
        return Text("not run", style="dim")
    stop = str(view.result.stop_reason)
    text = Text(f"{SHORT_STOP.get(stop, stop)} {view.result.totals.model_calls}")
    if view.passed is False:
        text.append(" ✗", style="red")
    return text


def _summary(views: list[RunView]) -> Text:
    """A runner's cases in one cell where a column each does not fit: the answers counted, every other ending
    named with its case, or counted where several cases ended alike (`20 answer; sloppy-calls error 1; cap 2 ×10`)."""
    answered = [v for v in views if _is_answer(v) and v.passed is not False]
    others: dict[str, list[RunView]] = {}
    for view in views:
        if view not in answered:
            others.setdefault(_ending(view).plain, []).append(view)
    parts = [Text(f"{len(answered)} {SHORT_STOP['final_answer']}")] if answered else []
    for alike in others.values():
        ending = _ending(alike[0])
        parts.append(Text(f"{alike[0].case} ") + ending if len(alike) == 1 else ending + Text(f" ×{len(alike)}"))
    return Text("; ").join(parts)


def _is_answer(view: RunView) -> bool:
    return view.result is not None and str(view.result.stop_reason) == "final_answer"


def endings_lines(doc: Any, *, width: int, out: Console | None = None) -> list[Text]:
    """Per runner, how each case ended and what the runner spent, laid out for `width` columns."""
    out = out or terminal.console()
    runs = runs_from(doc)
    cases = list(dict.fromkeys(v.case for v in runs))
    by_cell = {(r, case): v for case, views in first_runs(runs).items() for r, v in views.items()}
    totals = {row.runner: row for row in headline(runs)}
    runners = list(totals)
    spent: list[tuple[Col, Callable[[Any], str]]] = [
        (Col("tokens", right=True), lambda r: f"{r.input_tokens + r.output_tokens:,}"),
        (Col("cost $", right=True), lambda r: format_cost(r.cost_usd)),
        (WALL_S, lambda r: f"{r.wall_s:.1f}"),
    ]
    # A column of zeros says nothing (the scripted model is free), and where several runners ran, neither does a
    # column whose every value is the same: it tells them apart no better than none.
    spent = [
        (col, value)
        for col, value in spent
        if {value(totals[r]) for r in runners} - {"0", "0.0", format_cost(0.0)}
        and (len(runners) == 1 or len({value(totals[r]) for r in runners}) > 1)
    ]
    numbers = [[value(totals[r]) for _, value in spent] for r in runners]
    used = {str(v.result.stop_reason) for v in runs if v.result is not None}
    words = " · ".join(f"{SHORT_STOP.get(s, s)} = {ENDED.get(s, s)}" for s in ENDED if s in used)
    notes = [f"each case: how the run ended, then its model calls ({words})"]
    failed = [v for v in by_cell.values() if v.passed is False]
    for view in failed[:MOST_FAILURES_LISTED]:
        notes.append(f"✗ {view.runner} on {view.case}: {view.why or 'failed'}")
    if len(failed) > MOST_FAILURES_LISTED:
        notes.append(f"✗ and {len(failed) - MOST_FAILURES_LISTED} more failed runs: the report lists them")
    title = "per runner: how each case ended"

    def cell(runner: str, case: str) -> Value:
        view = by_cell.get((runner, case))
        return _ending(view) if view is not None else Text("–", style="dim")

    by_case = [[r, *(cell(r, c) for c in cases), *n] for r, n in zip(runners, numbers, strict=True)]
    cols = [Col("runner"), *(Col(c) for c in cases), *(col for col, _ in spent)]
    lines = terminal.tabular_lines(title, cols, by_case, notes, width=width, out=out)
    if lines is not None:
        return lines
    one_cell = [
        [r, _summary([by_cell[(r, c)] for c in cases if (r, c) in by_cell]), *n]
        for r, n in zip(runners, numbers, strict=True)
    ]
    cols = [Col("runner"), Col("cases", prose=True), *(col for col, _ in spent)]
    return terminal.table_lines(title, cols, one_cell, notes, width=width, out=out)


def differences_lines(doc: Any, *, width: int, caps: CapsDoc | None = None, out: Console | None = None) -> list[Text]:
    """How the runners differ (`differences.compare`'s rows under its title), laid out for `width` columns."""
    found = differences.compare(doc, caps=caps)
    rows = [[Text(t.label, style="bold"), t.line] for t in found.topics]
    cols = (Col("topic"), Col("how", prose=True))
    return terminal.table_lines(found.title, cols, rows, width=width, out=out, show_header=False)


def repeats_lines(doc: Any, *, width: int, out: Console | None = None) -> list[Text]:
    """With repeats: the runners compared over them (`differences`' `varies` and `over repeats` rows), each
    difference named only where it holds at 95 %; nothing without repeats."""
    # Under this section's title each over-repeats row is headed by its metric (`pass rate: ...`).
    rows = [
        [Text(label, style="bold"), text]
        for t in differences.over_repeats(doc)
        for label, text in [t.line.split(": ", 1) if t.label == differences.REPEATS else (t.label, t.line)]
    ]
    if not rows:
        return []
    cols = (Col("topic"), Col("how", prose=True))
    return terminal.table_lines("compared over the repeats", cols, rows, width=width, out=out, show_header=False)


def print_repeats(doc: Any, *, out: Console | None = None) -> None:
    """Print `repeats_lines` at the console's width (`looplab eval`, after its tables)."""
    out = out or terminal.console()
    lines = repeats_lines(doc, width=out.width, out=out)
    if lines:
        out.print()
    for line in lines:
        out.print(line, overflow="fold")


def native_caps_lines(doc: Any, *, width: int, out: Console | None = None) -> list[Text]:
    """Each runner's own cap: its version, the knob and the value `max_steps` set it to (another where a case set
    another)."""
    rows = [native_cap_row(row) for row in headline(runs_from(doc))]
    return terminal.table_lines("native caps", NATIVE_CAP_COLUMNS, rows, width=width, out=out)


def _caps_or_none() -> CapsDoc | None:
    """The caps measurement, or None when it is missing or unreadable (the screen then leaves its row out)."""
    try:
        return scorecard.load_caps()
    except LooplabError:
        return None


def screen_lines(
    doc: Any,
    results_path: Path | str | None,
    *,
    width: int,
    caps: CapsDoc | None = None,
    per_runner: bool = True,
    native_caps: bool = False,
    out: Console | None = None,
) -> list[Text]:
    """The closing screen of a run, laid out for `width` columns (see the module docstring); `caps` is the caps
    measurement the "last call" row reads (None: the row is left out)."""
    out = out or terminal.console()
    document = results.load(doc)
    lines = differences_lines(document, width=width, caps=caps, out=out)
    if per_runner:
        lines += [Text(), *endings_lines(document, width=width, out=out)]
    if native_caps:
        lines += [Text(), *native_caps_lines(document, width=width, out=out)]
    lines.append(Text())
    if results_path is not None:
        folder = Path(results_path).parent
        where = [
            ("results", str(results_path)),
            ("traces", str(folder / "traces.jsonl")),
            ("report", f"looplab report {results_path}"),
        ]
        if not native_caps:
            where.append(("native caps", "add --native-caps: each runner's own knob and its value"))
        lines += terminal.table_lines(
            "", (Col("what"), Col("where", prose=True)), where, width=width, out=out, show_header=False
        )
    return lines


def print_screen(
    doc: Any,
    results_path: Path | str | None,
    *,
    out: Console | None = None,
    caps: CapsDoc | None = None,
    per_runner: bool = True,
    native_caps: bool = False,
) -> None:
    """Print `screen_lines` at the console's width; `caps` defaults to the caps measurement, if found."""
    out = out or terminal.console()
    caps = caps if caps is not None else _caps_or_none()
    lines = screen_lines(
        doc, results_path, width=out.width, caps=caps, per_runner=per_runner, native_caps=native_caps, out=out
    )
    out.print()  # a blank line sets the screen apart from what the runs printed
    for line in lines:
        out.print(line, overflow="fold")
