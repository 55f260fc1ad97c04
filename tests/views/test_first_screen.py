"""The closing screen of `looplab run`: how the runners differ first, in a chooser's words, then how each runner ended
each case, then where the records are, within one screen at 80 columns."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from looplab.cli import main
from looplab.records import results
from looplab.run import harness, matrix
from looplab.scenarios.cases import load_cases
from looplab.views import differences, first_screen, scorecard, scorecard_rows, terminal
from tests.paths import REPO

ROOT = REPO
CASES = ("vip-compound", "sloppy-calls", "tight-budget")
#: The runs of the documents below are named like the longest runner names (`ts_anthropic_tool_runner`).
NAME = "runner_of_twenty_four_{:02d}"
#: Where the default screen must have said how the runners differ, and how long it may be (the issue's screen).
DIFFERENCES_WITHIN, SCREEN_LINES = 25, 60


@pytest.fixture(scope="module")
def handrolled() -> dict[str, Any]:
    """handrolled's runs of the three default cases, run in this process on the scripted model, as JSON."""
    cases = [load_cases()[c] for c in CASES]
    with harness.endpoint(harness.ModelChoice()) as where:
        outcomes = matrix.run_matrix(["handrolled"], cases, where)
    doc = results.build(outcomes, model="scripted", api=None, runners=["handrolled"], cases=cases)
    return json.loads(results.to_json(doc))


def _cloned(base: dict[str, Any], count: int, change: dict[int, Any] | None = None) -> dict[str, Any]:
    """`count` runners, each with a copy of `base`'s runs under its own name; `change[i](run)` edits runner i's runs."""
    doc = copy.deepcopy(base)
    doc["results"], doc["cells"] = [], []
    names = [NAME.format(i) for i in range(count)]
    for i, name in enumerate(names):
        for cell in base["cells"]:
            run = copy.deepcopy(base["results"][cell["result"]])
            run["runner"] = name
            mine = {**cell, "runner": name, "result": len(doc["results"])}
            if change and i in change:
                change[i](run, mine)
            doc["results"].append(run)
            doc["cells"].append(mine)
    doc["runners"] = (
        [{**base["runners"][0], "name": n} for n in names] if isinstance(base["runners"][0], dict) else names
    )
    return doc


def _stops_on_error_after(calls: int) -> Any:
    """An edit of a run of sloppy-calls: the framework stopped on an error after `calls` model calls."""

    def change(run: dict[str, Any], cell: dict[str, Any]) -> None:
        if run["case"] != "sloppy-calls":
            return
        run["trace"]["steps"] = run["trace"]["steps"][:calls]
        run["totals"]["model_calls"] = calls
        run["stop_reason"] = cell["stop_reason"] = "error"
        run["answer"] = None
        run["native_end"] = {**(run["native_end"] or {}), "kind": "raised", "text": None}

    return change


def _ends_at_cap(kind: str) -> Any:
    """An edit of a run of tight-budget: the framework ended at its cap this way (`returned`, `raised`, ...)."""

    def change(run: dict[str, Any], cell: dict[str, Any]) -> None:
        if run["case"] == "tight-budget":
            run["native_end"] = {**(run["native_end"] or {}), "kind": kind}

    return change


def _screen(doc: Any, width: int = 80, **options: Any) -> list[str]:
    out = Console(width=width, highlight=False, record=True)
    caps = scorecard.load_caps(ROOT / scorecard.CAPS_PATH)
    lines = first_screen.screen_lines(doc, "runs/results.json", width=width, caps=caps, out=out, **options)
    return [line.plain.rstrip() for line in lines]


def _joined(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())


def test_sixteen_runners_that_differ_fit_one_screen_with_the_differences_first(handrolled: dict[str, Any]) -> None:
    change = {0: _stops_on_error_after(1), 1: _stops_on_error_after(1), 2: _ends_at_cap("raised")}
    change |= {3: _ends_at_cap("refused by the model boundary")}
    lines = _screen(_cloned(handrolled, 16, change))
    text = "\n".join(lines)
    assert all(len(line) <= 80 for line in lines), text
    assert len(lines) <= SCREEN_LINES - 2, text  # the run's own lines (the runners left out, a blank) come first
    head = _joined(lines[:DIFFERENCES_WITHIN])
    assert lines[0] == "how the 16 runners differ on 3 cases", text
    assert "runner_of_twenty_four_00 and runner_of_twenty_four_01 stop at the first malformed call" in head, text
    assert "the other 14 recover" in head, text
    assert "runner_of_twenty_four_02 raises an exception" in head, text
    assert "runner_of_twenty_four_03 keeps asking for model calls, which looplab refuses" in head, text
    assert "the other 14 return without an answer" in head, text
    # Per runner, how each case ended: not a pass count that hides a stop on an error.
    row = next(line for line in lines if line.startswith(NAME.format(0)))
    assert row.split()[1:7] == ["answer", "5", "error", "1", "cap", "2"], text
    # All-zero cost says nothing: the column is left out.
    assert "cost" not in text
    assert lines[-1].split()[:2] == ["native", "caps"] and "report" in _joined(lines[-4:])


def test_a_case_they_agree_on_is_one_line_in_a_choosers_words(handrolled: dict[str, Any]) -> None:
    lines = _screen(_cloned(handrolled, 12), per_runner=False)
    assert lines[0] == "how the 12 runners differ on 3 cases" or lines[0].startswith("the 12 runners behaved the same")
    same = [line for line in lines if line.startswith(differences.SAME)]
    assert any("vip-compound: all 12 answered in 5 model calls, the same answer" in line for line in same), lines


def test_agreeing_on_a_failed_check_is_not_listed_as_the_same(handrolled: dict[str, Any]) -> None:
    def fails(run: dict[str, Any], cell: dict[str, Any]) -> None:
        if run["case"] == "vip-compound":
            cell["passed"], cell["failed_checks"] = False, ["answer names the cause"]

    lines = _screen(_cloned(handrolled, 3, dict.fromkeys(range(3), fails)))
    text = "\n".join(lines)
    assert any(line.startswith(differences.FAILED) and "vip-compound" in line for line in lines), text
    assert not any(line.startswith(differences.SAME) and "vip-compound" in line for line in lines), text
    assert "answer 5 ✗" in text and "✗ runner_of_twenty_four_00 on vip-compound: failed: answer names" in text


def test_one_runner_has_nothing_to_compare_and_says_so(handrolled: dict[str, Any]) -> None:
    lines = _screen(handrolled)
    assert lines[0] == "handrolled on 3 cases (one runner: nothing to compare)"
    assert not any("runners" in line for line in lines[:3])


def test_many_cases_fold_into_one_cell_a_runner(handrolled: dict[str, Any]) -> None:
    doc = copy.deepcopy(handrolled)
    # Ten copies of the cases under other names: too many for a column each at 80 columns.
    for n in range(10):
        for cell in handrolled["cells"]:
            run = copy.deepcopy(handrolled["results"][cell["result"]])
            run["case"] = f"{cell['case']}-copy-{n}"
            doc["cases"][run["case"]] = handrolled["cases"][cell["case"]]
            doc["cells"].append({**cell, "case": run["case"], "result": len(doc["results"])})
            doc["results"].append(run)
    lines = first_screen.endings_lines(results.load(doc), width=80, out=Console(width=80))
    text = "\n".join(line.plain for line in lines)
    assert all(len(line.plain) <= 80 for line in lines), text
    row = next(line.plain for line in lines if line.plain.startswith("handrolled"))
    assert row.split()[1:6] == ["22", "answer;", "cap", "2", "×11"], text


def test_native_caps_are_behind_an_option(handrolled: dict[str, Any]) -> None:
    shown = _screen(handrolled, native_caps=True)
    assert "native caps" in shown and "for step in range(max_steps) = 12; 2 in tight-budget" in _joined(shown)
    assert "native caps" not in _screen(handrolled)


@given(
    verb=st.sampled_from(["stop", "recover", "raise", "return", "go", "do", "finish", "ask", "skip", "keep"]),
    mark=st.sampled_from(["", ",", ";", ":"]),
    rest=st.text(alphabet="abc xyz()", max_size=20),
)
@settings(max_examples=200, deadline=None)
def test_a_verb_is_made_singular_for_one_runner_whatever_follows_it(verb: str, mark: str, rest: str) -> None:
    phrase = f"{verb}{mark} {rest}".rstrip()
    one = differences._conjugated(phrase, 1)
    head = one.split(" ", 1)[0]
    assert head.rstrip(",;:") in {verb + "s", verb + "es", "does"}, one
    assert head.endswith(mark) and one[len(head) :] == phrase[len(verb) + len(mark) :]
    assert differences._conjugated(phrase, 3) == phrase


def test_a_group_of_one_is_said_in_the_singular_and_the_largest_group_last() -> None:
    values = {"a": "run them", "b": "run them", "c": "run them", "d": "skip them"}
    assert differences._grouped_line(values) == "d skips them; the other 3 run them"


#: Every text the scorecard's two bad-call cells can hold (`scorecard._malformed`, `scorecard._unknown_tool`).
MALFORMED = ["recovers", "recovers (the framework fixed them before the tools)", "stops: error", "stops: max_steps"]
UNKNOWN = ["not reached (the run ended first)", "reaches the tools", "answered by the framework", "ends the run: error"]


@pytest.mark.parametrize("malformed", MALFORMED)
@pytest.mark.parametrize("unknown", UNKNOWN)
def test_what_a_framework_does_with_bad_calls_reads_as_what_it_does(malformed: str, unknown: str) -> None:
    phrase = differences._bad_call_phrase(scorecard_rows.Cell(text=malformed), scorecard_rows.Cell(text=unknown))
    assert phrase.split()[0].rstrip(",") in {"recover", "stop", "get"}, phrase
    assert not any(word in phrase for word in ("stops:", "not reached", "ends the run", "reaches the tools")), phrase
    assert ("recover" in phrase) == malformed.startswith("recovers")


@pytest.mark.full  # every installed runner, in a process of its own, as a newcomer runs it
def test_looplab_run_at_80_columns_is_one_screen_with_the_differences_first(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "80"}
    argv = [sys.executable, "-m", "looplab", "run", "--out", str(tmp_path / "runs")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    lines = (done.stdout + done.stderr).rstrip("\n").split("\n")
    text = "\n".join(lines)
    assert done.returncode == 0, text
    assert len(lines) <= SCREEN_LINES and all(len(line) <= 80 for line in lines), text
    title = next(k for k, line in enumerate(lines) if line.startswith("how the "))
    labels = {line.split("  ")[0] for line in lines[title:DIFFERENCES_WITHIN]}
    assert {differences.BAD_CALLS, differences.AT_CAP} <= labels, text
    assert "Traceback" not in text


def test_the_cli_screen_reads_the_runs_it_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    terminal.console.cache_clear()  # the console reads COLUMNS once; another test may have made it narrow
    try:
        code = main(["run", "--runner", "handrolled", "--case", "tight-budget", "--out", str(tmp_path)])
    finally:
        terminal.console.cache_clear()
    shown = capsys.readouterr().out
    assert code == 0
    assert "handrolled on 1 case" in shown and "cap 2" in shown
    assert f"looplab report {tmp_path / 'results.json'}" in " ".join(shown.split())
