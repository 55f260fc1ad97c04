"""The side-by-side report: one self-contained HTML file from a results JSON, and its headline in the terminal.

`looplab report RESULTS.json`, `looplab eval --html` and `looplab merge --html` go through
`render_html`: a results document (read by `looplab.records.results`, any readable schema) becomes
a view model here, Jinja2 lays it out (`templates/report.html.j2`), and matplotlib draws the charts as inline
SVG, so the file needs no network and opens from disk. The same per-runner
headline rows feed the terminal table (`looplab.views.headline.print_headline`).

Which runner differs where: each case gets one line saying how its runners' runs differ (stop, model
calls, tool calls a step, failed checks: `divergence`), shown above the case and listed before the matrix;
in the charts every runner has its own colour, marker and dash pattern, and the runners that line names
are drawn bold.

The charts are drawn in `looplab.views.report_charts`, the per-runner headline and native caps are in
`looplab.views.headline`, and a run as the report shows it (`RunView`) is in `looplab.views.runs`.

With repeats (a runner's cells run twice or more, `looplab eval --repeat K`), a section "over N repeats" beside the
per-runner table shows each runner's pass rate and medians (model calls, tokens, cost, time) with their 95 %
intervals, as the document's summary holds them (`looplab.records.summary.RunnerSummary`); without, there is none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from markupsafe import Markup

from looplab.adapters.contract import files
from looplab.adapters.contract.errors import ResultsError
from looplab.adapters.contract.pricing import format_cost
from looplab.records import results
from looplab.records.document import Document, case_descriptions
from looplab.records.measurements import CapsDoc
from looplab.records.summary import RunnerSummary
from looplab.shared_tools.records import ToolCallRecord
from looplab.views import differences, scorecard, scorecard_rows
from looplab.views.differences import Differences
from looplab.views.divergence import Behaviour, Divergence, behaviour, divergence
from looplab.views.eval_tables import pass_rate, spread
from looplab.views.headline import HeadlineRow, headline

# One module-level name for drawing a chart, which a check of hostile input replaces to read the values unplotted.
from looplab.views.report_charts import chart as _chart
from looplab.views.report_charts import chart_series, runner_styles
from looplab.views.runs import RunView, runs_from
from looplab.views.scorecard_rows import Scorecard

__all__ = ["read_document", "write_html"]

ARGS_CHARS = 70


@dataclass
class ToolCallView:
    """A tool call in a trajectory cell."""

    name: str
    args: str
    args_full: str
    outcome: str
    is_error: bool
    preview: str


@dataclass
class TrajectoryCell:
    """One runner's step in the aligned table: the model call's finish and the tool calls it led to."""

    finish: str | None
    tokens: str
    latency_ms: float
    tools: list[ToolCallView]
    stopped: str | None = None
    anchor: str | None = None


@dataclass
class CaseView:
    """One case: its runs per runner, the aligned trajectories and the two charts."""

    id: str
    description: str
    runners: list[str]
    runs: dict[str, list[RunView]]
    rows: list[tuple[str, list[TrajectoryCell | None]]]
    stops: list[RunView | None]
    #: The charts, drawn for the report's first case only (empty Markup: not drawn).
    token_chart: Markup
    bytes_chart: Markup
    #: How the runners differ on this case, in one line (or that they agree).
    divergence: Divergence
    #: Groups of more than three runners whose chart values are identical and so share one line, per chart.
    token_shared: list[list[str]] = field(default_factory=list)
    bytes_shared: list[list[str]] = field(default_factory=list)
    #: The trajectory table's columns: runners whose runs behaved the same (stop, model calls, tool calls a step,
    #: checks) share one, headed by all their names; `rows` and `stops` hold one entry a column.
    columns: list[list[str]] = field(default_factory=list)
    #: Each distinct answer (or why there is none) once, with the runners that gave it.
    answers: list[tuple[str, list[str]]] = field(default_factory=list)


@dataclass
class MatrixCell:
    """One runner x case entry of the matrix."""

    text: str
    status: str  # pass, fail, none (no checks) or notrun
    anchor: str | None
    title: str


@dataclass
class RepeatsRow:
    """One runner over repeats: its pass rate and medians, each with its 95 % interval (`[low–high]`) where the
    summary has one."""

    runner: str
    passed: str
    model_calls: str
    tokens: str
    cost_usd: str
    wall_s: str


@dataclass
class Report:
    """Everything the template shows."""

    title: str
    source: str
    generated: str
    models: list[str]
    runners: list[str]
    cases: list[str]
    has_checks: bool
    headline: list[HeadlineRow]
    matrix: list[tuple[str, list[MatrixCell]]]
    case_views: list[CaseView]
    totals: dict[str, Any]
    versions: dict[str, str]
    #: Where the runs were made: one row per environment (a runner environment of `--isolate`, or this process).
    environments: list[EnvironmentView]
    #: Each runner outside the largest group on some case, with those cases (most first): the first screen. A case
    #: whose runs vary from repeat to repeat is left out: its first runs differ by chance.
    outliers: list[tuple[str, list[str]]] = field(default_factory=list)
    #: With repeats: each difference between two runners that holds at 95 % (`differences.Topic.holds`), and the
    #: cases whose runs vary from repeat to repeat; the first screen says these in place of the outliers' cases.
    held: list[str] = field(default_factory=list)
    varies: list[str] = field(default_factory=list)
    #: How each framework behaves, from these runs and the committed caps measurement: the report's head.
    scorecard: Scorecard | None = None
    #: How the runners differ, row for row what the closing screen of `looplab run` shows: the first screen.
    differences: Differences | None = None
    #: The most times any runner's cells ran; the section "over N repeats" is there only when this is 2 or more.
    repeats: int = 1
    #: With repeats, a row per runner of the document's summary, with the 95 % intervals.
    over_repeats: list[RepeatsRow] = field(default_factory=list)


@dataclass
class EnvironmentView:
    """One environment the document's runs were made in, and which runners ran there."""

    id: str
    python: str
    platform: str
    runners: list[str]
    packages: str


def _ordered(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _short_args(args: Any) -> tuple[str, str]:
    if isinstance(args, dict):
        full = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    else:
        full = json.dumps(args, ensure_ascii=False) if not isinstance(args, str) else args
    return (full if len(full) <= ARGS_CHARS else full[: ARGS_CHARS - 1] + "…"), full


def _tool_view(call: ToolCallRecord) -> ToolCallView:
    short, full = _short_args(call.args)
    return ToolCallView(call.name, short, full, call.outcome, call.is_error, call.result_preview)


def _cell(view: RunView, step_index: int, *, alone: bool = True) -> TrajectoryCell | None:
    """One step of a run; `alone`: the column is this runner's only (a shared one leaves out its tokens and time)."""
    result = view.result
    if result is None or step_index > len(result.trace.steps):
        return None
    step = result.trace.steps[step_index - 1]
    m = step.model_call
    last = step_index == len(result.trace.steps)
    return TrajectoryCell(
        finish=m.finish_reason,
        tokens=f"{m.input_tokens:,}/{m.output_tokens:,} tok" if alone else "",
        latency_ms=round(m.latency_s * 1000, 1) if alone else 0.0,
        tools=[_tool_view(c) for c in step.tool_calls],
        stopped=str(result.stop_reason) if last else None,
        anchor=view.anchor,
    )


def _answer_of(view: RunView) -> str:
    """What a run concluded, as one paragraph: its answer, or why it has none."""
    if view.result is None:
        return f"not run: {view.error}"
    text = view.result.answer or f"(no answer: {view.result.stop_detail or view.result.stop_reason})"
    return " ".join(text.split())  # whitespace differences are not different answers


def _case_view(
    case: str, runners: list[str], runs: Sequence[RunView], description: str, *, first: bool = False
) -> CaseView:
    """One case's view; `first`: the report's first case, whose charts are drawn whatever its runners did."""
    by_runner: dict[str, list[RunView]] = {r: [v for v in runs if v.runner == r and v.case == case] for r in runners}
    firsts: dict[str, RunView] = {}
    for runner, views in by_runner.items():
        ran = [v for v in views if v.result is not None]
        if ran or views:
            firsts[runner] = (ran or views)[0]
    shown = [r for r in runners if r in firsts]
    # Runners whose first runs behaved the same share a trajectory column: one copy, every name on it.
    grouped: dict[Behaviour, list[str]] = {}
    for r in shown:
        grouped.setdefault(behaviour(firsts[r]), []).append(r)
    columns = list(grouped.values())
    leads = [firsts[names[0]] for names in columns]
    depth = max((len(v.result.trace.steps) for v in leads if v.result), default=0)
    rows: list[tuple[str, list[TrajectoryCell | None]]] = []
    orphans = [
        TrajectoryCell(None, "", 0.0, [_tool_view(c) for c in v.result.trace.orphan_tool_calls])
        if v.result and v.result.trace.orphan_tool_calls
        else None
        for v in leads
    ]
    if any(orphans):
        rows.append(("before any model call", orphans))
    for i in range(1, depth + 1):
        rows.append((str(i), [_cell(v, i, alone=len(names) == 1) for v, names in zip(leads, columns, strict=True)]))
    styles = runner_styles(runners)  # by the report's runners, not this case's, so a runner looks alike everywhere
    differs = divergence([firsts[r] for r in shown])
    # A chart costs 20-35 kB, and what a case's runners differ in (stops, model calls, tool calls) is in its line and
    # its trajectory columns: the charts, which show what each framework adds to every request, are drawn once.
    token_series = chart_series("tokens", shown, firsts)
    bytes_series = chart_series("bytes", shown, firsts)
    answers: dict[str, list[str]] = {}
    for r in shown:
        answers.setdefault(_answer_of(firsts[r]), []).append(r)
    return CaseView(
        id=case,
        description=description,
        runners=shown,
        runs={r: by_runner[r] for r in shown},
        rows=rows,
        stops=leads,
        token_chart=_chart("tokens", case, token_series, styles, differs.differs) if first else Markup(),
        bytes_chart=_chart("bytes", case, bytes_series, styles, differs.differs) if first else Markup(),
        divergence=differs,
        # The legend names up to three runners a line; the caption names larger groups in full.
        token_shared=[list(s.runners) for s in token_series if len(s.runners) > 3],
        bytes_shared=[list(s.runners) for s in bytes_series if len(s.runners) > 3],
        columns=columns,
        answers=list(answers.items()),
    )


def _matrix_cell(views: list[RunView]) -> MatrixCell:
    if not views:
        return MatrixCell("—", "none", None, "not in this file")
    ran = [v for v in views if v.result is not None]
    stops = ", ".join(_ordered(v.stop for v in views))
    checked = [v for v in views if v.passed is not None]
    bad = [v for v in checked if not v.passed]
    target = (bad or ran or views)[0]
    anchor = target.anchor if target.result else None
    count = f" {len(views) - len(bad)}/{len(views)}" if len(views) > 1 else ""
    if not ran:
        return MatrixCell(f"not run{count}", "notrun", None, target.why)
    if not checked:
        return MatrixCell(stops, "none", anchor, target.why)
    mark = "✗" if bad else "✓"
    return MatrixCell(f"{mark}{count} {stops}", "fail" if bad else "pass", anchor, target.why)


def build(doc: Any, *, source: str = "", title: str = "looplab report") -> Report:
    """The report's view model from a results document (see `runs_from`)."""
    runs = runs_from(doc)
    runners = _ordered(v.runner for v in runs)
    cases = _ordered(v.case for v in runs)
    descriptions = case_descriptions(doc if isinstance(doc, Document) else None)
    matrix = [
        (runner, [_matrix_cell([v for v in runs if v.runner == runner and v.case == case]) for case in cases])
        for runner in runners
    ]
    done = [v.result for v in runs if v.result]
    checked = [v for v in runs if v.passed is not None]
    case_views = [_case_view(c, runners, runs, descriptions.get(c, ""), first=k == 0) for k, c in enumerate(cases)]
    caps = scorecard.load_caps()  # one reading for the scorecard and the differences, so the two agree
    summaries = results.load(doc).runner_summaries()
    repeats = max((s.repeats for s in summaries), default=1)
    found = differences.compare(doc, caps=caps)
    varies = [t.case for t in found.topics if t.label == differences.VARIES and t.case is not None]
    return Report(
        title=title,
        source=source,
        generated=datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        models=_ordered(r.model for r in done),
        runners=runners,
        cases=cases,
        has_checks=bool(checked),
        headline=headline(runs),
        matrix=matrix,
        case_views=case_views,
        totals={
            "runs": len(runs),
            "passed": sum(bool(v.passed) for v in checked) if checked else None,
            "not_run": sum(v.result is None for v in runs),
            "wall_s": round(sum(r.totals.wall_s for r in done), 2),
        },
        versions={row.runner: row.version for row in headline(runs)},
        environments=environment_views(results.load(doc)),
        outliers=outliers([v for v in case_views if v.id not in varies]),
        held=[said for t in found.topics if t.label == differences.REPEATS for said in t.holds],
        varies=varies,
        scorecard=_scorecard(runners, doc, caps),
        differences=found,
        repeats=repeats,
        over_repeats=[repeats_row(s) for s in summaries] if repeats >= 2 else [],
    )


def repeats_row(s: RunnerSummary) -> RepeatsRow:
    """A runner's summary as the "over N repeats" section shows it (the terminal's formats: `eval_tables`)."""
    unknown = s.runs > s.not_run and s.cost_usd_median is None  # it ran, but its model has no price
    return RepeatsRow(
        runner=s.runner,
        passed=pass_rate(s.passed, s.runs, s.completion_interval),
        model_calls=spread(s.model_calls_median, s.model_calls_interval),
        tokens=spread(s.tokens_median, s.tokens_interval, ",.0f"),
        cost_usd="unknown" if unknown else spread(s.cost_usd_median, s.cost_usd_interval, ".4f"),
        wall_s=spread(s.wall_s_median, s.wall_s_interval, ".2f"),
    )


def _scorecard(runners: list[str], doc: Any, caps: CapsDoc | None) -> Scorecard:
    """The scorecard of these runs; its cap cells from `caps` (the caps doc in the working folder, if there is one)."""
    sources = {"eval": "the runs of this report", "caps": str(scorecard.CAPS_PATH) if caps else "none found"}
    return scorecard.build(runners, scorecard.observed(results.load(doc)), caps, sources=sources)


def outliers(case_views: Sequence[CaseView]) -> list[tuple[str, list[str]]]:
    """Each runner that differs from the largest group on some case, with those cases; most cases first."""
    found: dict[str, list[str]] = {}
    for case in case_views:
        for runner in case.divergence.differs:
            found.setdefault(runner, []).append(case.id)
    return sorted(found.items(), key=lambda item: -len(item[1]))


def environment_views(document: Document) -> list[EnvironmentView]:
    """Each environment with the runners whose cells ran in it (none recorded: a schema 1 file)."""
    views = []
    for env_id, env in document.environments.items():
        runners = _ordered(c.runner for c in document.cells if c.environment == env_id)
        packages = ", ".join(f"{name} {version}" for name, version in sorted(env.packages.items()))
        views.append(EnvironmentView(env_id, f"{env.implementation} {env.python}", env.platform, runners, packages))
    return views


def render_html(doc: Any, *, source: str = "", title: str = "looplab report") -> str:
    """The report as one HTML document: inline CSS, inline SVG charts, no script, no network."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("looplab.views", "templates"),
        autoescape=True,
        undefined=StrictUndefined,  # a typo in the template fails the render, not silently blanks a column
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["thousands"] = lambda n: "—" if n is None else f"{n:,}"
    env.filters["dollars"] = format_cost
    report = build(doc, source=source, title=title)
    shown = scorecard_rows.groups_of(report.scorecard) if report.scorecard else scorecard_rows.GROUPS
    groups = [{"name": g, "rows": scorecard_rows.group_rows(g)} for g in shown]
    return env.get_template("report.html.j2").render(report=report, scorecard_groups=groups)


def read_document(path: Path) -> Document:
    """A results file for a report: read and validated by `looplab.records.results`, and holding at least one run.

    Every problem is a `ResultsError` whose one line names the file.
    """
    doc = results.read(path)
    if not doc.cells:
        raise ResultsError(f"{path}: no runs in it: nothing to report")
    return doc


def write_html(doc: Any, path: Path, *, source: str = "") -> Path:
    """Render the report for `doc` to `path`, by `adapters.files`' rule (atomic; a FIFO or folder at `path` refused
    before anything is drawn)."""
    files.ready_to_write(path)
    return files.write_text(path, render_html(doc, source=source))
