"""One rule for `looplab run` and `looplab eval`: 0 when every run asked for ran and did what its case expects,
1 when one errored or failed a check, 2 for bad input; a runner that cannot take the model is skipped, not failed.
(130 and 143 on SIGINT and SIGTERM: tests/run/test_interrupt.py, on both commands.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from looplab.adapters import registry
from looplab.adapters.contract.declaration import Declaration
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.session import Runner, RunSession
from looplab.cli import main
from looplab.cli.running import exit_code
from looplab.records.outcome import RunOutcome
from looplab.run import harness, matrix


class Crashes(Runner):
    """A runner whose framework raises on its first step (no framework needed)."""

    name, extra, distribution, apis, knobs = "crashes", "none", "none", ("chat",), ("k",)

    def native_cap(self, limits: Limits) -> NativeCap:
        return NativeCap(knob="k", value=limits.max_steps)

    def loop(self, task: str, session: RunSession) -> Finished:
        raise RuntimeError("the framework fell over")


RUNNER = Crashes()
CRASHES = Declaration(name="crashes", module=__name__, extra="none", distribution="none", summary="raises")


@pytest.fixture
def crashes(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(registry.RUNNERS, "crashes", CRASHES)
    return "crashes"


def test_the_rule_over_outcomes() -> None:
    ok = RunOutcome("a", "c", result=object())  # type: ignore[arg-type]  # a result and no failed check
    assert exit_code([]) == 0 and exit_code([ok, ok]) == 0
    assert exit_code([ok, RunOutcome("a", "c", error="not run: boom")]) == 1


def test_run_exits_0_when_every_run_did_what_its_case_expects(tmp_path: Path) -> None:
    assert main(["run", "--runner", "handrolled", "--quiet", "--out", str(tmp_path)]) == 0  # the three first cases


def test_run_exits_1_when_a_check_fails(tmp_path: Path) -> None:
    # Two model calls cannot finish vip-compound's investigation: the run stops at max_steps, its checks fail.
    argv = ["run", "--runner", "handrolled", "--case", "vip-compound", "--max-steps", "2", "--quiet"]
    code = main([*argv, "--out", str(tmp_path)])
    (result,) = json.loads((tmp_path / "results.json").read_text())["results"]
    assert result["stop_reason"] == "max_steps" and code == 1


def test_run_exits_1_when_a_runner_crashes(crashes: str, tmp_path: Path) -> None:
    argv = ["run", "--runner", crashes, "--runner", "handrolled", "--case", "vip-compound", "--quiet"]
    code = main([*argv, "--out", str(tmp_path)])
    stops = {r["runner"]: r["stop_reason"] for r in json.loads((tmp_path / "results.json").read_text())["results"]}
    assert stops == {"crashes": "error", "handrolled": "final_answer"} and code == 1


@pytest.mark.parametrize(("runner", "code"), [("handrolled", 0), ("crashes", 1)])
def test_eval_follows_the_same_rule(runner: str, code: int, crashes: str, tmp_path: Path) -> None:
    argv = ["eval", "--runner", runner, "--case", "vip-compound", "--jobs", "1", "--json", str(tmp_path / "r.json")]
    assert main(argv) == code


@pytest.mark.parametrize("command", ["run", "eval"])
def test_a_runner_that_cannot_take_the_model_is_skipped_with_one_line(
    command: str, model_server, tmp_path: Path, capsys
) -> None:
    """anthropic_tool_runner speaks only Anthropic's messages API: with an OpenAI model it is left out before
    anything runs, said once, and the command still exits 0."""
    model = ["--model", "openai:scripted", "--base-url", model_server.openai_base_url]
    out = tmp_path / "r.json"
    runners = ["--runner", "anthropic_tool_runner", "--runner", "handrolled"]
    extra = ["--quiet", "--out", str(tmp_path)] if command == "run" else ["--jobs", "1"]
    code = main([command, *runners, *model, "--case", "vip-compound", "--json", str(out), *extra])
    printed = capsys.readouterr().out
    said = [line for line in printed.splitlines() if "anthropic_tool_runner" in line]
    assert said == ["skipping anthropic_tool_runner: it cannot take openai:scripted (APIs: messages)"], printed
    assert [r["runner"] for r in json.loads(out.read_text())["results"]] == ["handrolled"]
    assert code == 0


def test_a_runner_without_the_api_asked_for_is_skipped(tmp_path: Path, capsys) -> None:
    """With the scripted model and --api chat, anthropic_tool_runner (messages only) is skipped, handrolled runs."""
    argv = [
        "run",
        "--runner",
        "anthropic_tool_runner",
        "--runner",
        "handrolled",
        "--api",
        "chat",
        "--case",
        "vip-compound",
    ]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    assert "skipping anthropic_tool_runner: it cannot take --api chat (APIs: messages)" in capsys.readouterr().out
    (result,) = json.loads((tmp_path / "results.json").read_text())["results"]
    assert (result["runner"], result["trace"]["steps"][0]["model_call"]["endpoint"]) == (
        "handrolled",
        "chat.completions",
    )


@pytest.mark.parametrize("command", ["run", "eval"])
def test_no_runner_that_can_take_the_model_is_bad_input(command: str, monkeypatch, capsys) -> None:
    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("a run started")

    monkeypatch.setattr(harness, "endpoint", started)
    monkeypatch.setattr(matrix, "run_matrix", started)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    assert main([command, "--runner", "anthropic_tool_runner", "--model", "openai:gpt-4.1-mini"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("looplab: runner 'anthropic_tool_runner' speaks only anthropic")
