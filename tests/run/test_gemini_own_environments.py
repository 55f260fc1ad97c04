"""Gemini's API on the runners in environments of their own: CrewAI, LlamaIndex and Microsoft Agent Framework.

Each speaks it through its framework's own Gemini class on the session's recorded google-genai client. These tests
run where a runner is installed, its runner environment: the last test builds each (cached) and runs the others
there; the shared suites (conformance on every declared API, every case, caps) run there through
tests/run/test_own_environments.py.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import pytest

from looplab.adapters import registry
from looplab.adapters.boundary.processes import run_bounded
from looplab.adapters.contract.declaration import findable
from looplab.adapters.contract.errors import MissingExtra
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.scenarios.scripted.faults import BROKEN
from looplab.scenarios.scripted.probes import NeverStops
from looplab.scenarios.scripted.requests import RequestLog
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import default_tools
from looplab.testing.runs import run_runner
from tests.paths import REPO
from tests.runs import run_behind_faults

RUNNERS = ("crewai", "llamaindex", "ms_agent_framework")
ROOT = REPO
#: Building an environment from PyPI (under 90 s with uv) and running this file's tests for its runner there.
BOUND_S = 900.0
#: The module each runner's Gemini class comes from, and the extra that brings it.
GEMINI_MODULE = {
    "crewai": ("google.genai", "crewai"),
    "llamaindex": ("llama_index.llms.google_genai", "llamaindex"),
    "ms_agent_framework": ("agent_framework_gemini", "ms-agent-framework"),
}


def _installed(runner: str) -> bool:
    return all(findable(m) for m in registry.RUNNERS[runner].requires)


def _here(runner: str) -> Any:
    """`runner` as a parameter whose tests run only where the runner is installed."""
    skip = pytest.mark.skipif(not _installed(runner), reason="runs in the runner's own environment (the last test)")
    return pytest.param(runner, marks=skip, id=runner)


HERE = [_here(r) for r in RUNNERS]
#: Where a function declaration carries its parameters' schema.
SCHEMA_FIELDS = ("parameters_json_schema", "parametersJsonSchema", "parameters")


@pytest.mark.parametrize("runner", HERE)
def test_every_request_is_a_generate_content_declaring_each_tool_with_its_own_json_schema(runner: str) -> None:
    """The scripted model is not named `gemini-...`: CrewAI would offer it no tools; LlamaIndex would declare each
    tool from its default pydantic class (one `input` string) and ask the API for the model's limits first."""
    requests = RequestLog()
    with ScriptedModelServer(wrap=requests.wrap) as server:
        result = run_runner(runner, server, api="gemini")
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    generated = requests.of("generateContent", "streamGenerateContent")
    assert len(generated) == result.totals.model_calls == 5
    # CrewAI also counts each tool result's tokens with Gemini's API (the scripted model has no such method: 404)
    assert len(requests.of("countTokens")) == (len(result.trace.tool_calls) if runner == "crewai" else 0)
    assert len(requests.seen) == len(generated) + len(requests.of("countTokens"))
    wanted = {t.name: t.parameters for t in default_tools()}
    for body in generated:
        assert body is not None
        declared = [d for tool in body["tools"] for d in tool.get("functionDeclarations", [])]
        # A JSON schema as given (google-genai writes that field's name in snake case), or Gemini's own `parameters`.
        schemas = {d["name"]: next(d[k] for k in SCHEMA_FIELDS if k in d) for d in declared}
        assert set(schemas) == set(wanted)
        for name, schema in schemas.items():
            assert set(schema["properties"]) == set(wanted[name]["properties"]), name
            assert set(schema.get("required", [])) == set(wanted[name].get("required", [])), name


@pytest.mark.parametrize("runner", HERE)
@pytest.mark.parametrize("max_steps", [1, 3])
def test_max_steps_n_is_n_generate_content_calls(runner: str, max_steps: int) -> None:
    requests = RequestLog()
    with ScriptedModelServer(NeverStops(), wrap=requests.wrap) as server:
        result = run_runner(runner, server, Limits(max_steps=max_steps), api="gemini")
    assert (result.stop_reason, result.answer) == (StopReason.MAX_STEPS, None), result.stop_detail
    assert len(result.trace.steps) == max_steps
    assert {s.model_call.endpoint for s in result.trace.steps} == {"generateContent"}
    # a call past the cap is refused before it leaves the process
    assert len(requests.of("generateContent", "streamGenerateContent")) == max_steps


@pytest.mark.parametrize("runner", HERE)
def test_gemini_without_its_module_names_the_extra_in_one_line(
    runner: str, monkeypatch: pytest.MonkeyPatch, model_server: ScriptedModelServer
) -> None:
    module, extra = GEMINI_MODULE[runner]
    monkeypatch.setitem(sys.modules, module, None)  # as if the extra's Gemini package were missing
    if runner == "llamaindex":  # its Gemini class is made once, on first use
        from looplab.adapters.runners import _llamaindex

        monkeypatch.setattr(_llamaindex, "_gemini_llm_class", _llamaindex._gemini_llm_class.__wrapped__)
    with pytest.raises(MissingExtra) as info:
        run_runner(runner, model_server, api="gemini")
    assert str(info.value) == f"runner {runner!r} needs 'google.genai': pip install 'looplab[{extra}]'"


@pytest.mark.full  # builds the runner environments
@pytest.mark.parametrize("runner", RUNNERS)
def test_the_tests_above_pass_in_each_runners_own_environment(runner: str) -> None:
    if _installed(runner):
        pytest.skip("the runner is installed here: the tests above ran")
    from looplab.run.environments import ensure, source_root, spec_for

    env = ensure(spec_for(runner))
    # As tests/run/test_own_environments.py runs its suites: looplab from `source_root`, the tests from this tree.
    child = env.child_env() | {"PYTHONPATH": os.pathsep.join([str(source_root()), str(ROOT)])}
    command = [str(env.python), "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider", "--import-mode=append"]
    command += ["-k", f"{runner} and not in_each_runners"]
    code, lines = run_bounded(command, child, ROOT, BOUND_S)
    summary = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed)", line)), "")
    tail = "\n".join(lines[-30:])
    # Every test of this runner passed: nothing failed or was skipped.
    assert code == 0 and re.fullmatch(r"=* ?6 passed, \d+ deselected in .*", summary.strip()), tail


@pytest.mark.parametrize("runner", HERE)
def test_a_reply_that_breaks_off_ends_the_run_as_error_with_the_attempt(runner: str) -> None:
    """As on the other Gemini runners: no layer of the framework retries it."""
    result, _ = run_behind_faults(runner, [BROKEN], api="gemini")
    assert (result.stop_reason, result.answer, result.totals.model_calls) == (StopReason.ERROR, None, 0)
    [attempt] = result.trace.unanswered
    assert attempt.error.startswith("the reply broke off after 11 bytes")


@pytest.mark.parametrize("runner", HERE)
def test_retries_zero_is_one_attempt(runner: str) -> None:
    """The session's google-genai client makes the only retries: the framework's own are off."""
    result, faults = run_behind_faults(runner, [], then=500, api="gemini", retries=0)
    assert result.stop_reason == StopReason.ERROR and faults.served == [500]
    assert [a.status for a in result.trace.unanswered] == [500]
