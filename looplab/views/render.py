"""Terminal output with rich: one run's steps, the side-by-side tables, listings.

Every table is laid out for the console's width by `print_table`: on a wide terminal each row is one
line with every column in it; where that does not fit, the table tries in turn to move its long
columns out of the row (prose onto a line of its own under the row, a short value under the row's
first cell), to wrap its headers at their spaces, and to print short headers explained by a legend
under the table. A table that fits none of those prints each row as a block of `header: value`
text. No cell or header is ever cut: text wraps at its words, and a word wider than the whole
terminal folds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rich.cells import cell_len
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

if TYPE_CHECKING:
    from looplab.adapters.contract.result import RunResult
    from looplab.adapters.contract.trace import Attempt
    from looplab.adapters.registry import RunnerInfo
    from looplab.records.outcome import RunOutcome
    from looplab.records.summary import Cell, RunnerSummary
    from looplab.scenarios.cases import Case

__all__ = [
    "ANSWER_CHARS",
    "Col",
    "INDENT",
    "PROSE_MIN",
    "RUN_COLUMNS",
    "SHORT_STOP",
    "TOKENS_IN",
    "TOKENS_OUT",
    "Value",
    "WALL_S",
    "cases_table",
    "console",
    "markdown_lines",
    "matrix_progress",
    "matrix_table",
    "print_table",
    "run_detail",
    "runner_summary",
    "runners_table",
    "summary_table",
    "table_lines",
    "tabular_lines",
    "where_to_look",
    "wire_api",
    "wrap_text",
]

#: Longest answer printed under the run table; the rest is in the results document.
ANSWER_CHARS = 800
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
#: The wire APIs as `--api` names them, from the endpoint a model call went to.
#: Narrowest a prose column is made while it stays in its row (narrower, it reads as a column of word stubs).
PROSE_MIN = 24
#: Indent of what a row folds onto lines of its own, and of the blocks of the last-resort layout.
INDENT = 2


@cache
def console() -> Console:
    """The one console looplab prints to (rich reads the terminal's width, or COLUMNS, once)."""
    return Console(highlight=False)


# --- tables that fit the terminal --------------------------------------------------------------------


@dataclass(frozen=True)
class Col:
    """One column of a terminal table, and how it gives way on a narrow terminal."""

    header: str
    #: The header when full ones do not fit; the legend under the table says what it stands for.
    short: str = ""
    #: What the legend says `short` means (default: the full header).
    means: str = ""
    #: Right-aligned (numbers).
    right: bool = False
    #: Prose: wraps at its words, so it can be narrower than its text.
    prose: bool = False
    #: Where the column goes when the row does not fit: "line" (a line of its own under the row, for
    #: long text) or "under" (a second line in the row's first cell, for a short value); "" stays.
    fold: Literal["", "line", "under"] = ""


#: A cell: plain text, or rich Text with its style.
Value = str | Text


@dataclass(frozen=True)
class _Layout:
    fold: bool
    headers: Literal["full", "wrap", "short"]


def print_table(
    title: str,
    cols: Sequence[Col],
    rows: Iterable[Sequence[Value]],
    notes: Iterable[str] = (),
    *,
    out: Console | None = None,
    show_header: bool = True,
) -> None:
    """Print a table that fits the console's width (see the module docstring); `notes` go under it."""
    out = out or console()
    lines = table_lines(title, cols, rows, notes, width=out.width, out=out, show_header=show_header)
    if title:
        out.print()  # a blank line sets each table apart from what came before
    for line in lines:
        out.print(line, overflow="fold")


def table_lines(
    title: str,
    cols: Sequence[Col],
    rows: Iterable[Sequence[Value]],
    notes: Iterable[str] = (),
    *,
    width: int,
    out: Console | None = None,
    show_header: bool = True,
) -> list[Text]:
    """The lines of a table laid out for `width` columns, none longer."""
    return _table(title, cols, rows, notes, width, out or console(), show_header)[0]


def tabular_lines(
    title: str,
    cols: Sequence[Col],
    rows: Iterable[Sequence[Value]],
    notes: Iterable[str] = (),
    *,
    width: int,
    out: Console | None = None,
) -> list[Text] | None:
    """`table_lines`, or None where only the last resort's blocks fit (the caller then has a shape of its own)."""
    lines, tabular = _table(title, cols, rows, notes, width, out or console(), True)
    return lines if tabular else None


def _table(
    title: str,
    cols: Sequence[Col],
    rows: Iterable[Sequence[Value]],
    notes: Iterable[str],
    width: int,
    out: Console,
    show_header: bool,
) -> tuple[list[Text], bool]:
    """The table's lines, and whether they are a table (False: the last resort's blocks)."""
    width = max(width, 1)
    cells = [[v if isinstance(v, Text) else Text(v) for v in row] for row in rows]
    folds = any(c.fold for c in cols)
    layouts = [_Layout(False, "full")]
    if folds:
        layouts.append(_Layout(True, "full"))
    if show_header:
        layouts.append(_Layout(folds, "wrap"))
        if any(c.short for c in cols):
            layouts.append(_Layout(folds, "short"))
    head = wrap_text(Text(title, style="bold"), width, out) if title else []
    notes = list(notes)
    for layout in layouts:
        for gap in (2, 1):  # two spaces between columns where they fit, else one
            body = _laid_out(cols, cells, layout, gap, width, out, show_header)
            if body is not None:
                legend = _legend(cols) if layout.headers == "short" else []
                return head + body + _notes([*legend, *notes], width, out), True
    return head + _blocks(cols, cells, width, out) + _notes(notes, width, out), False


def _laid_out(
    cols: Sequence[Col],
    rows: list[list[Text]],
    layout: _Layout,
    gap: int,
    width: int,
    out: Console,
    show_header: bool,
) -> list[Text] | None:
    """The table as rows of columns in `layout`, or None when it does not fit `width`."""
    folded = {i for i, c in enumerate(cols) if layout.fold and c.fold}
    inrow = [i for i in range(len(cols)) if i not in folded]
    under = [i for i in sorted(folded) if cols[i].fold == "under"]
    lines_of = [i for i in sorted(folded) if cols[i].fold == "line"]

    def header(i: int) -> str:
        c = cols[i]
        return c.short if layout.headers == "short" and c.short else c.header

    headers = [header(i) for i in inrow]
    if under:
        headers[0] = " / ".join([headers[0], *(header(i) for i in under)])
    table = []
    for row in rows:
        first = row[inrow[0]].copy()
        for i in under:  # indented, so it reads as the first cell's second line, not a row of its own
            if row[i].plain:
                first.append("\n" + " " * INDENT)
                first.append_text(Text(row[i].plain, style="dim"))
        table.append([first, *(row[i] for i in inrow[1:])])

    widths: list[int] = []
    natural: list[int] = []
    for j, i in enumerate(inrow):
        words = headers[j].split() or [""]
        head_w = _width(Text(headers[j])) if layout.headers == "full" else max(cell_len(w) for w in words)
        head_w = head_w if show_header else 0
        column = [r[j] for r in table]
        nat = max([head_w, *(_width(t) for t in column)])
        natural.append(nat)
        if cols[i].prose:
            widths.append(max(min(nat, PROSE_MIN), head_w, *(_longest_word(t) for t in column)))
        else:
            widths.append(nat)
    spare = width - sum(widths) - gap * (len(inrow) - 1)
    if spare < 0:
        return None
    # The room left goes to the prose columns, a cell at a time, until each holds its longest line.
    growing = [j for j, i in enumerate(inrow) if cols[i].prose]
    while spare > 0 and (growing := [j for j in growing if widths[j] < natural[j]]):
        for j in growing[:spare]:
            widths[j] += 1
            spare -= 1
    justify = ["right" if cols[i].right else "left" for i in inrow]
    lines: list[Text] = []
    if show_header:
        heads = [Text(h, style="bold") for h in headers]
        lines += _row(heads, widths, justify, gap, out)
        for i in lines_of:  # where the rows' folded lines go, the header says what they hold
            lines += _indented(Text(header(i), style="bold"), width, out)
        lines.append(Text("─" * (sum(widths) + gap * (len(widths) - 1)), style="dim"))
    label = len(lines_of) > 1  # one folded column needs no name; several do
    for row, source in zip(table, rows, strict=True):
        lines += _row(row, widths, justify, gap, out)
        for i in lines_of:
            if source[i].plain.strip():
                text = Text(f"{cols[i].header}: ", style="dim") + source[i] if label else source[i]
                lines += _indented(text, width, out)
    return lines


def _row(cells: list[Text], widths: list[int], justify: list[str], gap: int, out: Console) -> list[Text]:
    """One table row: each cell wrapped to its column, side by side, padded to the columns' widths."""
    blocks = [
        list(cell.wrap(out, w, justify=j, overflow="fold"))  # type: ignore[arg-type]
        for cell, w, j in zip(cells, widths, justify, strict=True)
    ]
    lines = []
    for k in range(max(len(b) for b in blocks)):
        line = Text()
        for n, (block, w) in enumerate(zip(blocks, widths, strict=True)):
            if n:
                line.append(" " * gap)
            line.append_text(block[k] if k < len(block) else Text(" " * w))
        line.rstrip()
        lines.append(line)
    return lines


def _blocks(cols: Sequence[Col], rows: list[list[Text]], width: int, out: Console) -> list[Text]:
    """The last resort: each row its first cell, then `header: value` for the rest, wrapped."""
    lines: list[Text] = []
    for row in rows:
        lines += wrap_text(Text(row[0].plain, style="bold"), width, out)
        parts = [
            Text(f"{c.header}: ", style="dim") + Text(" ").join(v.split("\n"))
            for c, v in zip(cols[1:], row[1:], strict=True)
            if v.plain.strip()
        ]
        if parts:
            lines += _indented(Text(" · ", style="dim").join(parts), width, out)
    return lines


def _legend(cols: Sequence[Col]) -> list[str]:
    shorts = [f"{c.short} = {c.means or c.header}" for c in cols if c.short]
    return ["legend: " + " · ".join(shorts)] if shorts else []


def _notes(notes: Iterable[str], width: int, out: Console) -> list[Text]:
    return [line for note in notes for line in wrap_text(Text(note, style="dim"), width, out)]


def wrap_text(text: Text, width: int, out: Console) -> list[Text]:
    lines = list(text.wrap(out, max(width, 1), overflow="fold"))
    for line in lines:
        line.rstrip()
    return lines


def _indented(text: Text, width: int, out: Console, *, hanging: bool = False) -> list[Text]:
    """`text` wrapped under an indent; `hanging`: its continuation lines indented once more."""
    indent = min(INDENT, width - 1)
    more = min(2 * INDENT, width - 1) if hanging else indent
    lines = wrap_text(text, width - more, out)
    if hanging and lines:  # the first line may use the room the continuations leave
        first = wrap_text(text, width - indent, out)[0]
        rest = text[len(first.plain) :]
        rest = rest[len(rest.plain) - len(rest.plain.lstrip()) :]
        lines = [first, *(wrap_text(rest, width - more, out) if rest.plain else [])]
    return [Text(" " * (more if k else indent)) + line for k, line in enumerate(lines)]


def _width(text: Text) -> int:
    return max((cell_len(line) for line in text.plain.split("\n")), default=0)


def _longest_word(text: Text) -> int:
    """The widest word, a line's indent counted with its first word (a folded cell's line under the first is
    indented, and the indent stays when the line wraps)."""
    longest = 0
    for line in text.plain.split("\n"):
        if words := line.split():
            indent = cell_len(line) - cell_len(line.lstrip())
            longest = max(longest, indent + cell_len(words[0]), *(cell_len(w) for w in words))
    return longest


# --- one run, and the run command's summary ----------------------------------------------------------


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
        lines += _indented(Text(text, style="red" if text.startswith("not run:") else ""), width, out)
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
        lines += _indented(Text.assemble((where, "bold"), f" — {what}"), out.width, out, hanging=True)
    out.print()
    for line in lines:
        out.print(line, overflow="fold")


# --- listings --------------------------------------------------------------------------------------


def runners_table(runners: Iterable[RunnerInfo], *, out: Console | None = None) -> None:
    """Every runner: whether it is installed, the extra that enables it, what it runs."""
    rows = []
    for info in runners:
        if info.installed():
            state = Text("installed", style="green")
        else:  # one that cannot share this environment is created for it by --isolate
            state = Text("missing", style="yellow") if info.in_all else Text("own env", style="cyan")
        extra = info.extra + (f" + {info.programs}" if info.programs else "")
        rows.append([info.name, state, extra, info.summary])
    cols = (Col("runner"), Col("state"), Col("extra", prose=True), Col("what it runs", prose=True, fold="line"))
    notes = [
        "enable one with pip install 'looplab[EXTRA]' (and what pip cannot install, where named); "
        "'own env': its framework cannot share this environment, and --isolate creates one for it"
    ]
    print_table("runners", cols, rows, notes, out=out)


def cases_table(cases: Iterable[Case], *, out: Console | None = None) -> None:
    """Every case: its persona, its max_steps and what it shows; and, where a case offers tools of its own suite or
    runs another test command, those."""
    cases = list(cases)
    own = any(c.own_tools or c.test_command for c in cases)
    rows = [
        [
            c.id,
            c.model.persona,
            str(c.limits.max_steps),
            *([", ".join(c.own_tools) or "-", " ".join(c.test_command or ["pytest"])] if own else []),
            c.description,
        ]
        for c in cases
    ]
    cols = (
        Col("case"),
        Col("persona"),
        Col("max_steps", right=True),
        *((Col("own tools", prose=True), Col("tests run by", prose=True)) if own else ()),
        Col("what it shows", prose=True, fold="line"),
    )
    print_table("cases", cols, rows, out=out)


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


# --- eval ------------------------------------------------------------------------------------------


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
    lines, tabular = _table(title, named, rows, notes, out.width, out, True)
    if not tabular:
        legend = "runners: " + " · ".join(f"{n} {r}" for n, r in enumerate(runners, 1))
        numbered = [Col("case"), *(Col(str(n)) for n in range(1, len(runners) + 1)), Col("stops", prose=True)]
        lines, tabular = _table(title, numbered, rows, [legend, *notes], out.width, out, True)
    if not tabular:  # too many runners even for numbers: a line per case
        lines = wrap_text(Text(title, style="bold"), out.width, out) + _matrix_counts(runners, rows, out)
        lines += _notes(notes, out.width, out)
    out.print()
    for line in lines + [line for f in failures for line in _indented(f, out.width, out, hanging=True)]:
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


def runner_summary(summaries: Iterable[RunnerSummary], *, out: Console | None = None) -> None:
    """Per runner: completion rate, model calls and cost per task (median, p95), stop reasons."""

    def num(x: float | None, fmt: str = "g") -> str:
        return "—" if x is None else format(x, fmt)

    rows = []
    for s in summaries:
        stops = ", ".join(f"{k} {v}" for k, v in s.stop_reasons.items())
        ran = s.runs > s.not_run  # runs without a cost median: nothing ran, or the model has no price
        unknown = ran and s.cost_usd_median is None
        cost = "unknown" if unknown else f"{num(s.cost_usd_median, '.4f')}/{num(s.cost_usd_p95, '.4f')}"
        rows.append(
            [
                s.runner,
                f"{s.passed}/{s.runs} ({s.completion_rate:.0%})",
                f"{num(s.model_calls_median)}/{num(s.model_calls_p95)}",
                num(s.tool_calls_median),
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


def markdown_lines(lines: Iterable[str], *, out: Console | None = None) -> None:
    """Lines holding Markdown pipe tables (the bench modes' output), each table laid out for the terminal."""
    out = out or console()
    pending: list[str] = []

    def flush() -> None:
        if not pending:
            return
        parsed = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in pending]
        header, rule, body = parsed[0], parsed[1] if len(parsed) > 1 else [], parsed[2:]
        right = [cell.endswith(":") for cell in rule] + [False] * len(header)
        cols = [Col(h, right=right[k], prose=not right[k] and k > 0) for k, h in enumerate(header)]
        print_table("", cols, [(row + [""] * len(header))[: len(header)] for row in body], out=out)
        pending.clear()

    for line in lines:
        if line.lstrip().startswith("|"):
            pending.append(line)
            continue
        flush()
        for wrapped in wrap_text(Text(line), out.width, out) or [Text()]:
            out.print(wrapped)
    flush()
