"""The closing screen of `looplab run`: where the runners differ and how, at 80 columns, one line where they agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from looplab.cli import main
from looplab.records import results
from looplab.views import differences, scorecard

RUNNERS = ("handrolled", "langgraph")
CASES = ("vip-compound", "sloppy-calls", "tight-budget")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`looplab run --quiet` of two runners that differ on a malformed call, on three cases: its results.json."""
    out = tmp_path_factory.mktemp("run")
    argv = ["run", "--quiet", "--out", str(out)]
    for runner in RUNNERS:
        argv += ["--runner", runner]
    for case in CASES:
        argv += ["--case", case]
    main(argv)  # its exit code is the CLI's business; the screen is built from what was recorded
    return out / "results.json"


def _screen(doc: object, width: int = 80, caps: object = None) -> list[str]:
    out = Console(width=width, highlight=False, record=True)
    lines = differences.first_screen_lines(doc, "runs/results.json", width=width, caps=caps, out=out)
    return [line.plain for line in lines]


@pytest.mark.full  # six runs in this process
def test_the_first_screen_names_how_the_runners_differ_at_80_columns(runs: Path) -> None:
    doc = results.read(runs)
    lines = _screen(doc, caps=scorecard.load_caps(Path(__file__).parents[1] / scorecard.CAPS_PATH))
    text = "\n".join(lines)
    assert all(len(line) <= 80 for line in lines), text
    assert len(lines) <= 24, text  # one screen of a terminal
    labels = {line.split("  ")[0] for line in lines if line and not line.startswith(" ")}
    ways = labels & {
        differences.STOPS,
        differences.BAD_CALLS,
        differences.AT_CAP,
        differences.LAST_TOOLS,
        differences.FIRST_REQUEST,
        differences.TIME,
    }
    assert len(ways) >= 3, text
    # langgraph stops at the first malformed call; handrolled recovers; each is named.
    assert "sloppy-calls: langgraph stopped on error" in " ".join(text.split())
    assert "langgraph stops at the first malformed call" in " ".join(text.split())
    assert "langgraph does not run them" in " ".join(text.split())
    # The case on which they agree is one line, and the screen ends with where the report is.
    same = [line for line in lines if line.startswith(differences.SAME)]
    assert any("vip-compound: all 2: 5 model calls, final answer, same answer" in line for line in same), text
    assert lines[-1].split() == ["report", "looplab", "report", "runs/results.json"]


@pytest.mark.full  # six runs in this process
def test_runners_that_agree_on_every_case_are_one_line_a_case(runs: Path) -> None:
    doc = json.loads(runs.read_text(encoding="utf-8"))
    # Keep vip-compound only, with twelve copies of handrolled's run under twelve names: identical behaviour.
    base = next(r for r in doc["results"] if (r["runner"], r["case"]) == ("handrolled", "vip-compound"))
    twelve = []
    for i in range(12):
        run = json.loads(json.dumps(base))
        run["runner"] = f"runner{i:02d}"
        twelve.append(run)
    lines = _screen(twelve)
    assert lines[0] == "the 12 runners behaved the same on 1 case"
    assert [line.split()[0] for line in lines[1:]] == ["same", "report"]
    assert "vip-compound: all 12: 5 model calls, final answer, same answer" in lines[1]


def test_a_verb_is_made_singular_for_one_runner() -> None:
    assert differences._conjugated("stop at the unknown tool", 1) == "stops at the unknown tool"
    assert differences._conjugated("do not run them", 1) == "does not run them"
    assert differences._conjugated("raise an exception", 3) == "raise an exception"
    values = {"a": "run them", "b": "run them", "c": "run them", "d": "do not run them"}
    assert differences._grouped_line(values) == "d does not run them; the other 3 run them"
