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
from html.parser import HTMLParser
from pathlib import Path

import pytest

from looplab import report
from looplab.cli import main

RUNNERS = ("handrolled", "langgraph")
CASES = ("vip-compound", "tight-budget")


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """`looplab eval --jobs 2 --json --html` on a small matrix, in a subprocess (as a user runs it)."""
    out = tmp_path_factory.mktemp("eval")
    json_path, html_path = out / "e.json", out / "e.html"
    argv = [sys.executable, "-m", "looplab.cli", "eval", "--jobs", "2"]
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
    # Two inline SVG charts a case: cumulative input tokens and request bytes.
    assert html.count("<svg") == 2 * len(CASES)
    for case in CASES:
        assert f'id="trajectory-{case}"' in html


def test_matrix_cells_link_to_their_runs_with_pass_and_stop(matrix) -> None:
    built = report.build(matrix["doc"])
    assert built.runners == list(RUNNERS) and built.cases == list(CASES)
    assert [runner for runner, _ in built.matrix] == list(RUNNERS)
    for runner, cells in built.matrix:
        by_case = dict(zip(built.cases, cells, strict=True))
        assert by_case["vip-compound"].text == "✓ final_answer" and by_case["vip-compound"].status == "pass"
        assert by_case["tight-budget"].text == "✓ max_steps"
        assert by_case["vip-compound"].anchor == f"run-{runner}-vip-compound-1"


def test_trajectories_are_aligned_by_step_with_the_stop_marked(matrix) -> None:
    built = report.build(matrix["doc"])
    vip = next(c for c in built.case_views if c.id == "vip-compound")
    assert vip.runners == list(RUNNERS)
    first_label, first_row = vip.rows[0]
    assert first_label == "1"
    assert len(first_row) == len(RUNNERS)
    assert all(cell is not None and cell.tools[0].name == "run_tests" for cell in first_row)
    for column, runner in enumerate(RUNNERS):
        cells = [row[column] for _, row in vip.rows if row[column] is not None]
        assert cells[-1].stopped == "final_answer", runner
        assert all(c.stopped is None for c in cells[:-1])
    tight = next(c for c in built.case_views if c.id == "tight-budget")
    assert [label for label, _ in tight.rows] == ["1", "2"]
    last_row = tight.rows[1][1]
    assert len(last_row) == len(RUNNERS) and all(cell.stopped == "max_steps" for cell in last_row)


def test_headline_sums_each_runner(matrix) -> None:
    doc = matrix["doc"]
    rows = {row.runner: row for row in report.headline(report.runs_from(doc))}
    for runner in RUNNERS:
        mine = [r for r in doc["results"] if r["runner"] == runner]
        row = rows[runner]
        assert row.runs == len(CASES) and row.passed == len(CASES)
        assert row.model_calls == sum(r["totals"]["model_calls"] for r in mine)
        assert row.input_tokens == sum(r["totals"]["input_tokens"] for r in mine)
        assert row.first_request_bytes and row.first_request_bytes > 0
        assert row.cap_values == "12; 2 in tight-budget"
        assert row.version == mine[0]["runner_version"]


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


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    _chromium() is None,
    reason="Chromium is not installed (Debian: apt-get install chromium chromium-driver; .ci/run does this)",
)
def test_chromium_loads_the_report_finds_the_matrix_and_a_trajectory_and_screenshots_it(matrix, tmp_path: Path) -> None:
    """A real browser, headless: the file opens from disk with no network, and renders what the test looks for."""
    url = matrix["html"].resolve().as_uri()
    base = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ]

    def chromium(profile: str, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [*base, f"--user-data-dir={tmp_path / profile}", *args, url]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)

    dom = chromium("dom", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = _parse(dom.stdout)
    assert {t.get("id") for t in found.tables} >= {"matrix", "trajectory-vip-compound"}
    assert any("trajectory" in (t.get("class") or "") for t in found.tables)
    assert re.search(r"<td[^>]*class=\"pass\"", dom.stdout), "the matrix has no passing cell"

    shot = tmp_path / "report.png"
    taken = chromium("shot", "--window-size=1400,1800", f"--screenshot={shot}")
    assert taken.returncode == 0, taken.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_a_chart_of_one_step_runs_labels_whole_steps_only(matrix: dict[str, object]) -> None:
    doc = json.loads(json.dumps(matrix["doc"]))
    for run in doc["results"]:
        run["trace"]["steps"] = run["trace"]["steps"][:1]  # every run made one model call
    html = report.render_html(doc)
    ticks = re.findall(r'xtick_\d+".*?<text[^>]*>([^<]*)</text>', html, flags=re.DOTALL)
    assert ticks and all(t.strip().lstrip("−-").isdigit() for t in ticks), ticks
