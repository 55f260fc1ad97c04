"""The side-by-side report: one self-contained HTML file from a results JSON, and its headline in the terminal.

`looplab report RESULTS.json`, `looplab eval --html` and `looplab merge --html` go through
`render_html`: a results document (read by `looplab.records.results`, any readable schema) becomes
a view model here, Jinja2 lays it out (`templates/report.html.j2`), and matplotlib draws the charts as inline
SVG, so the file needs no network and opens from disk. The same per-runner
headline rows feed the terminal table (`print_headline`).

Which runner differs where: each case gets one line saying how its runners' runs differ (stop, model
calls, tool calls a step, failed checks: `divergence`), shown above the case and listed before the matrix;
in the charts every runner has its own colour, marker and dash pattern, and the runners that line names
are drawn bold.
"""

from __future__ import annotations

import html
import io
import json
import re
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from markupsafe import Markup
from rich.console import Console

from looplab.adapters.contract import files
from looplab.adapters.contract.pricing import format_cost, total_cost
from looplab.records import results
from looplab.records.measurements import CapsDoc
from looplab.shared_tools.records import ToolCallRecord
from looplab.views import differences, scorecard
from looplab.views.differences import (
    LINE_ARG_CHARS,
    MOST_VARIANTS,
    Behaviour,
    Differences,
    Divergence,
    RunView,
    behaviour,
    describe_divergence,
    divergence,
    runner_names,
    runs_from,
    slug,
)
from looplab.views.render import Col
from looplab.views.scorecard import Scorecard

__all__ = [
    "ARGS_CHARS",
    "CHART_FONT",
    "Behaviour",
    "CaseView",
    "DASHES",
    "Differences",
    "Divergence",
    "EnvironmentView",
    "HeadlineRow",
    "LINE_ARG_CHARS",
    "MARKERS",
    "MOST_VARIANTS",
    "MatrixCell",
    "PALETTE",
    "PLAIN_TEXT",
    "Report",
    "RunView",
    "RunnerStyle",
    "Series",
    "ToolCallView",
    "TrajectoryCell",
    "behaviour",
    "build",
    "chart_series",
    "describe_divergence",
    "divergence",
    "environment_views",
    "headline",
    "runner_names",
    "outliers",
    "NATIVE_CAP_COLUMNS",
    "native_cap_row",
    "print_headline",
    "read_document",
    "render_html",
    "runner_styles",
    "runs_from",
    "scope_ids",
    "slug",
    "write_html",
]

#: One colour per runner, the same in every chart: matplotlib's tab10, then the darker and middle shades of
#: tab20b's five hues (those least like tab10's first), so 20 runners get 20 colours. Colour alone cannot tell
#: 14 lines apart (nor help a colour-blind reader), so each runner also gets its own marker and dash pattern.
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#393b79", "#637939", "#e7ba52", "#843c39", "#7b4173", "#b5cf6b", "#8c6d31", "#6b6ecf", "#d6616b", "#ce6dbd",
)  # fmt: skip
#: One marker shape per runner (drawn hollow, so markers that land on the same point stay visible as outlines);
#: the round ones (hexagons, octagon) come last, as they read as circles at this size.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "p", "*", "d", "x", "+", "1", "2", "3", "h", "8", "H")
#: One dash pattern per runner (on/off lengths in line widths); the first runner's line is solid.
DASHES: tuple[tuple[float, ...] | None, ...] = (
    None, (6, 2), (2, 2), (6, 2, 2, 2), (10, 3), (1, 2), (6, 2, 2, 2, 2, 2), (10, 2, 2, 2),
    (4, 4), (10, 2, 4, 2), (3, 1), (12, 2, 2, 2, 2, 2), (2, 4), (8, 2, 1, 2, 1, 2),
)  # fmt: skip
ARGS_CHARS = 70
#: How every chart draws text: as the characters given, nothing parsed. With mathtext on, a name with two `$`
#: (`my$\frac$runner`) is parsed as a formula, and one that is not valid TeX stops the whole report; with
#: usetex on (a user's matplotlibrc) every text goes through LaTeX. Tick labels are plain numbers either way.
PLAIN_TEXT = {"text.parse_math": False, "text.usetex": False, "axes.formatter.use_mathtext": False}
#: The charts' one font, named alone: the SVG repeats the family list in every text element, and the browser
#: falls back to its own sans-serif either way.
CHART_FONT = {"font.family": "sans-serif", "font.sans-serif": ["DejaVu Sans"]}


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
    #: Each runner outside the largest group on some case, with those cases (most first): the first screen.
    outliers: list[tuple[str, list[str]]] = field(default_factory=list)
    #: How each framework behaves, from these runs and the committed caps measurement: the report's head.
    scorecard: Scorecard | None = None
    #: How the runners differ, row for row what the closing screen of `looplab run` shows: the first screen.
    differences: Differences | None = None


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


@dataclass(frozen=True)
class RunnerStyle:
    """How one runner's line looks in every chart: colour, marker and dash pattern (None: solid)."""

    colour: str
    marker: str
    dashes: tuple[float, ...] | None


def runner_styles(runners: Sequence[str]) -> dict[str, RunnerStyle]:
    """Each runner's style, by its place among the report's runners, so it is the same in every chart."""
    return {
        runner: RunnerStyle(PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)], DASHES[i % len(DASHES)])
        for i, runner in enumerate(runners)
    }


@dataclass(frozen=True)
class Series:
    """One line of a chart: the runners whose values are identical, and those values per model call."""

    runners: tuple[str, ...]
    ys: tuple[float, ...]

    @property
    def label(self) -> str:
        """The legend entry: the runners' names, the first two and a count past three."""
        names = self.runners
        return ", ".join(names) if len(names) <= 3 else f"{names[0]}, {names[1]}, +{len(names) - 2} same"


def chart_series(kind: str, runners: Sequence[str], firsts: dict[str, RunView]) -> list[Series]:
    """The lines of a case's chart (`tokens`: cumulative input tokens; `bytes`: request bytes), one per distinct
    series, in runner order.

    Runners whose values are identical share one line labelled with all their names: drawn separately the
    last one would paint over the others, and a legend entry for a line nobody can see misleads; one line
    with every name says what the reader wants to know, that those runners sent the same thing.
    """
    grouped: dict[tuple[float, ...], list[str]] = {}
    for runner in runners:
        view = firsts.get(runner)
        if view is None or view.result is None or not view.result.trace.steps:
            continue
        calls = [s.model_call for s in view.result.trace.steps]
        if kind == "tokens":
            ys: list[float] = []
            total = 0
            for c in calls:
                total += c.input_tokens
                ys.append(total)
        else:
            ys = [c.request_bytes for c in calls]
        grouped.setdefault(tuple(ys), []).append(runner)
    return [Series(tuple(names), ys) for ys, names in grouped.items()]


def _chart(
    kind: str, case: str, series: Sequence[Series], styles: dict[str, RunnerStyle], differs: Sequence[str] = ()
) -> Markup:
    """Cumulative input tokens per step (`tokens`) or request bytes per model call (`bytes`), one line a series.

    The lines of the runners in `differs` (those the case's divergence line names) are drawn bold and on top,
    the others fainter, so the chart shows the same runners the line names, even inside a bundle of lines.
    """
    import matplotlib  # here: only reports need it, and it takes a while to import
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    labels = [s.label for s in series]
    # The legend sits below the axes, in as many columns as the longest name allows: beside them it would
    # squeeze the plot, and inside it would hide the first steps, where the runners differ most.
    widest = max((len(label) for label in labels), default=10)
    # A column is the handle, the gaps and the label (about 3.9 pt a character at 7 pt) of a 455 pt wide figure.
    columns = max(1, min(len(labels), int(455 // (50 + 3.9 * widest))))
    rows = -(-len(labels) // columns) if labels else 0
    buf = io.StringIO()
    # Every text is made and drawn inside this context: text objects take `text.parse_math` and `text.usetex`
    # when they are created, tick labels when the figure is drawn. Text stays text in the SVG (smaller,
    # selectable); a salt per chart keeps the clip-path ids unique within the page.
    with (
        matplotlib.rc_context({**PLAIN_TEXT, **CHART_FONT, "svg.fonttype": "none", "svg.hashsalt": f"{kind}-{case}"}),
        warnings.catch_warnings(),
    ):
        # The SVG keeps text as text, which the browser draws in its own fonts: a glyph matplotlib's font lacks
        # (a name in CJK) only makes its layout estimate a little off, not worth a warning on the terminal.
        warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
        fig = Figure(figsize=(6.4, 2.7 + 0.16 * rows), layout="constrained")
        ax = fig.subplots()
        longest = 1
        handles = []
        for k, line in enumerate(series):
            style = styles[line.runners[0]]
            xs = list(range(1, len(line.ys) + 1))
            longest = max(longest, len(xs))
            bold = bool(set(line.runners) & set(differs))
            (drawn,) = ax.plot(
                xs,
                line.ys,
                color=style.colour,
                alpha=1.0 if bold or not differs else 0.6,
                zorder=3 if bold else 2,
                linewidth=2.0 if bold else 1.4,
                linestyle="-" if style.dashes is None else (0, style.dashes),
                marker=style.marker,
                markersize=6,
                markerfacecolor="none",
                markeredgewidth=1.2,
            )
            drawn.set_gid(f"series-{k}")  # names the line's SVG group, which gets a hover title below
            handles.append(drawn)
        ax.set_xlabel("model call (step)")
        ax.set_ylabel("cumulative input tokens" if kind == "tokens" else "request bytes")
        ax.set_xlim(0.5, longest + 0.5)  # whole steps only, even when every run made one call
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.grid(True, color="#e5e5e5", linewidth=0.8)
        ax.spines[["top", "right"]].set_visible(False)
        if labels:
            # Handles and labels given, not collected from the lines: collected, a label starting with `_`
            # (a runner named `_mine`) would be left out of the legend as matplotlib's "no legend" mark.
            # A long handle, so each dash pattern shows at least once in the legend.
            legend = fig.legend(
                handles, labels, loc="outside lower center", ncols=columns, fontsize=7, frameon=False, handlelength=4.5
            )
            for text, line in zip(legend.get_texts(), series, strict=True):
                if set(line.runners) & set(differs):
                    text.set_fontweight("bold")
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = _smaller(buf.getvalue()[buf.getvalue().index("<svg") :])
    # Hovering a line (or one of its markers) names its runners: a native SVG tooltip, no script needed, for
    # the lines that run close together.
    for k, line in enumerate(series):
        names = html.escape(", ".join(line.runners))
        svg = svg.replace(f'<g id="series-{k}">', f'<g id="series-{k}"><title>{names}</title>', 1)
    return Markup(scope_ids(svg, slug(f"{kind}-{case}")))


def _smaller(svg: str) -> str:
    """The same drawing in fewer bytes: no metadata block, no id nothing refers to (a chart's lines keep theirs,
    for their hover titles), coordinates to a tenth of a point, no indentation."""
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.DOTALL)
    used = set(re.findall(r'(?:url\(#|href="#)([^")]+)', svg))
    svg = re.sub(
        r' id="([^"]+)"', lambda m: m.group(0) if m.group(1) in used or m.group(1).startswith("series-") else "", svg
    )
    svg = re.sub(r'\b(d|x|y|transform)="[^"]*"', lambda m: re.sub(r"(\d\.\d)\d+", r"\1", m.group(0)), svg)
    return re.sub(r"\s*\n\s*", " ", svg).replace("> <", "><")


def scope_ids(svg: str, prefix: str) -> str:
    """Prefix every id in `svg` (and the references to it): matplotlib names groups `xtick_1`, `line2d_3`, ...
    in every chart, and ids must stay unique once several charts share one page."""
    ids = set(re.findall(r'\bid="([^"]+)"', svg))
    if not ids:
        return svg

    def rename(match: re.Match[str]) -> str:
        name = match.group(2)
        return f"{match.group(1)}{prefix}-{name}{match.group(3)}" if name in ids else match.group(0)

    return re.sub(r'(\bid="|url\(#|href="#)([^")]+)([")])', rename, svg)


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
    descriptions = results.case_descriptions(doc if isinstance(doc, results.Document) else None)
    matrix = [
        (runner, [_matrix_cell([v for v in runs if v.runner == runner and v.case == case]) for case in cases])
        for runner in runners
    ]
    done = [v.result for v in runs if v.result]
    checked = [v for v in runs if v.passed is not None]
    case_views = [_case_view(c, runners, runs, descriptions.get(c, ""), first=k == 0) for k, c in enumerate(cases)]
    caps = scorecard.load_caps()  # one reading for the scorecard and the differences, so the two agree
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
        outliers=outliers(case_views),
        scorecard=_scorecard(runners, doc, caps),
        differences=differences.compare(doc, caps=caps),
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


def environment_views(document: results.Document) -> list[EnvironmentView]:
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
    shown = scorecard.groups_of(report.scorecard) if report.scorecard else scorecard.GROUPS
    groups = [{"name": g, "rows": scorecard.group_rows(g)} for g in shown]
    return env.get_template("report.html.j2").render(report=report, scorecard_groups=groups)


def read_document(path: Path) -> results.Document:
    """A results file for a report: read and validated by `looplab.records.results`, and holding at least one run.

    Every problem is a `ResultsError` whose one line names the file.
    """
    doc = results.read(path)
    if not doc.cells:
        raise results.ResultsError(f"{path}: no runs in it: nothing to report")
    return doc


def write_html(doc: Any, path: Path, *, source: str = "") -> Path:
    """Render the report for `doc` to `path`, by `adapters.files`' rule (atomic; a FIFO or folder at `path` refused
    before anything is drawn)."""
    files.ready_to_write(path)
    return files.write_text(path, render_html(doc, source=source))


def native_cap_row(row: HeadlineRow) -> list[str]:
    """A runner's own cap as the terminal shows it (`NATIVE_CAP_COLUMNS`): its version, the knob and its values."""
    return [row.runner, row.version, f"{row.cap_knob} = {row.cap_values}"]


def print_headline(doc: Any, *, out: Console | None = None) -> None:
    """A results document's per-runner headline: what each runner did and spent, then its native cap."""
    from looplab.views import render
    from looplab.views.render import print_table

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
        render.TOKENS_IN,
        render.TOKENS_OUT,
        Col("cost $", short="$", means="dollars", right=True),
        render.WALL_S,
        Col("req1 B", short="B1", means="req1 B (below)", right=True),
    )
    notes = [
        "calls: answered model calls (+N✗: attempts that got no answer) · "
        "req1 B: median bytes of the first model request (task + what the framework adds)"
    ]
    print_table("per runner", cols, numbers, notes, out=out)
    print_table("native caps", NATIVE_CAP_COLUMNS, caps, out=out)
