"""`--runner external`: a team's own agent, in its own process, measured like every runner."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from looplab import cli
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.runners.external import EXTERNAL_COMMAND_ENV
from looplab.scenarios.scripted.probes import AnswersOnCall, NeverStops
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.testing.conformance import SEED_TRAJECTORY
from tests.paths import REPO
from tests.runs import run_runner

EXAMPLE = REPO / "examples" / "stdlib_agent.py"
AGENT = f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE))}"


@pytest.fixture
def agent(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(EXTERNAL_COMMAND_ENV, AGENT)
    return AGENT


def test_the_stdlib_agent_investigates_like_every_runner(agent: str, model_server: ScriptedModelServer) -> None:
    result = run_runner("external", model_server)
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert result.trace.trajectory() == SEED_TRAJECTORY
    assert "apply_discount" in (result.answer or "")
    assert [len(s.tool_calls) for s in result.trace.steps] == [1, 1, 1, 1, 0]  # each tool call under its step
    assert result.native_end is not None and result.native_end.kind == "returned"


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_max_steps_n_is_n_model_calls_and_keeps_the_partial_trace(agent: str, n: int) -> None:
    with ScriptedModelServer(NeverStops()) as server:
        result = run_runner("external", server, Limits(max_steps=n))
    assert (result.stop_reason, result.answer) == (StopReason.MAX_STEPS, None), result.stop_detail
    assert result.totals.model_calls == n and len(result.trace.steps) == n
    assert result.native_cap.knob == "LOOPLAB_CAP" and result.native_cap.value == n


def test_an_answer_on_the_last_allowed_call_is_final(agent: str) -> None:
    with ScriptedModelServer(AnswersOnCall(3)) as server:
        result = run_runner("external", server, Limits(max_steps=3))
    assert result.stop_reason == StopReason.FINAL_ANSWER and result.answer == "answered on model call 3"


@pytest.mark.full  # a child process per run: the investigation, max_steps and the last call stay fast
def test_a_request_past_the_cap_is_refused_and_the_agent_says_how_it_ended(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # An agent that ignores LOOPLAB_CAP: the proxy refuses its third call; the run is still max_steps.
    greedy = tmp_path / "greedy_agent.py"
    greedy.write_text(EXAMPLE.read_text().replace('int(E["LOOPLAB_CAP"] or 12)', "50"))
    monkeypatch.setenv(EXTERNAL_COMMAND_ENV, f"{shlex.quote(sys.executable)} {shlex.quote(str(greedy))}")
    with ScriptedModelServer(NeverStops()) as server:
        result = run_runner("external", server, Limits(max_steps=2))
    assert (result.stop_reason, result.totals.model_calls) == (StopReason.MAX_STEPS, 2)
    # The agent raised (urllib's HTTPError on the 403): the record says the model boundary refused it, and why.
    assert result.native_end is not None and result.native_end.kind == "refused by the model boundary"
    assert "max_steps=2" in (result.native_end.message or "")


@pytest.mark.full  # a child process per run: the investigation, max_steps and the last call stay fast
def test_the_child_sees_the_runs_token_and_never_a_provider_key(
    monkeypatch: pytest.MonkeyPatch, model_server: ScriptedModelServer
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-provider-secret")
    report = (
        "import os, json; names = sorted(k for k in os.environ if 'KEY' in k or 'TOKEN' in k or 'SECRET' in k);"
        " leaked = [k for k, v in os.environ.items() if 'provider-secret' in v];"
        " outcome = {'ended': 'returned', 'text': json.dumps([names, leaked])};"
        " json.dump(outcome, open(os.environ['LOOPLAB_RESULT'], 'w'))"
    )
    monkeypatch.setenv(EXTERNAL_COMMAND_ENV, f"{shlex.quote(sys.executable)} -c {shlex.quote(report)}")
    result = run_runner("external", model_server)
    names, leaked = json.loads(result.native_end.text or "null")  # type: ignore[union-attr]
    assert names == ["LOOPLAB_TOKEN"] and leaked == []


@pytest.mark.full  # a child process per run: the investigation, max_steps and the last call stay fast
def test_a_child_that_writes_no_outcome_ends_as_error_with_its_stderr(
    monkeypatch: pytest.MonkeyPatch, model_server: ScriptedModelServer
) -> None:
    crash = "import sys; sys.stderr.write('the agent fell over\\n'); sys.exit(3)"
    monkeypatch.setenv(EXTERNAL_COMMAND_ENV, f"{shlex.quote(sys.executable)} -c {shlex.quote(crash)}")
    result = run_runner("external", model_server)
    assert result.stop_reason == StopReason.ERROR and "exited 3" in (result.stop_detail or "")
    assert "the agent fell over" in (result.stop_detail or "")
    assert any("the agent fell over" in w for w in result.warnings)


@pytest.mark.full  # a child process per run: the investigation, max_steps and the last call stay fast
def test_the_cli_runs_an_external_agent_and_checks_it_like_any_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EXTERNAL_COMMAND_ENV, "")  # restored afterwards: --cmd sets it for the run
    out = tmp_path / "out"
    argv = ["run", "--runner", "external", "--cmd", AGENT, "--case", "vip-compound", "--quiet", "--out", str(out)]
    assert cli.main(argv) == 0
    (result,) = json.loads((out / "results.json").read_text())["results"]
    assert result["runner"] == "external" and result["stop_reason"] == "final_answer"


def test_a_relative_path_in_the_command_means_the_directory_looplab_was_started_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_server: ScriptedModelServer
) -> None:
    """`--cmd 'python examples/stdlib_agent.py'` typed in a project folder runs that folder's agent."""
    project = tmp_path / "project"
    (project / "examples").mkdir(parents=True)
    (project / "examples" / "stdlib_agent.py").write_text(EXAMPLE.read_text())
    monkeypatch.chdir(project)
    monkeypatch.setenv(EXTERNAL_COMMAND_ENV, f"{shlex.quote(sys.executable)} examples/stdlib_agent.py")
    result = run_runner("external", model_server)
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert result.trace.trajectory() == SEED_TRAJECTORY


def test_external_without_a_command_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--runner", "external"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--cmd" in err


def _records(result) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(c.name, c.args, c.outcome, c.is_error, c.call_id, c.result_preview) for c in result.trace.tool_calls]


@pytest.mark.full  # a child process per run: the investigation, max_steps and the last call stay fast
@pytest.mark.parametrize("case", ["vip-compound", "wrong-path", "path-escape"])
def test_the_same_loop_in_process_and_over_mcp_leaves_the_same_records(agent: str, case: str) -> None:
    """The hand-rolled Chat Completions loop in-process, and the same loop in another process (the stdlib
    agent: tools over MCP, the model through the proxy): the same trajectory and the same tool records."""
    from looplab.run.harness import Endpoint, ModelChoice, run_one
    from looplab.scenarios.cases import load_cases

    with ScriptedModelServer() as server:
        where = Endpoint(ModelChoice(api="chat"), {"openai": server.openai_base_url, "anthropic": "unused"})
        inside = run_one("handrolled", load_cases()[case], where).result
        outside = run_one("external", load_cases()[case], where).result
    assert inside is not None and outside is not None
    assert outside.trace.trajectory() == inside.trace.trajectory()
    assert _records(outside) == _records(inside)
    assert (outside.stop_reason, outside.answer) == (inside.stop_reason, inside.answer)
