"""Every terminal table fits 80 and 160 columns, cuts nothing, and abbreviates only where a legend says so.

And what a framework prints during a run goes to that run's record, not to the terminal.
"""

from __future__ import annotations

import functools
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from looplab.adapters import registry
from looplab.adapters.boundary.noise import framework_noise
from looplab.adapters.contract.limits import StopReason
from looplab.adapters.contract.trace import api_of
from looplab.cli import main
from looplab.measure import bench_report, caps_drift
from looplab.records import measurements, results, summary
from looplab.run import harness
from looplab.scenarios.cases import CheckResult, load_cases
from looplab.views import eval_tables, headline, listings, render, terminal
from tests.paths import REPO

WIDTHS = (80, 160)
#: Every runner, as `looplab runners` lists them.
RUNNERS = list(registry.RUNNERS)
#: The runners `looplab eval` runs when none is named (with --isolate: those in their own environments too).
DEFAULT_RUNNERS = [name for name, info in registry.RUNNERS.items() if info.by_default]
CASES = load_cases()
#: The wire endpoints a run's model calls go to, dealt over the runners.
ENDPOINTS = ("messages", "chat.completions", "responses")
LONG_ANSWER = " ".join(
    f"Step {n}: the discount at billing/discount.py line {n} compounds BASE_RATE and VIP_EXTRA_RATE." for n in range(60)
)


def recording(width: int) -> Console:
    """A console `width` columns wide that keeps what is printed."""
    return Console(width=width, record=True, file=io.StringIO(), highlight=False, color_system=None)


def assert_fits(text: str, width: int) -> None:
    """No line wider than the terminal; no `…` (a cut) unless a legend explains the abbreviations."""
    wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not wide, f"{len(wide)} line(s) over {width} columns, e.g. {wide[0]!r}"
    if "…" in text:
        assert "legend:" in text, text


def assert_whole(text: str, values: list[str]) -> None:
    """Each word of each value is in the output whole: nothing was cut or broken inside a word."""
    for value in values:
        for word in value.split():
            assert word in text, f"{word!r} (of {value!r}) is not in the output whole"


# --- realistic content ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def one_run() -> harness.RunOutcome:
    """One real run (handrolled on vip-compound, the scripted model): the record every runner's is made from."""
    with harness.endpoint(harness.ModelChoice()) as where:
        outcome = harness.run_one("handrolled", CASES["vip-compound"], where)
    assert outcome.result is not None, outcome.error
    return outcome


def every_runner(one_run: harness.RunOutcome, case: str = "vip-compound") -> list[harness.RunOutcome]:
    """Every runner's outcome on `case`, as varied as a real matrix: APIs, answers, a failure, a runner not run."""
    outcomes = []
    for n, runner in enumerate(RUNNERS):
        assert one_run.result is not None
        result = one_run.result.model_copy(deep=True, update={"runner": runner, "case": case})
        for step in result.trace.steps:
            step.model_call.endpoint = ENDPOINTS[n % len(ENDPOINTS)]
        checks = list(one_run.checks)
        if n == 3:  # a real model's bill
            result.totals.input_tokens, result.totals.output_tokens = 1_234_567, 98_765
            result.totals.failed_model_calls = 2
        if n == 4:
            result.answer = LONG_ANSWER
        if n == 5:
            result.answer, result.stop_reason = None, StopReason.MAX_STEPS
            result.stop_detail = "the 12th model call was the last max_steps allows; the model asked for another tool"
            checks = [*checks, CheckResult(name="stop_reason", passed=False, detail="max_steps, not final_answer")]
        if n == 6:
            result.answer = "The bug is in billing/money.py: round_half_up rounds 0.005 down."
        if n == 7:
            outcomes.append(
                harness.RunOutcome(
                    runner, case, error=f"runner {runner!r} needs 'crewai': pip install 'looplab[crewai]'"
                )
            )
            continue
        outcomes.append(harness.RunOutcome(runner, case, result, checks))
    return outcomes


def matrix_cells() -> list[summary.Cell]:
    """Every runner on every case, with failures carrying long reasons and one cell another shard ran."""
    cells = []
    for i, case in enumerate(CASES):
        for j, runner in enumerate(DEFAULT_RUNNERS):
            if (i, j) == (2, 3):
                continue  # another shard's
            failed = (i + j) % 7 == 0
            cells.append(
                summary.Cell(
                    runner=runner,
                    case=case,
                    repeat=1,
                    passed=not failed,
                    stop_reason=("max_steps" if case == "tight-budget" else "final_answer") if not failed else "error",
                    failed_checks=["answer_mentions: the answer names billing/discount.py and apply_discount"]
                    if failed
                    else [],
                    error="the model endpoint answered HTTP 529 (overloaded) three times" if failed and j % 2 else None,
                )
            )
    return cells


def summaries() -> list[summary.RunnerSummary]:
    return [
        summary.RunnerSummary(
            runner=runner,
            runs=130,
            passed=120 - j,
            not_run=j % 3,
            completion_rate=(120 - j) / 130,
            model_calls_median=5,
            model_calls_p95=11.5,
            tool_calls_median=4,
            cost_usd_median=None if j == 2 else 0.0123,
            cost_usd_p95=None if j == 2 else 0.0456,
            stop_reasons={"final_answer": 110, "max_steps": 10, "repetition": 5, "timeout": 3, "error": 2},
        )
        for j, runner in enumerate(RUNNERS)
    ]


def bench_result() -> measurements.BenchResult:
    runners = [
        {
            "runner": r,
            "version": "anthropic 2.14.0" if r == "handrolled" else f"{j}.{j * 7}.{j * 13}",
            "runs": 20,
            "stop_reasons": {"final_answer": 20},
            "turns_median": 5,
            "overhead_ms_median": 1.23 * (j + 1),
            "overhead_ms_p95": 123.4 * (j + 1),
            "first_turn_ms_median": 50.0,
            "model_ms_median": 2.0,
            "wall_ms_median": 900.0,
            "import_s": 0.5 * (j + 1),
            "peak_rss_mb": 80.0 + 30 * j,
            "ratio_overhead_median": float(j + 1),
            "ratio_overhead_p95": float(j + 1),
            "ratio_import": float(j + 1),
            "ratio_peak_rss": 1.0 + j / 3,
        }
        for j, r in enumerate(RUNNERS)
    ]
    tax = [
        {
            "runner": r,
            "turns_bare": 5,
            "turns_looplab": 5,
            "bare_wall_ms": 1234.5,
            "looplab_wall_ms": 1300.25,
            "tax_wall": 0.053,
            "bare_outside_tools_ms": 120.5,
            "looplab_outside_tools_ms": 140.75,
            "tax_outside_tools": 0.168,
            "added_ms_per_turn": 4.05,
        }
        for r in RUNNERS[:-3]
    ]
    return measurements.BenchResult.model_validate(
        {
            "date": "2025-06-01",
            "case": "vip-compound",
            "repeat": 20,
            "import_repeat": 3,
            "python": "3.11.7",
            "platform": "Linux-6.1.0-x86_64-with-glibc2.36",
            "cores": 2,
            "runners": runners,
            "harness_tax": tax,
            "no_bare_loop": RUNNERS[-3:],
            "server": {
                "requests": 200,
                "median_ms": 1.2,
                "p95_ms": 2.5,
                "long_request_chars": 1_000_000,
                "long_requests": 5,
                "long_request_ms_median": 35.0,
                "proxy_median_ms": 1.6,
            },
            "recorded_model_ms_median": 2.1,
            "help_s_median": 0.12,
        }
    )


# --- each table, at 80 and 160 columns -----------------------------------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_the_runners_listing_fits_and_shows_every_word(width: int) -> None:
    out = recording(width)
    listings.runners_table(registry.RUNNERS.values(), out=out)
    text = out.export_text()
    assert_fits(text, width)
    assert_whole(text, [w for info in registry.RUNNERS.values() for w in (info.name, info.extra, info.summary)])
    assert "legend:" not in text


@pytest.mark.parametrize("width", WIDTHS)
def test_the_cases_listing_fits_and_shows_every_word(width: int) -> None:
    out = recording(width)
    listings.cases_table(CASES.values(), out=out)
    text = out.export_text()
    assert_fits(text, width)
    assert_whole(text, [w for c in CASES.values() for w in (c.id, c.model.persona, c.description)])


@pytest.mark.parametrize("width", WIDTHS)
def test_the_run_table_fits_with_every_runners_api_and_full_headers(width: int, one_run) -> None:
    out = recording(width)
    outcomes = every_runner(one_run)
    render.summary_table(outcomes, out=out)
    text = out.export_text()
    assert_fits(text, width)
    assert_whole(text, [o.runner for o in outcomes] + ["1234567", "+2✗", "max_steps", "not run"])
    for header in ("runner", "stop", "checks", "calls", "tools", "tok in", "tok out", "wall s"):
        assert header in text
    # Each runner's wire API is in its row (beside it on a wide terminal, under its name on a narrow one).
    lines = text.splitlines()
    for n, o in enumerate(outcomes):
        if o.result is None:
            continue
        api = api_of(ENDPOINTS[n % len(ENDPOINTS)])
        at = next(k for k, line in enumerate(lines) if line.startswith(o.runner + " "))
        assert api in lines[at] or lines[at + 1].strip() == api, (o.runner, lines[at : at + 2])


def test_identical_answers_are_printed_once_naming_the_runners_that_gave_them(one_run) -> None:
    out = recording(160)
    outcomes = every_runner(one_run)
    render.summary_table(outcomes, out=out)
    text = out.export_text()
    assert one_run.result is not None and one_run.result.answer
    first_words = " ".join(one_run.result.answer.split()[:6])
    assert text.count(first_words) == 1
    same = [o.runner for n, o in enumerate(outcomes) if n not in (4, 5, 6, 7)]
    # The names may wrap to a second line on a terminal of any width once there are enough runners.
    assert f"{', '.join(same)} ({len(same)} of {len(outcomes)}):" in " ".join(text.split())
    assert "round_half_up rounds 0.005 down" in text and "needs 'crewai'" in text
    assert "(no answer: the 12th model call" in text
    assert "characters in the results document)" in text  # the long answer: how much more there is, no `…`


def test_when_every_runner_agrees_the_answer_says_all_of_them(one_run) -> None:
    out = recording(80)
    outcomes = [o for o in every_runner(one_run)[:3]]
    render.summary_table(outcomes, out=out)
    assert "all 3 runners:" in out.export_text()


@pytest.mark.parametrize("width", [*WIDTHS, 240])
def test_the_eval_matrix_fits_every_runner_and_case(width: int) -> None:
    out = recording(width)
    cells = matrix_cells()
    eval_tables.matrix_table(cells, DEFAULT_RUNNERS, list(CASES), out=out)
    text = out.export_text()
    assert_fits(text, width)
    lines = text.splitlines()
    failures = [c for c in cells if not c.passed]
    if any(line.startswith(f"{case}: ✓") for line in lines for case in CASES):
        # Too many runners for a table even with numbered columns: a line per case, naming the runners that failed.
        flat = " ".join(text.split())
        for case in CASES:
            failed = [c.runner for c in failures if c.case == case]
            passed = sum(c.case == case and c.passed for c in cells)
            assert f"{case}: ✓ {passed} of {len(DEFAULT_RUNNERS)}" in flat
            its_line = flat.split(f"{case}: ✓", 1)[1].split(": ✓", 1)[0]
            assert all(runner in its_line for runner in failed), case
        assert sum(line.lstrip().startswith("✗ ") for line in lines) == len(failures)
        assert_whole(text, ["answer_mentions:", "HTTP 529 (overloaded)"])
        return
    for case in CASES:  # a row per case: a mark per runner, then the row's stops
        row = next(line for line in lines if line.startswith(case + " "))
        assert sum(row.count(mark) for mark in "✓✗–") == len(DEFAULT_RUNNERS), row
        assert row.endswith("cap" if case == "tight-budget" else "answer") or "error" in row, row
    assert "cap = max_steps" in text  # the short stop's legend
    assert sum(line.lstrip().startswith("✗ ") for line in lines) == len(failures)  # each listed, with its reason
    assert_whole(text, ["answer_mentions:", "HTTP 529 (overloaded)"])
    flat = "".join(text.split())
    for runner in DEFAULT_RUNNERS:
        assert runner in flat  # whole, or broken over its header's lines after a `_`
    if width == 240:  # room for a column per runner name: no numbered columns
        header = next(line for line in lines if line.startswith("case "))
        assert "runners: 1 " not in text and "handrolled" in header
    else:
        assert "runners: 1 handrolled · 2 anthropic_tool_runner" in " ".join(text.split())  # the numbers' legend


@pytest.mark.parametrize("width", WIDTHS)
def test_the_per_runner_eval_summary_fits(width: int) -> None:
    out = recording(width)
    eval_tables.runner_summary(summaries(), out=out)
    text = out.export_text()
    assert_fits(text, width)
    assert_whole(text, RUNNERS + ["unknown", "final_answer", "repetition", "120/130", "0.0123/0.0456"])
    if width == 160:
        assert "legend:" not in text and "calls med/p95" in text and "cost med/p95 $" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_the_headline_and_native_caps_fit(width: int, one_run) -> None:
    out = recording(width)
    case = CASES["vip-compound"]
    doc = results.build(every_runner(one_run), runners=RUNNERS, cases=[case])
    headline.print_headline(doc, out=out)
    text = out.export_text()
    assert_fits(text, width)
    assert "per runner" in text and "native caps" in text
    assert_whole(text, RUNNERS + ["1,234,567", "for", "range(max_steps)"])
    if width == 160:
        assert "legend:" not in text and "tok out" in text and "req1 B" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_the_bench_tables_fit(width: int) -> None:
    out = recording(width)
    result = bench_result()
    bench_report.print_tables(result, out=out)
    text = out.export_text()
    assert_fits(text, width)
    shown = [bench_report.NO_BARE_LOOP, "scripted model server"]
    assert_whole(text, RUNNERS + [r.version for r in result.runners] + shown)
    if width == 160:
        assert "legend:" not in text and "excl. tools ms" in text and "whole run ms" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_the_bench_modes_markdown_tables_fit(width: int) -> None:
    from looplab.measure import bench_concurrency, bench_matrix

    conc = [
        bench_concurrency.ConcurrencyRow(
            concurrency=c, jobs=2, cells=169, passed=160, model_calls=845, wall_s=300.0 / c, speedup=float(c)
        )
        for c in (1, 8, 32)
    ]
    iso = [
        bench_matrix.IsolationRow(runner=r, created_s=None if j % 2 else 41.5, in_process_s=2.5, isolated_s=3.25)
        for j, r in enumerate(RUNNERS)
    ]
    out = recording(width)
    terminal.markdown_lines(bench_concurrency.table(conc), out=out)
    terminal.markdown_lines(bench_matrix.isolation_table(iso), out=out)
    text = out.export_text()
    assert_fits(text, width)
    assert_whole(text, RUNNERS + ["worker processes", "speedup", "environment created now s", "cached"])
    assert "|" not in text


@pytest.mark.parametrize("width", WIDTHS)
def test_the_run_commands_last_block_names_where_differences_are(width: int) -> None:
    out = recording(width)
    render.where_to_look(Path("looplab-runs/2025-06-01T12-00-00/results.json"), out=out)
    text = out.export_text()
    assert_fits(text, width)
    for place in ("looplab eval", "looplab report", "looplab scorecard", "docs/iteration-caps.md"):
        assert place in text
    assert "looplab-runs/2025-06-01T12-00-00/results.json" in text


# --- the layout itself, on generated tables --------------------------------------------------------------------

words = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz_-./:()=0123456789"), min_size=1, max_size=30)
cell = st.lists(words, min_size=0, max_size=12).map(" ".join)


@st.composite
def tables(draw: Any) -> tuple[list[terminal.Col], list[list[str]]]:
    n = draw(st.integers(1, 9))
    cols = []
    for k in range(n):
        header = draw(st.lists(words, min_size=1, max_size=3).map(" ".join))
        short = draw(st.one_of(st.just(""), words))
        fold = draw(st.sampled_from(["", "line", "under"])) if k else ""
        cols.append(terminal.Col(header, short=short, right=draw(st.booleans()), prose=draw(st.booleans()), fold=fold))
    rows = draw(st.lists(st.lists(cell, min_size=n, max_size=n), max_size=8))
    return cols, rows


#: A long word in a cell folded under the first column: its indent counts with the word (found by Hypothesis).
_INDENTED_WORD = (
    [terminal.Col("0", prose=True), terminal.Col("0", fold="under"), terminal.Col("x")],
    [["", "0" * 23 + " 0" + " 1" * 20, "y" * 15]],
)


@settings(deadline=None)
@example(table=_INDENTED_WORD, width=40)
@given(table=tables(), width=st.integers(40, 200))
def test_a_generated_table_fits_any_width_and_keeps_every_word(table, width: int) -> None:
    cols, rows = table
    out = recording(width)
    terminal.print_table("generated", cols, rows, ["a note under it"], out=out)
    text = out.export_text()
    assert_fits(text, width)
    assert_whole(text, [c for row in rows for c in row])
    if "─" in text:  # laid out as a table (the last resort writes `header: value` for each non-empty cell)
        legend = "legend:" in text
        for c in cols:  # each header is there in full, or its short form with the legend saying what it stands for
            assert all(w in text for w in c.header.split()) or (legend and c.short in text), c


@settings(deadline=None)
@given(
    runners=st.lists(words, min_size=1, max_size=20, unique=True),
    cases=st.lists(words, min_size=1, max_size=6, unique=True),
    width=st.integers(40, 200),
)
def test_a_generated_matrix_fits_any_width(runners: list[str], cases: list[str], width: int) -> None:
    cells = [
        summary.Cell(
            runner=r, case=c, repeat=1, passed=(i + j) % 3 > 0, stop_reason="final_answer", failed_checks=["x y z"]
        )
        for i, c in enumerate(cases)
        for j, r in enumerate(runners)
    ]
    out = recording(width)
    eval_tables.matrix_table(cells, runners, cases, out=out)
    assert_fits(out.export_text(), width)


# --- through the CLI, under COLUMNS ---------------------------------------------------------------------------


@pytest.fixture
def columns(monkeypatch) -> Iterator[Any]:
    """Set COLUMNS for looplab's console (created anew), and leave a fresh one behind."""

    def set_to(width: int) -> None:
        monkeypatch.setenv("COLUMNS", str(width))
        terminal.console.cache_clear()

    yield set_to
    terminal.console.cache_clear()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("command", ["runners", "cases"])
def test_the_listings_fit_under_columns(command: str, width: int, columns, capsys) -> None:
    columns(width)
    assert main([command]) == 0
    assert_fits(capsys.readouterr().out, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_run_fits_under_columns_and_ends_with_where_the_runners_differ(
    width: int, columns, capsys, tmp_path: Path
) -> None:
    columns(width)
    code = main(["run", "--runner", "handrolled", "--runner", "langgraph", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert_fits(out, width)
    lines = out.rstrip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("how the 2 runners differ"))
    block = " ".join(" ".join(lines[start:]).split())
    assert "vip-compound: all 2 answered in 5 model calls" in block
    # A long path may wrap anywhere: it is found with the line breaks' spaces taken out.
    assert f"looplab report {tmp_path / 'results.json'}".replace(" ", "") in block.replace(" ", "")


# --- what a framework prints during a run ----------------------------------------------------------------------


def test_a_print_during_a_run_lands_in_its_warnings_not_on_stdout(capsys) -> None:
    with framework_noise() as messages:
        print("\x1b[35mobservability: off\x1b[0m — see every model call")
        print("to stderr,", end=" ", file=sys.stderr)
        print("in two writes", file=sys.stderr)
    assert messages == ["stdout: observability: off — see every model call", "stderr: to stderr, in two writes"]
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_a_frameworks_rich_console_during_a_run_prints_into_its_record(capsys) -> None:
    framework_console = Console(highlight=False, color_system=None)  # writes to whatever sys.stdout is then
    with framework_noise() as messages:
        framework_console.print("Step 1: calling tool run_tests")
    framework_console.print("after the run")
    assert messages == ["stdout: Step 1: calling tool run_tests"]
    assert capsys.readouterr().out == "after the run\n"


def test_a_print_from_a_thread_outside_the_run_still_reaches_the_terminal(capsys) -> None:
    with framework_noise() as messages:
        outside = threading.Thread(target=print, args=("progress from elsewhere",))  # no run's context
        outside.start()
        outside.join(timeout=10)
        print("the run's own")
    assert messages == ["stdout: the run's own"]
    assert capsys.readouterr().out == "progress from elsewhere\n"


def test_concurrent_runs_each_keep_their_own_prints_and_the_streams_come_back(capsys) -> None:
    before = (sys.stdout, sys.stderr)
    kept: dict[str, list[str]] = {}
    started = threading.Barrier(4)

    def run(name: str) -> None:
        with framework_noise() as messages:
            started.wait(timeout=10)  # all four in flight at once
            for k in range(20):
                print(f"{name} line {k}")
        kept[name] = messages

    threads = [threading.Thread(target=run, args=(f"run-{n}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for name, messages in kept.items():
        assert messages == [f"stdout: {name} line {k}" for k in range(20)]
    assert len(kept) == 4 and (sys.stdout, sys.stderr) == before
    assert capsys.readouterr().out == ""


@pytest.mark.full  # a fresh interpreter that imports Pydantic AI
def test_pydantic_ais_banner_goes_to_the_runs_record_not_the_terminal() -> None:
    pytest.importorskip("pydantic_ai")
    code = (
        "import json\nfrom looplab.run import harness\nfrom looplab.scenarios.cases import load_cases\n"
        "with harness.endpoint(harness.ModelChoice()) as where:\n"
        "    o = harness.run_one('pydantic_ai', load_cases()['vip-compound'], where)\n"
        "print('WARNINGS', json.dumps(o.result.warnings))\n"
    )
    # A process that Pydantic AI shows its banner to: one a coding agent reads (outside pytest and CI).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", "CI", "PYDANTIC_AI_NO_BANNER")}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**env, "AI_AGENT": "1"}, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    head, _, tail = proc.stdout.rpartition("WARNINGS ")
    warned = json.loads(tail)
    assert "pydantic-ai v" not in head + proc.stderr, head + proc.stderr
    if not any("pydantic-ai v" in w for w in warned):
        pytest.skip("this Pydantic AI showed no banner")
    assert any(w.startswith("stderr: ") and "observability" in w for w in warned)


# --- history, the estimate, the scorecard, caps: at 80 columns -------------------------------------------------

names = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz_-.0123456789"), min_size=1, max_size=40)


@functools.cache
def _kept_history() -> dict[str, list[Any]]:
    """The kept measurements in history/, read once."""
    from looplab.records.history import read, runners_of

    return runners_of(read(REPO / "history"), ())


@settings(deadline=None, max_examples=30)
@given(runner=names, version=names, where=names, before=st.text(min_size=0, max_size=150))
def test_the_history_view_fits_80_columns_whatever_the_kept_names(
    runner: str, version: str, where: str, before: str
) -> None:
    from looplab.records.caps_changes import Change
    from looplab.views import history as shown

    kept = dict(_kept_history())
    langgraph = kept["langgraph"]
    first = langgraph[0].model_copy(update={"runner": runner, "version": version})
    kept = {runner: [first, *langgraph[1:]], **kept}
    text = shown.terminal(kept, width=80)
    assert_fits(text, 80)
    change = Change(runner, where, "unset", "ending.message", before, "after")
    lines = [folded for line in shown._change_lines(change, 80) for folded in shown._fitted(line, 80)]
    assert all(cell_len(line) <= 80 for line in lines)


def test_the_kept_history_prints_each_change_on_one_line_where_one_line_holds_it() -> None:
    from looplab.records.history import read, runners_of
    from looplab.views import history as shown

    text = shown.terminal(runners_of(read(REPO / "history"), ()), width=80)
    assert_fits(text, 80)
    assert "      recursion_limit: default 25 -> 10000" in text.splitlines()
    # A change too long for one line keeps its new value whole on the next, after `->`.
    assert '        -> "kept going: stopped by looplab\'s safety stop at 60 model calls"' in text.splitlines()
    kept = runners_of(read(REPO / "history"), ())
    shared = len({(v.measured_on, v.looplab) for versions in kept.values() for v in versions}) == 1
    assert text.startswith("every version below measured ") == shared  # said once when every version shares it


@settings(deadline=None, max_examples=30)
@given(
    runners=st.lists(names, min_size=1, max_size=20, unique=True),
    cases=st.lists(names, min_size=1, max_size=3, unique=True),
    tokens=st.integers(0, 99_999_999),
    priced=st.booleans(),
    bound=st.booleans(),
)
def test_the_estimate_fits_80_columns_one_line_a_cell(
    runners: list[str], cases: list[str], tokens: int, priced: bool, bound: bool
) -> None:
    from looplab.adapters.contract.pricing import Pricing
    from looplab.measure import estimate

    cells = []
    for i, case in enumerate(cases):
        for j, runner in enumerate(runners):
            if bound and i == 0:
                cells.append(estimate.Cell(runner, case, bound=estimate.Bound(("deploy",), 12, 0.25)))
            else:
                stop = "max_steps" if (i + j) % 3 == 0 else "final_answer"
                cells.append(estimate.Cell(runner, case, stop, 12, tokens, tokens // 7, 0, 1.2345))
    pricing = Pricing(3.0, 15.0) if priced else None
    est = estimate.Estimate("anthropic:claude-sonnet-4-5", pricing, "--price", tuple(cells))
    text = estimate.render(est, width=80)
    assert_fits(text, 80)
    lines = text.splitlines()
    rule = next((k for k, line in enumerate(lines) if line.startswith("─")), None)
    if rule is None:
        # A name too long for any table at 80 columns: a record a cell, its runner on a line, its numbers on the next.
        for cell in cells:
            assert any(line.strip() == cell.runner for line in lines), cell.runner
        assert sum(line.startswith("  ended:") for line in lines) == len(cells)
        return
    total = next(k for k, line in enumerate(lines) if line.startswith("total"))
    grouped = sum(line.endswith(":") and not line.startswith(" ") for line in lines[rule + 1 : total])
    # One line a cell (and, where the cases are lines of their own, one a case): no cell wrapped to a second line.
    assert total - rule - 1 == len(cells) + grouped
    for cell in cells:
        assert any(cell.runner in line.split() for line in lines[rule + 1 : total]), cell.runner


def test_the_estimate_says_what_every_cell_shares_once_above_the_table() -> None:
    from looplab.measure import estimate

    cells = tuple(estimate.Cell(r, "vip-compound", "final_answer", 5, 4_767, 229, 0, 0.0177) for r in RUNNERS)
    text = estimate.render(estimate.Estimate("openai:gpt-4.1", None, "", cells), width=80)
    assert "every cell: case vip-compound · scripted run final_answer" in text
    header = next(line for line in text.splitlines() if line.startswith("runner"))
    assert "case" not in header and "scripted" not in header and "cost" not in header  # said once, not per row
    assert "price unknown" in text


def test_the_scorecard_at_80_columns_fits_with_a_line_a_behaviour(one_run) -> None:
    from looplab.views import scorecard, scorecard_rows, scorecard_text

    doc = results.build(every_runner(one_run), runners=RUNNERS, cases=[CASES["vip-compound"]])
    caps = scorecard.load_caps(REPO / "docs" / "iteration-caps.json")
    card = scorecard.build(RUNNERS, scorecard.observed(doc), caps)
    out = recording(80)
    scorecard_text.print_terminal(card, out)
    text = out.export_text()
    assert_fits(text, 80)
    lines = text.splitlines()
    # A behaviour nobody measured is said once for every runner, not once a runner.
    assert "every runner: two tools in one reply: not measured" in lines
    assert sum("two tools in one reply" in line for line in lines) == 1
    # Each runner's short cells are a line each, whole.
    assert "  tools of the last call: ran" in lines
    # Laid out a runner at a time, a cell one line can hold is on one line, whole (under its title if need be).
    for c in card.cards:
        for row in scorecard_rows.group_rows("the cap"):
            cell = c.cells[row.key].text
            if cell_len(cell) <= 76:
                assert any(cell in line for line in lines), (c.runner, cell)


def test_the_caps_check_output_fits_80_columns() -> None:

    long = '+      "message": "Recursion limit of 25 reached without hitting a stop condition. You can increase it"'
    text = caps_drift.for_terminal(f"--- a\n+++ b\n{long}\nchanged: langgraph, recursion_limit = unset: {long}\n", 80)
    assert_fits(text, 80)
    lines = text.splitlines()
    # A long diff line keeps its mark on each of its lines, so it still reads as an added line.
    assert all(line.startswith("+") for line in lines[2:4])
    assert "".join(line[1:].strip() for line in lines[2:4]).replace(" ", "") == long[1:].replace(" ", "")


@pytest.mark.parametrize("command", [["history"], ["history", "--runner", "langgraph"]])
def test_looplab_history_fits_under_columns_80(command: list[str], columns, capsys) -> None:
    columns(80)
    assert main([*command, "--dir", str(REPO / "history")]) == 0
    assert_fits(capsys.readouterr().out, 80)
