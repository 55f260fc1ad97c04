"""The TypeScript-ecosystem runners (`ts_anthropic_tool_runner`, `ts_ai_sdk`, `ts_openai_agents`, `ts_langgraph`):
Node programs under the child contract.

They run against the scripted model like every runner: the seed trajectory on every wire API each
speaks, `max_steps=N` as exactly N model calls, an answer on the last allowed call as final. Around
them: a missing `node` or `npm` is one line, the child never sees a provider key, and the npm
install happens once per lockfile (a fake `npm` on PATH checks that without the network).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from looplab.adapters import registry
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import Api
from looplab.adapters.contract.pricing import Pricing
from looplab.adapters.contract.result import RunResult
from looplab.adapters.contract.runner import Probe
from looplab.adapters.runners import _child, _node
from looplab.run.harness import Endpoint, ModelChoice
from looplab.scenarios.scripted.conversation import GeminiRequest, from_gemini
from looplab.scenarios.scripted.probes import NeverStops
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Guard, Workspace, default_tools
from looplab.testing.conformance import SEED_TRAJECTORY
from tests.conftest import FIXTURE_REPO, SYSTEM_PROMPT, TASK

RUNNERS = {
    "ts_anthropic_tool_runner": "@anthropic-ai/sdk",
    "ts_ai_sdk": "ai",
    "ts_openai_agents": "@openai/agents",
    "ts_langgraph": "@langchain/langgraph",
}
CELLS = [
    pytest.param(r, api, id=f"{r}-{api}")
    for r in RUNNERS
    for api in importlib.import_module(f"looplab.adapters.runners.{r}").RUNNER.apis
]
ENDPOINT = {"chat": "chat.completions", "responses": "responses", "messages": "messages", "gemini": "generateContent"}
LOCK = json.loads((_node.TS_DIR / "package-lock.json").read_text())

needs_node = pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not on PATH: the TypeScript runners need Node.js 20 or newer"
)
needs_npm = pytest.mark.skipif(
    shutil.which("npm") is None and not _node.is_installed(_node.install_dir()),
    reason="npm is not on PATH and the Node runners' packages are not installed in the cache",
)


def adapter(runner: str) -> Any:
    return importlib.import_module(f"looplab.adapters.runners.{runner}").RUNNER


def run(
    runner: str, server: ScriptedModelServer, limits: Limits | None = None, api: Api | None = None, probe=None
) -> RunResult:
    """One run of `runner` against `server` (as `tests.runs.run_runner`, without needing the registry)."""
    limits = limits or Limits()
    a = adapter(runner)
    spec = Endpoint(ModelChoice(api=api, pricing=Pricing()), server.base_urls).spec_for(a)
    with Workspace(FIXTURE_REPO) as ws:
        guard = Guard(ws, tools=default_tools(), max_repeats=limits.max_repeats)
        return a.run(TASK, guard, limits, spec, probe, system_prompt=SYSTEM_PROMPT)


@pytest.fixture
def outcomes(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The outcome files the children write, as read by the contract."""
    seen: list[dict[str, Any]] = []
    read = _child._read

    def keep(path: Path) -> dict[str, Any] | None:
        data = read(path)
        seen.append(data or {})
        return data

    monkeypatch.setattr(_child, "_read", keep)
    return seen


# --- runs against the scripted model ------------------------------------------------------------


@needs_node
@pytest.mark.full  # installs the Node runners' packages from npm
@needs_npm
@pytest.mark.parametrize(("runner", "api"), CELLS)
def test_the_investigation_answers_with_the_seed_trajectory_on_every_api(
    runner: str, api: Api, model_server: ScriptedModelServer
) -> None:
    result = run(runner, model_server, api=api)
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert result.trace.trajectory() == SEED_TRAJECTORY
    assert result.totals.model_calls == 5 and [len(s.tool_calls) for s in result.trace.steps] == [1, 1, 1, 1, 0]
    assert {s.model_call.endpoint for s in result.trace.steps} == {ENDPOINT[api]}
    assert "apply_discount" in (result.answer or "") and "billing/discount.py" in (result.answer or "")
    # each tool call carries the model's own call id, passed to the tool server in `_meta`
    assert all(c.call_id and not c.call_id.startswith("mcp-") for c in result.trace.tool_calls)
    assert result.runner_version == LOCK["packages"][f"node_modules/{RUNNERS[runner]}"]["version"]


@pytest.mark.parametrize(
    ("response", "is_error"),
    [
        ({"name": "run_tests", "content": "FAILED tests/test_invoice.py"}, False),  # @ai-sdk/google's
        ({"error": {"details": "FAILED tests/test_invoice.py"}}, True),  # @langchain/google-genai's, status "error"
        ({"result": "FAILED tests/test_invoice.py"}, False),  # @langchain/google-genai's
    ],
)
def test_the_scripted_model_reads_the_ts_gemini_providers_function_responses(response: dict, is_error: bool) -> None:
    # Read as JSON, the investigator finds no test output in a tool's text and reads the same file again until
    # the Guard ends the run as a repetition.
    call = {"functionCall": {"id": "c1", "name": "run_tests", "args": {}}}
    request = GeminiRequest.model_validate(
        {
            "contents": [
                {"role": "user", "parts": [{"text": "task"}]},
                {"role": "model", "parts": [call]},
                {
                    "role": "user",
                    "parts": [{"functionResponse": {"id": "c1", "name": "run_tests", "response": response}}],
                },
            ]
        }
    )
    [result] = from_gemini(request).results
    assert (result.content, result.is_error) == ("FAILED tests/test_invoice.py", is_error)


@pytest.fixture(scope="module")
def never_stops() -> Any:
    with ScriptedModelServer(NeverStops()) as server:
        yield server


#: How each runner's own cap ends its loop when the last allowed call still asks for tools: it returns silently,
#: or (the Agents SDK) throws before the next call, the run's state (its history) on the error.
AT_THE_CAP = {
    "ts_anthropic_tool_runner": ("returned", None, None),
    "ts_ai_sdk": ("returned", None, None),
    "ts_openai_agents": ("raised", "@openai/agents.MaxTurnsExceededError", "MaxTurnsExceededError.state"),
    "ts_langgraph": ("returned", None, None),
}


@needs_node
@pytest.mark.full  # installs the Node runners' packages from npm
@needs_npm
@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_max_steps_n_is_n_model_calls_and_the_framework_stops_itself(runner: str, n: int, never_stops) -> None:
    result = run(runner, never_stops, Limits(max_steps=n))
    assert (result.stop_reason, result.answer) == (StopReason.MAX_STEPS, None), result.stop_detail
    assert result.totals.model_calls == n and len(result.trace.steps) == n
    # all ask for the last reply's tools too; the Guard does not run them (no model call is left to read them)
    assert [len(s.tool_calls) for s in result.trace.steps] == [1] * (n - 1) + [0]
    assert result.native_cap.value == n
    # the native cap fired, before the proxy had to refuse anything
    end = result.native_end
    assert end is not None and (end.kind, end.exception, end.history) == AT_THE_CAP[runner]
    assert result.totals.failed_model_calls == 0
    # where the program reads the framework's count of its requests, it agrees with the model boundary's
    assert runner not in REQUEST_COUNTERS or end.counters[REQUEST_COUNTERS[runner]] == n


#: A framework's own count of its model requests, where its program reads one.
REQUEST_COUNTERS = {"ts_openai_agents": "state.usage.requests", "ts_ai_sdk": "result.steps.length"}


# An answer on call k with max_steps=k, and every case: tests/testing/test_conformance.py and
# tests/scenarios/test_cases.py, which run these runners with the others.


#: What each program's SDK raises at the proxy's 403, by runner and wire API.
RAISED = {
    "ts_anthropic_tool_runner": dict.fromkeys(["messages"], "@anthropic-ai/sdk.PermissionDeniedError"),
    "ts_ai_sdk": dict.fromkeys(["chat", "responses", "messages", "gemini"], "ai.AI_APICallError"),
    "ts_openai_agents": dict.fromkeys(["chat", "responses"], "openai.PermissionDeniedError"),
    # @langchain/openai, @langchain/anthropic and @langchain/google-genai let the provider SDK's own error through
    "ts_langgraph": {
        "chat": "openai.PermissionDeniedError",
        "responses": "openai.PermissionDeniedError",
        "messages": "@anthropic-ai/sdk.PermissionDeniedError",
        "gemini": "@google/generative-ai.GoogleGenerativeAIFetchError",
    },
}


@needs_node
@pytest.mark.full  # installs the Node runners' packages from npm
@needs_npm
@pytest.mark.parametrize(("runner", "api"), CELLS)
def test_a_call_past_max_steps_is_refused_and_the_sdk_error_is_named(runner: str, api: Api, never_stops) -> None:
    a = adapter(runner)
    result = run(runner, never_stops, Limits(max_steps=2), api=api, probe=Probe(knob=a.knobs[0], value=10))
    assert (result.stop_reason, result.totals.model_calls) == (StopReason.MAX_STEPS, 2), result.stop_detail
    # The SDK raised its own error on the proxy's 403: the record says the boundary refused, and what the SDK raised.
    assert result.native_end is not None and result.native_end.kind == "refused by the model boundary"
    assert result.native_end.exception == RAISED[runner][api]
    assert "max_steps=2" in (result.native_end.message or "")


@needs_node
@pytest.mark.full  # installs the Node runners' packages from npm
@needs_npm
def test_the_ai_sdk_outcome_names_the_stop_condition_the_installed_ai_exports(
    model_server: ScriptedModelServer, outcomes: list[dict[str, Any]]
) -> None:
    result = run("ts_ai_sdk", model_server, Limits(max_steps=6))
    assert result.stop_reason == StopReason.FINAL_ANSWER
    [outcome] = outcomes
    exported = adapter("ts_ai_sdk").defaults()["stop_condition"]
    assert outcome["stop_condition"] == exported in ("stepCountIs", "isStepCount")
    assert (outcome["ended"], outcome["finish_reason"], outcome["steps"]) == ("returned", "stop", 5)


@needs_node
@pytest.mark.full  # installs the Node runners' packages from npm
@needs_npm
def test_knob_defaults_are_read_from_the_installed_packages() -> None:
    [(knob, default)] = adapter("ts_ai_sdk").knob_defaults().items()
    assert knob == "stopWhen: stepCountIs" and default.value == 1  # generateText's own default: one step
    assert "generateText" in default.source and "(1)" in default.source
    [(knob, default)] = adapter("ts_anthropic_tool_runner").knob_defaults().items()
    assert knob == "max_iterations" and default.value is None and "no cap" in default.source
    # the Agents SDK's DEFAULT_MAX_TURNS, from the file the installed @openai/agents-core keeps it in
    defaults = adapter("ts_openai_agents").knob_defaults()
    assert list(defaults) == list(adapter("ts_openai_agents").knobs)
    assert {(d.value, d.source) for d in defaults.values()} == {
        (10, "@openai/agents-core/dist/runner/constants.mjs DEFAULT_MAX_TURNS")
    }
    defaults = adapter("ts_langgraph").knob_defaults()
    assert defaults["state step counter"].value is None  # a field of the graph's own state
    assert defaults["recursionLimit"].value == 25 and "no config" in defaults["recursionLimit"].source


@needs_node
@pytest.mark.full  # installs the Node runners' packages from npm
@needs_npm
def test_the_agents_sdk_max_turns_error_handler_answers_instead_of_throwing(never_stops) -> None:
    a = adapter("ts_openai_agents")
    result = run("ts_openai_agents", never_stops, Limits(max_steps=10), probe=Probe(knob=a.knobs[1], value=3))
    assert result.totals.model_calls == 3
    assert result.native_end is not None and result.native_end.kind == "returned"
    assert result.native_end.text == "(stopped: maxTurns reached)"


@needs_node
@pytest.mark.full  # installs the Node runners' packages from npm
@needs_npm
@pytest.mark.parametrize(("limit", "calls"), [(5, 3), (6, 3)])
def test_langgraph_recursion_limit_counts_two_super_steps_a_model_call(limit: int, calls: int, never_stops) -> None:
    result = run("ts_langgraph", never_stops, Limits(max_steps=10), probe=Probe(knob="recursionLimit", value=limit))
    assert result.totals.model_calls == calls
    # the model node is super-step 2k-1, its tools node 2k: at an even limit the last call's tools ran
    assert [len(s.tool_calls) for s in result.trace.steps] == [1] * (calls - 1) + [int(limit % 2 == 0)]
    end = result.native_end
    assert end is not None and (end.kind, end.exception) == ("raised", "@langchain/langgraph.GraphRecursionError")
    assert f"Recursion limit of {limit} reached" in (end.message or "")


# --- the environment around them ----------------------------------------------------------------


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_missing_node_is_one_line(runner: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with ScriptedModelServer() as server, pytest.raises(LooplabError) as info:
        run(runner, server)
    message = str(info.value)
    assert "\n" not in message and "needs 'node'" in message and runner in message


@pytest.mark.parametrize("runner", RUNNERS)
def test_the_registry_checks_for_node(runner: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    info = registry.RUNNERS[runner]
    assert info.commands == ("node",) and info.extra == adapter(runner).extra
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not info.installed()
    with pytest.raises(LooplabError) as error:
        registry.load(runner)
    assert "\n" not in str(error.value) and "'node'" in str(error.value)


@needs_node
@pytest.mark.full  # installs the Node runners' packages from npm
@needs_npm
@pytest.mark.parametrize("runner", RUNNERS)
def test_the_child_sees_the_runs_token_and_never_a_provider_key(
    runner: str, monkeypatch: pytest.MonkeyPatch, model_server: ScriptedModelServer
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-provider-secret")
    report = (
        "const env = process.env;"
        "const names = Object.keys(env).filter((k) => /KEY|TOKEN|SECRET/.test(k)).sort();"
        "const leaked = Object.keys(env).filter((k) => env[k].includes('provider-secret'));"
        "require('fs').writeFileSync(env.LOOPLAB_RESULT,"
        " JSON.stringify({ ended: 'returned', text: JSON.stringify([names, leaked]) }));"
    )
    a = adapter(runner)
    node_program = a.command()  # the real `node PROGRAM`, under the same environment builder
    monkeypatch.setattr(a, "command", lambda session=None: [node_program[0], "-e", report])
    result = run(runner, model_server)
    assert result.native_end is not None
    names, leaked = json.loads(result.native_end.text or "null")
    assert names == ["LOOPLAB_TOKEN"] and leaked == []


@needs_node
@pytest.mark.full  # installs the Node runners' packages from npm
@needs_npm
def test_the_installed_packages_are_reused_without_npm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    folder = _node.ensure_installed()
    node = Path(shutil.which("node") or "node")
    only_node = tmp_path / "bin"
    only_node.mkdir()
    (only_node / "node").symlink_to(node)
    monkeypatch.setenv("PATH", str(only_node))  # no npm: a second install would fail
    assert _node.ensure_installed() == folder
    assert _node.package_version("ai") == LOCK["packages"]["node_modules/ai"]["version"]


# --- the install, with a fake npm ---------------------------------------------------------------

FAKE_NPM = """#!/bin/sh
echo "$*" >> "{log}"
env | grep -c PROVIDER_SECRET_VALUE >> "{log}.env"
sleep {sleep}
{body}
"""


def _fake_npm(tmp_path: Path, body: str = "mkdir node_modules", sleep: float = 0.0) -> Path:
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "npm.log"
    npm = bin_dir / "npm"
    npm.write_text(FAKE_NPM.format(log=log, sleep=sleep, body=body))
    npm.chmod(npm.stat().st_mode | stat.S_IXUSR)
    return log


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    cache = tmp_path / "node-cache"
    monkeypatch.setenv(_node.CACHE_ENV, str(cache))
    monkeypatch.setenv("PATH", f"{tmp_path / 'fake-bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("OPENAI_API_KEY", "PROVIDER_SECRET_VALUE")
    return cache


@pytest.mark.skipif(os.name != "posix", reason="the fake npm is a shell script")
def test_npm_ci_runs_once_per_lockfile_and_the_folder_is_reused(fresh_cache: Path, tmp_path: Path) -> None:
    log = _fake_npm(tmp_path)
    first = _node.ensure_installed()
    second = _node.ensure_installed()
    assert first == second == fresh_cache / _node.lock_hash()
    assert log.read_text().splitlines() == ["ci --no-audit --no-fund --ignore-scripts"]
    assert Path(f"{log}.env").read_text().split() == ["0"]  # npm ran without the provider key
    shipped = sorted(p.name for p in _node.TS_DIR.glob("*.mjs"))
    assert shipped and all((first / name).read_bytes() == (_node.TS_DIR / name).read_bytes() for name in shipped)
    assert (first / "package-lock.json").read_bytes() == (_node.TS_DIR / "package-lock.json").read_bytes()


@pytest.mark.skipif(os.name != "posix", reason="the fake npm is a shell script")
def test_the_first_install_says_what_it_fetches_before_and_how_long_it_took_after(
    fresh_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An npm that fails: the announcement came before it ran, and nothing claims the install was done.
    _fake_npm(tmp_path, body='echo "npm ERR! network request failed" >&2; exit 1')
    with pytest.raises(LooplabError):
        _node.ensure_installed()
    failed = capsys.readouterr().err.splitlines()
    assert len(failed) == 3, failed

    _fake_npm(tmp_path, sleep=0.2)
    folder = _node.ensure_installed()
    *before, after = capsys.readouterr().err.splitlines()
    assert before == failed
    said = " ".join(before)
    # What: every package package.json names, and the lockfile's count with their dependencies; where; how much and
    # how long, as the measured approximations; and the bound.
    named = json.loads((_node.TS_DIR / "package.json").read_text(encoding="utf-8"))["dependencies"]
    assert before[0].startswith(f"looplab: installing the Node runners' {len(named)} npm packages once ")
    assert named and all(f" {name}," in said or f" {name} " in said for name in named)
    pinned = sum(1 for path in LOCK["packages"] if path.startswith("node_modules/"))
    assert pinned > len(named) and f"({pinned} with their dependencies)" in before[0]
    assert f"about {_node.INSTALL_DOWNLOAD_MB} MB to download, {_node.INSTALL_DISK_MB} MB on disk, " in before[0]
    assert before[0].endswith(f" {_node.INSTALL_SECONDS} s")
    assert before[2] == f"  npm ci into {folder} (stopped after {_node.INSTALL_TIMEOUT_S:g} s)"
    done = r"looplab: installed the Node runners' npm packages in ([\d.]+) s; later runs reuse them"
    took = re.fullmatch(done, after)
    assert took and float(took[1]) >= 0.2, after

    assert _node.ensure_installed() == folder
    assert capsys.readouterr().err == "", "a run reusing the install says nothing of it"


@pytest.mark.skipif(os.name != "posix", reason="the fake npm is a shell script")
def test_other_versions_install_over_the_pins_in_a_folder_of_their_own(
    fresh_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _fake_npm(tmp_path, body="mkdir -p node_modules")
    pinned = _node.ensure_installed()
    monkeypatch.setenv(_node.VERSIONS_ENV, "ai@6.0.0 @ai-sdk/openai@3.0.0")  # as the nox oldest session asks
    other = _node.ensure_installed()
    assert other != pinned and other.parent == pinned.parent
    assert log.read_text().splitlines() == [
        "ci --no-audit --no-fund --ignore-scripts",
        "ci --no-audit --no-fund --ignore-scripts",
        "install --no-save --no-audit --no-fund --ignore-scripts ai@6.0.0 @ai-sdk/openai@3.0.0",
    ]


@pytest.mark.skipif(os.name != "posix", reason="the fake npm is a shell script")
def test_two_installs_at_once_run_npm_once(fresh_cache: Path, tmp_path: Path) -> None:
    log = _fake_npm(tmp_path, sleep=0.5)
    folders: list[Path] = []
    threads = [threading.Thread(target=lambda: folders.append(_node.ensure_installed())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(folders) == 3 and len(set(folders)) == 1
    assert len(log.read_text().splitlines()) == 1


@pytest.mark.skipif(os.name != "posix", reason="the fake npm is a shell script")
def test_a_failed_install_is_one_line_and_is_tried_again(fresh_cache: Path, tmp_path: Path) -> None:
    log = _fake_npm(tmp_path, body='echo "npm ERR! network request failed" >&2; exit 1')
    with pytest.raises(LooplabError) as info:
        _node.ensure_installed()
    message = str(info.value)
    assert "\n" not in message and "npm ci exited 1" in message and "npm ERR! network request failed" in message
    assert not _node.is_installed(fresh_cache / _node.lock_hash())
    _fake_npm(tmp_path)  # the registry is back
    _node.ensure_installed()
    assert len(log.read_text().splitlines()) == 2


def test_a_missing_npm_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(_node.CACHE_ENV, str(tmp_path / "node-cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LooplabError) as info:
        _node.ensure_installed()
    assert "\n" not in str(info.value) and "needs 'npm'" in str(info.value)


@pytest.mark.parametrize("where", ["the cache", "a folder above it"])
def test_a_cache_that_is_a_file_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str
) -> None:
    file = tmp_path / "node-cache"
    file.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv(_node.CACHE_ENV, str(file if where == "the cache" else file / "below"))
    with pytest.raises(LooplabError) as info:
        _node.ensure_installed()
    message = str(info.value)
    assert "\n" not in message and message.startswith("Node package cache ") and _node.CACHE_ENV in message
    assert file.read_text(encoding="utf-8") == "not a folder"


@pytest.mark.skipif(os.name != "posix", reason="the fake node is a shell script")
def test_a_node_older_than_20_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    node = tmp_path / "node"
    node.write_text("#!/bin/sh\necho v18.20.4\n")
    node.chmod(node.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LooplabError) as info:
        adapter("ts_ai_sdk").command()
    message = str(info.value)
    assert "\n" not in message and "Node.js 20 or newer" in message and "v18.20.4" in message
