"""The HTML report: built from eval and run output, self-contained, every link resolving, and loaded in Chromium.

One small matrix (two runners x two cases, two worker processes) is run once
for the module; the tests read its JSON and HTML.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html import escape as html_escape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from looplab.adapters.contract.limits import StopReason
from looplab.adapters.contract.result import NativeCap, RunResult, Totals
from looplab.adapters.contract.trace import ModelCall, Step, Trace
from looplab.cli import main
from looplab.shared_tools.records import ToolCallRecord
from looplab.views import report, scorecard_rows
from looplab.views.divergence import divergence
from looplab.views.headline import headline
from looplab.views.report_charts import DASHES, MARKERS, PALETTE, runner_styles
from looplab.views.runs import RunView, runs_from
from tests import browser
from tests.tiers import scaled_examples

RUNNERS = ("handrolled", "langgraph")
CASES = ("vip-compound", "tight-budget")


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """`looplab eval --jobs 2 --json --html` on a small matrix, in a subprocess (as a user runs it)."""
    out = tmp_path_factory.mktemp("eval")
    json_path, html_path = out / "e.json", out / "e.html"
    argv = [sys.executable, "-m", "looplab", "eval", "--jobs", "2"]
    argv += ["--json", str(json_path), "--html", str(html_path)]
    for runner in RUNNERS:
        argv += ["--runner", runner]
    for case in CASES:
        argv += ["--case", case]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"json": json_path, "html": html_path, "stdout": proc.stdout, "doc": json.loads(json_path.read_text())}


class _Collect(HTMLParser):
    """Ids, in-page links, and any tag that would reach the network."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.duplicate_ids: set[str] = set()
        self.links: list[str] = []
        self.external: list[str] = []
        self.tables: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            if a["id"] in self.ids:
                self.duplicate_ids.add(a["id"] or "")
            self.ids.add(a["id"] or "")
        if tag == "table":
            self.tables.append(a)
        href = a.get("href") or ""
        if tag == "a" and href.startswith("#"):
            self.links.append(href[1:])
        if tag in ("script", "link", "img", "iframe") or (tag == "a" and href and not href.startswith("#")):
            self.external.append(f"<{tag} {a}>")
        if a.get("src"):
            self.external.append(f"<{tag} src={a['src']}>")


def _parse(html: str) -> _Collect:
    parser = _Collect()
    parser.feed(html)
    return parser


@pytest.mark.full  # an eval of a matrix in a new process
def test_eval_writes_json_and_html_in_the_serial_order(matrix) -> None:
    doc = matrix["doc"]
    # Cells finish in any order across the two workers; the record keeps the matrix order.
    expected = [(r, c) for c in CASES for r in RUNNERS]
    assert [(x["runner"], x["case"]) for x in doc["results"]] == expected
    assert [(x["runner"], x["case"]) for x in doc["cells"]] == expected
    assert all(c["passed"] for c in doc["cells"])
    # The terminal shows the report's headline table too.
    assert "per runner" in matrix["stdout"] and "native caps" in matrix["stdout"]
    assert f"HTML: {matrix['html']}" in matrix["stdout"]


@pytest.mark.full  # an eval of a matrix in a new process
def test_the_report_is_self_contained_and_every_link_resolves(matrix) -> None:
    html = matrix["html"].read_text(encoding="utf-8")
    found = _parse(html)
    assert found.external == []
    assert "@import" not in html and "url(http" not in html
    assert "matrix" in found.ids and "headline" in found.ids
    assert found.links and set(found.links) <= found.ids, set(found.links) - found.ids
    # Several charts on one page: their SVG ids (and the clip paths that refer to them) stay unique.
    assert found.duplicate_ids == set()
    clip_refs = set(re.findall(r"url\(#([^)]+)\)", html))
    assert clip_refs and clip_refs <= found.ids
    # Two inline SVG charts for the first case (cumulative input tokens, request bytes); the other cases, where
    # every runner made the same model calls and stopped alike, are drawn by it.
    assert html.count("<svg") == 2
    for case in CASES:
        assert f'id="trajectory-{case}"' in html


@pytest.mark.full  # an eval of a matrix in a new process
def test_matrix_cells_link_to_their_runs_with_pass_and_stop(matrix) -> None:
    built = report.build(matrix["doc"])
    assert built.runners == list(RUNNERS) and built.cases == list(CASES)
    assert [runner for runner, _ in built.matrix] == list(RUNNERS)
    for runner, cells in built.matrix:
        by_case = dict(zip(built.cases, cells, strict=True))
        assert by_case["vip-compound"].text == "✓ final_answer" and by_case["vip-compound"].status == "pass"
        assert by_case["tight-budget"].text == "✓ max_steps"
        assert by_case["vip-compound"].anchor == f"run-{runner}-vip-compound-1"


@pytest.mark.full  # an eval of a matrix in a new process
def test_trajectories_are_aligned_by_step_with_the_stop_marked(matrix) -> None:
    built = report.build(matrix["doc"])
    vip = next(c for c in built.case_views if c.id == "vip-compound")
    assert vip.runners == list(RUNNERS)
    # Both runners made the same steps: one column, headed by both names, its cells without either's tokens.
    assert vip.columns == [list(RUNNERS)]
    first_label, first_row = vip.rows[0]
    assert first_label == "1"
    assert len(first_row) == 1 and first_row[0] is not None and first_row[0].tools[0].name == "run_tests"
    cells = [row[0] for _, row in vip.rows if row[0] is not None]
    assert cells[-1].stopped == "final_answer" and all(c.stopped is None for c in cells[:-1])
    assert all(c.tokens == "" for c in cells)
    tight = next(c for c in built.case_views if c.id == "tight-budget")
    assert [label for label, _ in tight.rows] == ["1", "2"]
    assert [cell.stopped for cell in tight.rows[1][1]] == ["max_steps"]
    # A runner that ran otherwise gets a column of its own, with its tokens.
    apart = report.build(_with_one_divergent_run(matrix["doc"]))
    vip = next(c for c in apart.case_views if c.id == "vip-compound")
    assert vip.columns == [["handrolled"], ["langgraph"]]
    assert all(cell is None or cell.tokens.endswith(" tok") for _, row in vip.rows for cell in row)
    html = report.render_html(matrix["doc"])
    assert "handrolled, langgraph <span" in html and "(2, the same steps)" in html


@pytest.mark.full  # an eval of a matrix in a new process
def test_headline_sums_each_runner(matrix) -> None:
    doc = matrix["doc"]
    rows = {row.runner: row for row in headline(runs_from(doc))}
    for runner in RUNNERS:
        mine = [r for r in doc["results"] if r["runner"] == runner]
        row = rows[runner]
        assert row.runs == len(CASES) and row.passed == len(CASES)
        assert row.model_calls == sum(r["totals"]["model_calls"] for r in mine)
        assert row.input_tokens == sum(r["totals"]["input_tokens"] for r in mine)
        assert row.first_request_bytes and row.first_request_bytes > 0
        assert row.cap_values == "12; 2 in tight-budget"
        assert row.version == mine[0]["runner_version"]


@pytest.mark.full  # an eval of a matrix in a new process
def test_report_accepts_run_output_a_plain_list(matrix, tmp_path: Path, capsys) -> None:
    plain = tmp_path / "run.json"
    plain.write_text(json.dumps(matrix["doc"]["results"]), encoding="utf-8")
    assert main(["report", str(plain), "-o", str(tmp_path / "run.html")]) == 0
    html = (tmp_path / "run.html").read_text(encoding="utf-8")
    assert 'id="matrix"' in html and "no checks" in html
    built = report.build(json.loads(plain.read_text()))
    assert not built.has_checks
    assert [runner for runner, cells in built.matrix if len(cells) == len(CASES)] == list(RUNNERS)
    assert all(cell.status == "none" and "✓" not in cell.text for _, cells in built.matrix for cell in cells)
    assert "per runner" in capsys.readouterr().out


@pytest.mark.full  # an eval of a matrix in a new process
def test_report_default_output_is_beside_the_results(matrix, tmp_path: Path) -> None:
    copy = tmp_path / "results.json"
    shutil.copy(matrix["json"], copy)
    assert main(["report", str(copy)]) == 0
    assert (tmp_path / "results.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("content", ["not json", '{"a": 1}', '[{"runner": "x"}]'])
def test_a_file_that_is_not_results_is_one_line(tmp_path: Path, capsys, content: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    assert main(["report", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"looplab: {bad}: not a looplab results file") and err.count("\n") == 1


@pytest.mark.full  # a browser, and an eval of a matrix in a new process
@browser.needs_chromium
def test_chromium_loads_the_report_finds_the_matrix_and_a_trajectory_and_screenshots_it(matrix, tmp_path: Path) -> None:
    """A real browser, headless: the file opens from disk with no network, and renders what the test looks for."""
    url = matrix["html"].resolve().as_uri()

    def chromium(profile: str, *args: str) -> subprocess.CompletedProcess[str]:
        return browser.run(url, tmp_path / profile, *args)

    dom = chromium("dom", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = _parse(dom.stdout)
    assert {t.get("id") for t in found.tables} >= {"matrix", "trajectory-vip-compound"}
    assert any("trajectory" in (t.get("class") or "") for t in found.tables)
    assert re.search(r"<td[^>]*class=\"pass\"", dom.stdout), "the matrix has no passing cell"
    # The first screen: which runner differs where, before the matrix; and every case's two charts, drawn.
    assert "differences" in found.ids and dom.stdout.index('id="differences"') < dom.stdout.index('id="matrix"')
    assert "Where runners differ" in dom.stdout
    assert dom.stdout.count('class="divergence agree"') == len(CASES)
    assert dom.stdout.count("<svg") == 2 and "stroke-dasharray" in dom.stdout
    # The scorecard heads the report: one table per group of behaviours, a row per runner, each cell titled
    # with where it was read from (or "not measured").
    assert dom.stdout.index('id="scorecard"') < dom.stdout.index('id="differences"')
    cards = [t for t in found.tables if "scorecard" in (t.get("class") or "")]
    assert len(cards) == len(scorecard_rows.GROUPS) - 1  # all but "your cases": no team's case ran
    assert re.search(r'<td title="eval: [a-z-]+"', dom.stdout) and 'title="not measured"' in dom.stdout

    shot = tmp_path / "report.png"
    taken = chromium("shot", "--window-size=1400,1800", f"--screenshot={shot}")
    assert taken.returncode == 0, taken.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


@pytest.mark.full  # an eval of a matrix in a new process
def test_a_chart_of_one_step_runs_labels_whole_steps_only(matrix: dict[str, object]) -> None:
    doc = json.loads(json.dumps(matrix["doc"]))
    for run in doc["results"]:
        run["trace"]["steps"] = run["trace"]["steps"][:1]  # every run made one model call
    html = report.render_html(doc)
    # The x axis's tick labels are its centred texts (the y axis's are right-aligned), but for the axis's title.
    texts = re.findall(r"<text[^>]*text-anchor:middle[^>]*>([^<]*)</text>", html)
    ticks = [t for t in texts if t not in ("model call (step)", "cumulative input tokens", "request bytes")]
    assert ticks and all(t.strip().lstrip("−-").isdigit() for t in ticks), ticks


# --- which runner differs where: the divergence line, the first screen, the charts ----------------------------

TOOLS = ("run_tests", "read_file", "search_code")
ARGS = ("tests/test_invoice.py", "billing/discount.py", "def apply_discount")


def _view(runner: str, stop: str, steps: list[list[tuple[str, str]]], failed: tuple[str, ...] = ()) -> RunView:
    """A run of `runner` on case `c`: one model call a step, each step's tool calls as (name, first argument)."""
    trace = Trace(
        steps=[
            Step(
                index=i,
                model_call=ModelCall(
                    index=i,
                    endpoint="messages",
                    url="http://127.0.0.1:1/v1/messages",
                    status=200,
                    streamed=False,
                    request_bytes=1000 + 100 * i,
                    response_bytes=200,
                    input_tokens=250 + 25 * i,
                    output_tokens=20,
                    finish_reason="tool_use" if calls else "end_turn",
                    tool_calls_requested=[name for name, _ in calls],
                    started_at=float(i),
                    latency_s=0.01,
                    cost_usd=None,
                ),
                tool_calls=[
                    ToolCallRecord(
                        name=name,
                        args={"arg": arg},
                        outcome="ok",
                        is_error=False,
                        result="",
                        result_preview="",
                        result_chars=0,
                        started_at=i + 0.5,
                        duration_s=0.01,
                    )
                    for name, arg in calls
                ],
            )
            for i, calls in enumerate(steps, 1)
        ]
    )
    result = RunResult(
        runner=runner,
        runner_version="1.0",
        case="c",
        model="scripted",
        stop_reason=StopReason(stop),
        answer="done" if stop == "final_answer" else None,
        native_cap=NativeCap(knob="max_steps", value=12),
        totals=Totals(
            model_calls=len(steps),
            tool_calls=sum(len(s) for s in steps),
            input_tokens=0,
            output_tokens=0,
            cost_usd=None,
            wall_s=0.0,
        ),
        trace=trace,
    )
    return RunView(runner, "c", 1, result, passed=not failed, failed_checks=list(failed))


_calls = st.lists(st.tuples(st.sampled_from(TOOLS), st.sampled_from(ARGS)), max_size=3)
#: A run's tool calls a step; the last step answers (no tool calls), as a final answer does.
_steps = st.lists(_calls, min_size=1, max_size=6).map(lambda steps: [*steps, []])
_stops = st.sampled_from([s.value for s in StopReason])
_names = st.lists(st.from_regex(r"[a-z][a-z_]{2,12}", fullmatch=True), min_size=4, max_size=14, unique=True)


@given(names=_names, stop=_stops, steps=_steps)
@settings(deadline=None)
def test_identical_runs_give_an_agreement_line_and_no_divergence(names, stop, steps) -> None:
    found = divergence([_view(name, stop, steps) for name in names])
    assert found.agree and found.differs == ()
    assert found.line.startswith(f"All {len(names)} runners agree: ")
    assert f"{len(steps)} model call" in found.line


@st.composite
def _one_changed(draw: st.DrawFn) -> tuple[list[str], int, str, list, str, list]:
    """Runners that all ran alike but one, the one's index, and the two behaviours (stop, steps)."""
    names = draw(_names)
    stop, steps = draw(_stops), draw(_steps)
    how = draw(st.sampled_from(["stop", "one more step", "one more call", "another argument", "one a step"]))
    other_stop, other_steps = stop, [list(s) for s in steps]
    if how == "stop":
        other_stop = draw(_stops.filter(lambda s: s != stop))
    elif how == "one more step":
        other_steps.insert(0, [("run_tests", ARGS[0])])
    elif how == "one more call":
        other_steps[0].append(("search_code", ARGS[2]))
    elif how == "another argument":
        other_steps[0] = [("read_file", "somewhere/else.py"), *other_steps[0]]
        other_steps[0].pop(1) if len(other_steps[0]) > 1 else None
    else:  # the same calls, one a step
        other_steps = [[c] for s in steps[:-1] for c in s] + [[]]
    assume((other_stop, other_steps) != (stop, steps))
    return names, draw(st.integers(0, len(names) - 1)), stop, steps, other_stop, other_steps


@given(_one_changed())
@settings(deadline=None)
def test_one_runner_that_ran_otherwise_is_named_first_against_the_others(case) -> None:
    names, odd, stop, steps, other_stop, other_steps = case
    views = [
        _view(name, other_stop, other_steps) if i == odd else _view(name, stop, steps) for i, name in enumerate(names)
    ]
    found = divergence(views)
    assert not found.agree
    assert found.differs == (names[odd],)
    assert found.line.startswith(f"{names[odd]} ")
    assert f"; the other {len(names) - 1} " in found.line
    assert found.line.count(";") == 1 and "\n" not in found.line


def test_a_runner_that_stopped_early_is_named_with_its_stop_and_calls() -> None:
    usual = [[("run_tests", ARGS[0])], [("read_file", ARGS[0])], [("read_file", ARGS[1])], [("run_tests", ARGS[0])], []]
    names = ["handrolled", "langchain", "langgraph", "openai_agents"]
    views = [_view(n, "final_answer", usual) for n in names if n != "langgraph"]
    views.insert(2, _view("langgraph", "max_steps", usual[:4]))
    found = divergence(views)
    assert found.line == "langgraph stopped at max_steps after 4 model calls; the other 3 answered in 5."
    assert found.differs == ("langgraph",)


def test_reading_two_files_one_a_step_is_said_so() -> None:
    batched = [[("run_tests", ARGS[0])], [("read_file", ARGS[0]), ("read_file", ARGS[1])], []]
    one_a_step = [[("run_tests", ARGS[0])], [("read_file", ARGS[0])], [("read_file", ARGS[1])], []]
    views = [_view(n, "final_answer", batched) for n in ("a", "b", "c")] + [_view("dspy", "final_answer", one_a_step)]
    assert divergence(views).line == (
        "dspy answered in 4 model calls, making its tool calls one a step; "
        "the other 3 answered in 3, batching up to 2 tool calls in a step."
    )


def test_a_different_tool_call_and_a_failed_check_are_named() -> None:
    usual = [[("read_file", ARGS[0])], []]
    other = [[("read_file", ARGS[1])], []]
    views = [_view(n, "final_answer", usual) for n in ("a", "b", "c")]
    views.append(_view("d", "final_answer", other, failed=("answer_mentions",)))
    line = divergence(views).line
    assert line == (
        "d called read_file(billing/discount.py) instead of read_file(tests/test_invoice.py), "
        "failing answer_mentions; the other 3 passed."
    )


def test_many_behaviours_are_summed_up_by_stop_and_model_calls_in_one_line() -> None:
    views = [
        _view("a", "error", [[]]),
        _view("b", "error", [[]]),
        _view("c", "error", [[("run_tests", "")]] * 2 + [[]]),
    ]
    views += [_view(n, "final_answer", [[("read_file", arg)], []]) for n, arg in zip("defg", ARGS * 2, strict=False)]
    views += [
        _view("h", "final_answer", [[("search_code", "x")], []]),
        _view("i", "final_answer", [[("run_tests", "")], []]),
    ]
    found = divergence(views)
    assert found.line == (
        "a and b stopped on error after 1 model call; c after 3; "
        "the other 6 answered in 2, with 5 different sets of tool calls."
    )
    assert found.differs == ("a", "b", "c")


def test_a_single_runner_is_not_a_divergence() -> None:
    found = divergence([_view("handrolled", "final_answer", [[("run_tests", "")], []])])
    assert (
        found.agree and found.line == "Only handrolled ran this case: it answered in 2 model calls, the same tool call."
    )


def _with_one_divergent_run(doc: dict) -> dict:
    """The matrix's document with langgraph stopped at max_steps one model call short on vip-compound."""
    doc = json.loads(json.dumps(doc))
    cell = next(c for c in doc["cells"] if (c["runner"], c["case"]) == ("langgraph", "vip-compound"))
    run = doc["results"][cell["result"]]
    run["trace"]["steps"] = run["trace"]["steps"][:-1]
    run["totals"]["model_calls"] = len(run["trace"]["steps"])
    run.update(stop_reason="max_steps", answer=None)
    cell["stop_reason"] = "max_steps"
    return doc


@pytest.mark.full  # an eval of a matrix in a new process
def test_the_first_screen_lists_each_diverging_case_with_its_line_and_link(matrix) -> None:
    doc = _with_one_divergent_run(matrix["doc"])
    built = report.build(doc)
    vip = next(c for c in built.case_views if c.id == "vip-compound")
    calls = len(
        next(r for r in doc["results"] if r["runner"] == "handrolled" and r["case"] == "vip-compound")["trace"]["steps"]
    )
    assert vip.divergence.line == (
        f"langgraph stopped at max_steps after {calls - 1} model calls; handrolled answered in {calls}."
    )
    assert built.outliers == [("langgraph", ["vip-compound"])]
    assert next(c for c in built.case_views if c.id == "tight-budget").divergence.agree

    html = report.render_html(doc)
    summary = html[html.index('<section id="differences">') : html.index('<section id="matrix-section">')]
    assert "Where runners differ" in summary
    assert f'<a href="#case-vip-compound">vip-compound</a>: {vip.divergence.line}' in summary
    assert "<strong>langgraph</strong> in 1 case" in summary
    assert "All runners agree on 1 case" in summary and 'href="#case-tight-budget"' in summary
    # The case itself carries the same line above its charts and trajectories.
    case = html[html.index('id="case-vip-compound"') :]
    assert case.index(vip.divergence.line) < case.index("<svg") < case.index('class="trajectory"')


@pytest.mark.full  # an eval of a matrix in a new process
def test_a_report_where_all_agree_says_so_on_the_first_screen(matrix) -> None:
    html = matrix["html"].read_text(encoding="utf-8")
    summary = html[html.index('<section id="differences">') : html.index('<section id="matrix-section">')]
    assert "Every runner did the same on every case" in summary
    for case in report.build(matrix["doc"]).case_views:
        assert case.divergence.agree and case.divergence.line.startswith(f"All {len(RUNNERS)} runners agree")


def _fourteen_runners(doc: dict, same: int = 0) -> list[dict]:
    """The matrix's handrolled runs as 14 runners (a `run --json` list); all but the first `same` send more bytes."""
    base = [r for r in doc["results"] if r["runner"] == "handrolled"]
    runs = []
    for i in range(14):
        for run in json.loads(json.dumps(base)):
            run["runner"] = f"runner{i:02d}"
            for step in run["trace"]["steps"]:
                step["model_call"]["request_bytes"] += 0 if i < same else 40 * i
                step["model_call"]["input_tokens"] += 0 if i < same else 10 * i
            runs.append(run)
    return runs


@pytest.mark.full  # an eval of a matrix in a new process
def test_each_of_fourteen_runners_has_its_own_colour_marker_and_dash_in_every_chart(matrix) -> None:
    built = report.build(_fourteen_runners(matrix["doc"]))
    charts = [str(chart) for case in built.case_views for chart in (case.token_chart, case.bytes_chart) if chart]
    assert charts
    for svg in charts:
        lines = re.findall(r'<g id="[^"]*series-\d+">(.*?)</g>', svg, flags=re.DOTALL)
        assert len(lines) == 14
        dashes = {m for line in lines for m in re.findall(r"stroke-dasharray:([\d.,]+)", line)}
        assert len(dashes) == 13  # the first runner's line is solid
        markers = {m for line in lines for m in re.findall(r'href="#([^"]+)"', line)}  # each line's marker shape
        assert len(markers) == 14
        colours = {m for line in lines for m in re.findall(r"stroke:(#[0-9a-f]{6})", line)}
        assert len(colours) == 14
        # Every runner is named, in the legend and in the hover title of its line.
        assert all(f">runner{i:02d}</text>" in svg and f"<title>runner{i:02d}</title>" in svg for i in range(14))
    # A runner's style is the same in every chart.
    styles = runner_styles(built.runners)
    assert len({(s.colour, s.marker, s.dashes) for s in styles.values()}) == 14
    assert len(set(PALETTE)) >= 14 and len(set(DASHES)) >= 14 and len(set(MARKERS)) >= 14


@pytest.mark.full  # an eval of a matrix in a new process
def test_a_smaller_chart_keeps_every_marker_styled_and_every_reference_named(matrix) -> None:
    import xml.etree.ElementTree as ET

    svg_ns = "{http://www.w3.org/2000/svg}"
    for case in report.build(_fourteen_runners(matrix["doc"])).case_views:
        for chart in (case.token_chart, case.bytes_chart):
            if not chart:
                continue
            root = ET.fromstring(str(chart))  # well-formed, with no namespace left undeclared
            parents = {child: parent for parent in root.iter() for child in parent}
            named = {e.get("id") for e in root.iter() if e.get("id")}
            uses = list(root.iter(f"{svg_ns}use"))
            assert len(uses) >= 14
            for use in uses:
                assert use.get("href", "").removeprefix("#") in named
                assert use.get("style") or parents[use].get("style"), "a marker lost its stroke"
            for e in root.iter():
                for ref in re.findall(r"url\(#([^)]+)\)", e.get("clip-path", "")):
                    assert ref in named
                assert "rotate(-0 " not in e.get("transform", "")


@pytest.mark.full  # an eval of a matrix in a new process
def test_runners_with_identical_series_share_one_line_named_for_all(matrix) -> None:
    built = report.build(_fourteen_runners(matrix["doc"], same=5))
    case = built.case_views[0]
    svg = str(case.bytes_chart)
    assert len(re.findall(r'<g id="[^"]*series-\d+">', svg)) == 10
    assert ">runner00, runner01, +3 same</text>" in svg
    assert "<title>runner00, runner01, runner02, runner03, runner04</title>" in svg
    assert case.bytes_shared == [[f"runner{i:02d}" for i in range(5)]]
    assert "Drawn once, identical: runner00, runner01, runner02, runner03, runner04." in report.render_html(
        _fourteen_runners(matrix["doc"], same=5)
    )


# --- names drawn as text: whatever a runner or case is called, the report renders it as written ---------------

#: Names from any text, with what matplotlib's mathtext, TeX and legend treat specially mixed in (`$` pairs, TeX
#: commands, a leading `_`) and what HTML does (`<`, `&`, quotes).
_any_name = (
    st.lists(
        st.one_of(
            st.text(max_size=4), st.sampled_from(["$", "\\", "_", "^", "{", "}", "\\frac", "%", "#", "&", "<", '"'])
        ),
        min_size=1,
        max_size=6,
    )
    .map("".join)
    .filter(bool)
)


def _named_runs(runners: list[str], case: str) -> list[dict]:
    """A `run --json` list: each runner on `case`, each sending different request bytes (a line of its own)."""
    runs = []
    for k, runner in enumerate(runners):
        run = _view(runner, "final_answer", [[("read_file", "a")], []]).result.model_dump(mode="json")
        run["case"] = case
        for step in run["trace"]["steps"]:
            step["model_call"]["request_bytes"] += 10 * k
        runs.append(run)
    return runs


def test_a_name_in_mathtext_syntax_is_drawn_as_written() -> None:
    html = report.render_html(_named_runs(["my$\\frac$runner", "_mine", "plain"], "case$^{x}$_y"))
    for name in ("my$\\frac$runner", "_mine", "plain"):
        assert f">{name}</text>" in html  # in each chart's legend, as the characters given
        assert f"<title>{name}</title>" in html


@pytest.mark.full  # draws a report's charts per example
@given(runners=st.lists(_any_name, min_size=1, max_size=3, unique=True), case=_any_name)
@settings(max_examples=scaled_examples(0.2), deadline=None)  # each example renders a whole report: a fifth
def test_any_runner_and_case_name_renders_a_report_with_the_names_escaped(runners: list[str], case: str) -> None:
    from markupsafe import escape

    html = report.render_html(_named_runs(runners, case))
    for name in runners:
        assert str(escape(name)) in html
        # The hover title of the runner's line (one line each: their bytes differ), escaped once.
        assert f"<title>{html_escape(name)}</title>" in html
        if name == name.strip() and name.isprintable():  # one line of text, no edge spaces the SVG could trim
            assert f">{html_escape(name, quote=False)}</text>" in html  # the legend entry, as written
    assert str(escape(case)) in html


# --- the full matrix's report: short enough to read and to open -------------------------------------------------

#: How many cases of the full matrix have runners that stop otherwise or after other model calls (5 of 13 measured
#: on the scripted model; the test makes it more).
DIVERGING = 6


def _full_matrix(doc: dict) -> list[dict]:
    """Every runner x every case, from the matrix's handrolled run of vip-compound: each runner sending its own
    bytes (a line of its own in every chart), and on `DIVERGING` cases two runners stopping a model call early."""
    from looplab.adapters.registry import RUNNERS as ALL_RUNNERS
    from looplab.scenarios.cases import load_cases

    base = next(r for r in doc["results"] if (r["runner"], r["case"]) == ("handrolled", "vip-compound"))
    runs = []
    for k, case in enumerate(load_cases()):
        for i, runner in enumerate(ALL_RUNNERS):
            run = json.loads(json.dumps(base))
            run.update(runner=runner, case=case)
            for step in run["trace"]["steps"]:
                step["model_call"]["request_bytes"] += 40 * i
                step["model_call"]["input_tokens"] += 10 * i
            if k < DIVERGING and i < 2:
                run["trace"]["steps"] = run["trace"]["steps"][:-1]
                run["totals"]["model_calls"] = len(run["trace"]["steps"])
                run.update(stop_reason="max_steps", answer=None)
            runs.append(run)
    return runs


@pytest.mark.full  # an eval of a matrix in a new process, and a report of 195 runs
def test_the_full_matrix_report_stays_under_400_kb_with_each_answer_once(matrix, tmp_path: Path) -> None:
    runs = _full_matrix(matrix["doc"])
    path = report.write_html(runs, tmp_path / "full.html")
    size = path.stat().st_size
    print(f"full matrix report: {len(runs)} runs, {size:,} bytes")
    assert size < 400_000
    html = path.read_text(encoding="utf-8")
    # Runs that behaved the same are one trajectory column and one answer, every runner named on them.
    from markupsafe import escape

    answer = " ".join(next(r for r in runs if r["answer"])["answer"].split())
    assert html.count(str(escape(answer))) == len({r["case"] for r in runs})
    built = report.build(runs)
    assert all(len(c.columns) == (2 if k < DIVERGING else 1) for k, c in enumerate(built.case_views))
    # The first screen: the scorecard, then where runners differ, each diverging case named.
    assert html.index('id="scorecard"') < html.index('id="differences"') < html.index('id="matrix"')
    assert html.count('<li><a href="#case-') == DIVERGING
