"""A name that is not one (a runner, a case, a command, an option or one of its values): one line that fits the
terminal, with the nearest real name, exit 2, and nothing run."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from looplab.adapters.registry import RUNNERS
from looplab.cli import main
from looplab.cli._options import API_CHOICES
from looplab.run import harness, matrix
from looplab.scenarios.cases import load_cases

CHECKS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
RUNNER_NAMES = list(RUNNERS)
CASE_IDS = list(load_cases())
COMMANDS = ["run", "eval", "caps", "runners", "scorecard", "cases", "report", "merge", "bench", "otel"]
LETTERS = "abcdefghijklmnopqrstuvwxyz_-"


@st.composite
def typos(draw: st.DrawFn, names: list[str]) -> tuple[str, str]:
    """A real name and that name with one slip of the keyboard: a letter dropped, doubled, swapped or replaced."""
    name = draw(st.sampled_from(names))
    i = draw(st.integers(0, len(name) - 1))
    letter = draw(st.sampled_from(LETTERS))
    slip = draw(st.sampled_from(["drop", "double", "swap", "replace", "insert"]))
    if slip == "drop":
        typo = name[:i] + name[i + 1 :]
    elif slip == "double":
        typo = name[:i] + name[i] + name[i:]
    elif slip == "swap" and i + 1 < len(name):
        typo = name[:i] + name[i + 1] + name[i] + name[i + 2 :]
    elif slip == "insert":
        typo = name[:i] + letter + name[i:]
    else:
        typo = name[:i] + letter + name[i + 1 :]
    assume(typo not in names and typo.strip() and not typo.startswith("-"))
    return name, typo


@pytest.fixture
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting a model endpoint or a run fails the test: a misspelt name is refused before either."""

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("a run started")

    monkeypatch.setattr(harness, "endpoint", started)
    monkeypatch.setattr(harness, "run_one", started)
    monkeypatch.setattr(matrix, "run_matrix", started)


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line `main(argv)` prints on stderr when it refuses the input with exit 2."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors exit from inside the parser
        code = exc.code  # type: ignore[assignment]
    captured = capsys.readouterr()
    assert code == 2, captured
    err = captured.err
    assert err.startswith("looplab: ") and err.count("\n") == 1 and err.endswith("\n"), err
    return err[:-1]


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize(("command", "option"), [("run", "--runner"), ("eval", "--runner"), ("scorecard", "--runner")])
@CHECKS
@given(slip=typos(RUNNER_NAMES))
def test_a_misspelt_runner_gets_the_nearest_name_in_one_line_that_fits(
    command: str, option: str, columns: int, slip: tuple[str, str], nothing_runs: None, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    _, typo = slip
    line = refusal([command, option, typo], capsys)
    assert len(line) <= columns, line
    assert line.startswith("looplab: unknown runner") and "did you mean " in line, line
    assert line.removesuffix(" (`looplab runners` lists them)").rsplit("did you mean ", 1)[1][:-1] in RUNNER_NAMES


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("command", ["run", "eval", "serve-tools"])
@CHECKS
@given(slip=typos(CASE_IDS))
def test_a_misspelt_case_gets_the_nearest_id_in_one_line_that_fits(
    command: str, columns: int, slip: tuple[str, str], nothing_runs: None, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    _, typo = slip
    line = refusal([command, "--case", typo], capsys)
    assert len(line) <= columns, line
    assert line.startswith("looplab: unknown case") and "did you mean " in line, line
    assert line.removesuffix(" (`looplab cases` lists them)").rsplit("did you mean ", 1)[1][:-1] in CASE_IDS


@CHECKS
@given(slip=typos(list(API_CHOICES)))
def test_a_misspelt_api_gets_the_nearest_one(slip: tuple[str, str], nothing_runs: None, monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    name, typo = slip
    line = refusal(["run", "--api", typo], capsys)
    assert line.startswith(f"looplab: argument --api: unknown value {typo!r}; did you mean ") and len(line) <= 80, line


@CHECKS
@given(slip=typos(COMMANDS))
def test_a_misspelt_command_gets_the_nearest_one(slip: tuple[str, str], monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    _, typo = slip
    line = refusal([typo], capsys)
    assert line.startswith(f"looplab: unknown command {typo!r}") and len(line) <= 80, line
    assert "did you mean " in line and "choose from" not in line, line


def test_a_value_near_no_choice_lists_the_choices_in_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    line = refusal(["eval", "--tools", "zzz"], capsys)
    assert line == "looplab: argument --tools: unknown value 'zzz'; one of in-process, mcp"


def test_an_option_the_command_does_not_have_gets_the_nearest_one_it_has(nothing_runs: None, capsys) -> None:
    assert refusal(["eval", "--jsn", "x.json"], capsys).startswith(
        "looplab: unrecognized arguments: --jsn x.json; did you mean --json?"
    )
    assert "did you mean --repeat?" in refusal(["eval", "--repaet=3"], capsys)


def test_a_name_near_none_says_where_the_names_are_listed(nothing_runs: None, monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    assert refusal(["run", "--runner", "zzzzzz"], capsys) == (
        "looplab: unknown runner 'zzzzzz' (`looplab runners` lists them)"
    )
    long = "x" * 500  # a pasted paragraph is cut, not echoed whole
    assert len(refusal(["run", "--case", long], capsys)) <= 120


def test_the_hint_gives_way_on_a_narrow_terminal(nothing_runs: None, monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    wide = refusal(["run", "--runner", "langgrph"], capsys)
    assert wide == "looplab: unknown runner 'langgrph'; did you mean langgraph? (`looplab runners` lists them)"
    monkeypatch.setenv("COLUMNS", "60")
    assert (
        refusal(["run", "--runner", "langgrph"], capsys)
        == "looplab: unknown runner 'langgrph'; did you mean langgraph?"
    )
