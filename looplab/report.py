"""The side-by-side report: one self-contained HTML file from a results JSON, and its headline in the terminal.

`looplab report RESULTS.json`, `looplab eval --html` and `looplab merge --html` go through
`render_html`: a results document (read by `looplab.results`, any readable schema) becomes
a view model here, Jinja2 lays it out (`templates/report.html.j2`), and matplotlib draws the charts as inline
SVG, so the file needs no network and opens from disk. The same per-runner
headline rows feed the terminal table (`print_headline`).
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from markupsafe import Markup

from adapters.base import RunResult
from adapters.pricing import format_cost, total_cost
from looplab import results
from shared_tools.records import ToolCallRecord

#: One colour per runner, the same in every chart (matplotlib's default cycle, colour-blind friendlier than most).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
ARGS_CHARS = 70


@dataclass
class RunView:
    """One run (or one cell that did not run) as the report shows it."""

    runner: str
    case: str
    repeat: int
    result: RunResult | None
    passed: bool | None = None
    failed_checks: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def anchor(self) -> str:
        """The HTML id of this run's details, linked from the matrix."""
        return slug(f"run-{self.runner}-{self.case}-{self.repeat}")

    @property
    def stop(self) -> str:
        """The stop reason, or 'not run'."""
        return str(self.result.stop_reason) if self.result else "not run"

    @property
    def why(self) -> str:
        """A short reason for the tooltip: the first failed check, the stop detail or the error."""
        if self.error:
            return self.error
        if self.failed_checks:
            return "failed: " + ", ".join(self.failed_checks)
        return (self.result.stop_detail or "") if self.result else ""


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
    token_chart: Markup
    bytes_chart: Markup


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


@dataclass
class EnvironmentView:
    """One environment the document's runs were made in, and which runners ran there."""

    id: str
    python: str
    platform: str
    runners: list[str]
    packages: str


def slug(text: str) -> str:
    """An HTML id from free text."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")


def runs_from(doc: Any) -> list[RunView]:
    """The runs in a results document (a `results.Document`, or its parsed JSON of any readable schema).

    Each result is paired with its cell (pass/fail and failed checks); cells that did not run stay
    as rows without a result. Schema 1 `run` output has no checks, so `passed` stays None there.
    """
    document = results.load(doc)
    return [
        RunView(c.runner, c.case, c.repeat, document.result_of(c), c.passed, c.failed_checks, c.error)
        for c in document.cells
    ]


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


def _cell(view: RunView, step_index: int) -> TrajectoryCell | None:
    result = view.result
    if result is None or step_index > len(result.trace.steps):
        return None
    step = result.trace.steps[step_index - 1]
    m = step.model_call
    last = step_index == len(result.trace.steps)
    return TrajectoryCell(
        finish=m.finish_reason,
        tokens=f"{m.input_tokens:,}/{m.output_tokens:,} tok",
        latency_ms=round(m.latency_s * 1000, 1),
        tools=[_tool_view(c) for c in step.tool_calls],
        stopped=str(result.stop_reason) if last else None,
        anchor=view.anchor,
    )


def _chart(kind: str, case: str, runners: list[str], firsts: dict[str, RunView]) -> Markup:
    """Cumulative input tokens per step (`tokens`) or request bytes per model call (`bytes`), one line a runner."""
    import matplotlib  # here: only reports need it, and it takes a while to import
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(6.4, 3.0), layout="constrained")
    ax = fig.subplots()
    longest = 1
    for i, runner in enumerate(runners):
        view = firsts.get(runner)
        if view is None or view.result is None or not view.result.trace.steps:
            continue
        calls = [s.model_call for s in view.result.trace.steps]
        xs = list(range(1, len(calls) + 1))
        longest = max(longest, len(xs))
        if kind == "tokens":
            ys, total = [], 0
            for c in calls:
                total += c.input_tokens
                ys.append(total)
        else:
            ys = [c.request_bytes for c in calls]
        # Lines that coincide (several runners send the same prompt) stay visible: markers differ in size.
        colour = PALETTE[i % len(PALETTE)]
        ax.plot(xs, ys, marker="o", markersize=7 - i * 0.8, linewidth=1.6, color=colour, label=runner)
    ax.set_xlabel("model call (step)")
    ax.set_ylabel("cumulative input tokens" if kind == "tokens" else "request bytes")
    ax.set_xlim(0.5, longest + 0.5)  # whole steps only, even when every run made one call
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    ax.spines[["top", "right"]].set_visible(False)
    # Beside the axes, so it never hides the first steps, where the runners differ most.
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    buf = io.StringIO()
    # Text stays text (smaller, selectable); a salt per chart keeps the clip-path ids unique within the page.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"{kind}-{case}"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    return Markup(scope_ids(svg[svg.index("<svg") :], slug(f"{kind}-{case}")))


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


def _descriptions() -> dict[str, str]:
    try:
        from scenarios.cases import load_cases

        return {cid: c.description for cid, c in load_cases().items()}
    except Exception:  # a report must render from the JSON alone, even if the suite cannot load
        return {}


def _case_view(case: str, runners: list[str], runs: Sequence[RunView], description: str) -> CaseView:
    by_runner: dict[str, list[RunView]] = {r: [v for v in runs if v.runner == r and v.case == case] for r in runners}
    firsts: dict[str, RunView] = {}
    for runner, views in by_runner.items():
        ran = [v for v in views if v.result is not None]
        if ran or views:
            firsts[runner] = (ran or views)[0]
    shown = [r for r in runners if r in firsts]
    depth = max((len(v.result.trace.steps) for v in firsts.values() if v.result), default=0)
    rows: list[tuple[str, list[TrajectoryCell | None]]] = []
    orphans = [
        TrajectoryCell(None, "", 0.0, [_tool_view(c) for c in v.result.trace.orphan_tool_calls])
        if v.result and v.result.trace.orphan_tool_calls
        else None
        for v in (firsts[r] for r in shown)
    ]
    if any(orphans):
        rows.append(("before any model call", orphans))
    for i in range(1, depth + 1):
        rows.append((str(i), [_cell(firsts[r], i) for r in shown]))
    return CaseView(
        id=case,
        description=description,
        runners=shown,
        runs={r: by_runner[r] for r in shown},
        rows=rows,
        stops=[firsts.get(r) for r in shown],
        token_chart=_chart("tokens", case, shown, firsts),
        bytes_chart=_chart("bytes", case, shown, firsts),
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
    descriptions = _descriptions()
    matrix = [
        (runner, [_matrix_cell([v for v in runs if v.runner == runner and v.case == case]) for case in cases])
        for runner in runners
    ]
    done = [v.result for v in runs if v.result]
    checked = [v for v in runs if v.passed is not None]
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
        case_views=[_case_view(c, runners, runs, descriptions.get(c, "")) for c in cases],
        totals={
            "runs": len(runs),
            "passed": sum(bool(v.passed) for v in checked) if checked else None,
            "not_run": sum(v.result is None for v in runs),
            "wall_s": round(sum(r.totals.wall_s for r in done), 2),
        },
        versions={row.runner: row.version for row in headline(runs)},
        environments=environment_views(results.load(doc)),
    )


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
        loader=PackageLoader("looplab", "templates"),
        autoescape=True,
        undefined=StrictUndefined,  # a typo in the template fails the render, not silently blanks a column
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["thousands"] = lambda n: "—" if n is None else f"{n:,}"
    env.filters["dollars"] = format_cost
    return env.get_template("report.html.j2").render(report=build(doc, source=source, title=title))


def read_document(path: Path) -> results.Document:
    """A results file for a report: read and validated by `looplab.results`, and holding at least one run.

    Every problem is a `ResultsError` whose one line names the file.
    """
    doc = results.read(path)
    if not doc.cells:
        raise results.ResultsError(f"{path}: no runs in it: nothing to report")
    return doc


def write_html(doc: Any, path: Path, *, source: str = "") -> Path:
    """Render the report for `doc` to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(doc, source=source), encoding="utf-8")
    return path


def print_headline(doc: Any) -> None:
    """The report's per-runner headline as a terminal table."""
    from rich import box
    from rich.table import Table

    from looplab.render import console

    rows = headline(runs_from(doc))
    # Two tables, so the numbers fit an 80-column terminal and the long knob names wrap on their own.
    table = Table(
        title="per runner",
        caption="calls: answered model calls (+N✗: attempts that got no answer) · "
        "req1 B: median bytes of the first model request (task + what the framework adds)",
        title_justify="left",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=0,  # the box's one-space column separator is the gap
        pad_edge=False,
    )
    for col in ("runner", "passed", "calls", "tools", "tok in", "tok out", "cost $", "wall s", "req1 B"):
        table.add_column(col, no_wrap=True, justify="left" if col == "runner" else "right")
    caps = Table(title="native caps", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, padding=0)
    caps.add_column("runner", no_wrap=True)
    caps.add_column("knob = value", overflow="fold")
    caps.add_column("version", overflow="fold")
    for row in rows:
        table.add_row(
            row.runner,
            "—" if row.passed is None else f"{row.passed}/{row.runs}",
            f"{row.model_calls:,}" + (f" +{row.failed_model_calls:,}✗" if row.failed_model_calls else ""),
            f"{row.tool_calls:,}",
            f"{row.input_tokens:,}",
            f"{row.output_tokens:,}",
            format_cost(row.cost_usd),
            f"{row.wall_s:.2f}",
            "—" if row.first_request_bytes is None else f"{row.first_request_bytes:,}",
        )
        caps.add_row(row.runner, f"{row.cap_knob} = {row.cap_values}", row.version)
    console().print(table)
    console().print(caps)
