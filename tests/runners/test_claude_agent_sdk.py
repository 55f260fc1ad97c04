"""The `claude_agent_sdk` runner: the Claude Code CLI with the model behind the proxy and the tools behind the Guard.

The shared checks (conformance, cases, faults) run it like every runner; these check what is its own: a model
that asks for one of Claude Code's built-in tools gets a refusal and nothing runs, the CLI makes no model call of
its own beyond the loop's and never reads the user's settings, `max_turns` counts model calls, and the CLI's
environment carries neither the caller's keys nor anything that would route it past the proxy.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("claude_agent_sdk", reason="the claude-agent-sdk extra is not installed")

from looplab.adapters.contract.limits import Limits, StopReason  # noqa: E402
from looplab.adapters.contract.pricing import Pricing  # noqa: E402
from looplab.adapters.contract.result import RunResult  # noqa: E402
from looplab.adapters.contract.runner import Probe  # noqa: E402
from looplab.adapters.runners import _claude_cli, claude_agent_sdk  # noqa: E402
from looplab.run.harness import Endpoint, ModelChoice  # noqa: E402
from looplab.scenarios.scripted.conversation import Conversation  # noqa: E402
from looplab.scenarios.scripted.policy import Call, Decision  # noqa: E402
from looplab.scenarios.scripted.probes import NeverStops  # noqa: E402
from looplab.scenarios.scripted.requests import RequestLog  # noqa: E402
from looplab.scenarios.scripted.server import ScriptedModelServer  # noqa: E402
from looplab.shared_tools import Guard, Workspace, default_tools  # noqa: E402
from tests.conftest import FIXTURE_REPO, SYSTEM_PROMPT, TASK  # noqa: E402

RUNNER = claude_agent_sdk.RUNNER


def run(server: ScriptedModelServer, limits: Limits | None = None, probe: Probe | None = None) -> RunResult:
    """One run against `server`, in a fresh workspace of the fixture repo."""
    limits = limits or Limits(max_seconds=60)
    urls = {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url}
    spec = Endpoint(ModelChoice(pricing=Pricing()), urls).spec_for(RUNNER)
    with Workspace(FIXTURE_REPO) as ws:
        guard = Guard(ws, tools=default_tools(), max_repeats=limits.max_repeats)
        return RUNNER.run(TASK, guard, limits, spec, probe, system_prompt=SYSTEM_PROMPT)


@pytest.mark.full  # starts the Claude Code CLI: seconds a run
def test_a_built_in_tool_the_model_asks_for_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker, written = tmp_path / "ran", tmp_path / "written"
    seen: list[tuple[str, bool, str]] = []

    def asks_for_built_ins(conv: Conversation) -> Decision:
        seen[:] = [(r.call.name, r.is_error, r.content) for r in conv.results]
        turn = conv.assistant_turns + 1
        if turn == 1:
            return Decision((Call("Bash", {"command": f"touch {marker}"}),))
        if turn == 2:
            return Decision((Call("Write", {"file_path": str(written), "content": "x"}),))
        if turn == 3:
            return Decision((Call("search_code", {"query": "apply_discount"}),))
        return Decision(answer="done")

    with ScriptedModelServer(asks_for_built_ins) as server:
        result = run(server)

    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    # The model boundary recorded each request, built-in tools included ...
    assert [s.model_call.tool_calls_requested for s in result.trace.steps] == [["Bash"], ["Write"], ["search_code"], []]
    # ... the model got an error result for each built-in, and the Guard ran only its own tool.
    assert [(name, error) for name, error, _ in seen] == [("Bash", True), ("Write", True), ("search_code", False)]
    assert all("No such tool available" in text for _, error, text in seen if error)
    assert [c.name for c in result.trace.tool_calls] == ["search_code"]
    assert not marker.exists() and not written.exists()


@pytest.mark.full  # starts the Claude Code CLI: seconds a run
def test_the_cli_makes_only_the_loops_model_calls_and_ignores_the_users_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A user whose settings would send the model elsewhere and allow Bash outright, and whose keys are set.
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    settings = {"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, "permissions": {"allow": ["Bash"]}}
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    requests = RequestLog()
    with ScriptedModelServer(wrap=requests.wrap) as server:
        result = run(server)

    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert result.totals.failed_model_calls == 0
    # Every request that reached the model is one of the run's recorded model calls: no title, summary,
    # token-counting or quota call of the CLI's own, and none through the user's settings.
    assert [(r.method, r.path) for r in requests.seen] == [("POST", "/v1/messages")] * len(result.trace.steps)
    assert len(requests.seen) == result.totals.model_calls == 5
    # The model sees the Guard's tools under their own names, and none of Claude Code's.
    offered = {tuple(sorted(t["name"] for t in body["tools"])) for body in requests.bodies()}
    assert offered == {tuple(sorted(t.name for t in default_tools()))}
    assert all(body["max_tokens"] == _claude_cli.MESSAGES_MAX_TOKENS for body in requests.bodies())


@pytest.mark.full  # starts the Claude Code CLI: seconds a run
@pytest.mark.parametrize("turns", [1, 3])
def test_max_turns_counts_model_calls(turns: int) -> None:
    with ScriptedModelServer(NeverStops()) as server:
        result = run(server, Limits(max_steps=turns + 3, max_seconds=60), Probe(knob=RUNNER.knobs[0], value=turns))
    assert result.totals.model_calls == turns
    assert result.stop_reason == StopReason.ERROR  # the CLI's cap, not looplab's: max_steps was not reached
    # The CLI ends with an `error_max_turns` result and exits 1, which the SDK raises as `ResultError`.
    end = result.native_end
    assert end is not None and (end.kind, end.exception) == ("raised", "claude_agent_sdk._errors.ResultError")
    assert f"maximum number of turns ({turns})" in (end.message or "")
    # The CLI runs the tools its last allowed call asked for, then stops (max_steps was not spent, so the Guard ran
    # them; mapped from max_steps, the Guard's cutoff refuses them, as the conformance checks show).
    assert [len(step.tool_calls) for step in result.trace.steps] == [1] * turns


def test_the_cli_environment_keeps_the_callers_variables_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        "ANTHROPIC_API_KEY": "sk-caller",
        "OPENAI_API_KEY": "sk-other",
        "CLAUDE_CODE_USE_BEDROCK": "1",
        "ANTHROPIC_AUTH_TOKEN": "oauth",
        "HTTPS_PROXY": "http://proxy.invalid:3128",
    }.items():
        monkeypatch.setenv(name, value)
    env = _claude_cli.cli_environment(tmp_path, "http://127.0.0.1:1234", "run-token", retries=3)
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "3"  # looplab's retry policy, not the CLI's ten
    assert (env["ANTHROPIC_BASE_URL"], env["ANTHROPIC_API_KEY"]) == ("http://127.0.0.1:1234", "run-token")
    assert env["OPENAI_API_KEY"] == env["CLAUDE_CODE_USE_BEDROCK"] == env["ANTHROPIC_AUTH_TOKEN"] == ""
    assert env["HTTPS_PROXY"] == ""
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path) and env["CLAUDE_CONFIG_DIR"] == str(tmp_path / ".claude")
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == env["DISABLE_TELEMETRY"] == "1"
    assert env["CLAUDE_CODE_SIMPLE"] == env["CLAUDE_AGENT_SDK_MCP_NO_PREFIX"] == "1"


def test_a_missing_bundled_cli_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from looplab.adapters.contract.errors import LooplabError

    monkeypatch.setattr(_claude_cli, "BUNDLED_CLI", tmp_path / "claude")
    with ScriptedModelServer() as server, pytest.raises(LooplabError) as info:
        run(server)
    assert "\n" not in str(info.value) and "bundles" in str(info.value)


def test_knob_default_is_read_from_the_installed_sdk() -> None:
    [(knob, default)] = RUNNER.knob_defaults().items()
    assert knob == "ClaudeAgentOptions(max_turns=)" and default.value is None
    assert "ClaudeAgentOptions" in default.source and "max_turns=None" in default.source
