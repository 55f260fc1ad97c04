"""The hand-rolled loop end to end against the scripted model, on both SDKs."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.contract.result import RunResult
from looplab.adapters.runners.handrolled import RUNNER
from looplab.scenarios.scripted.conversation import Conversation
from looplab.scenarios.scripted.policy import Call, Decision
from looplab.scenarios.scripted.probes import AnswersOnCall, NeverStops
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Guard, Workspace, tree_fingerprint
from tests.conftest import FIXTURE_REPO, SYSTEM_PROMPT, TASK

PROVIDERS = ["anthropic", "openai"]
SEED_TRAJECTORY = [
    "run_tests(tests/test_invoice.py::test_invoice_total)",
    "read_file(tests/test_invoice.py)",
    "search_code(def apply_discount)",
    "read_file(billing/discount.py)",
]


def run(server: ScriptedModelServer, provider: str, limits: Limits | None = None, task: str = TASK) -> RunResult:
    limits = limits or Limits()
    url = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    with Workspace(FIXTURE_REPO) as ws:
        guard = Guard(ws, max_repeats=limits.max_repeats)
        spec = ModelSpec(provider, "scripted", url, "unused")
        return RUNNER.run(task, guard, limits, spec, system_prompt=SYSTEM_PROMPT)


@pytest.fixture(scope="module")
def never_stops() -> ScriptedModelServer:
    with ScriptedModelServer(NeverStops()) as server:
        yield server


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_investigation_follows_the_seed_trajectory_and_names_the_bug(model_server, provider: str) -> None:
    before = tree_fingerprint(FIXTURE_REPO)
    result = run(model_server, provider)
    assert result.stop_reason == StopReason.FINAL_ANSWER
    assert result.trace.trajectory() == SEED_TRAJECTORY
    assert "apply_discount" in result.answer and "billing/discount.py" in result.answer and "compound" in result.answer
    assert result.totals.model_calls == 5 and result.totals.tool_calls == 4
    assert [len(s.tool_calls) for s in result.trace.steps] == [1, 1, 1, 1, 0]
    assert tree_fingerprint(FIXTURE_REPO) == before


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_record_has_the_normalized_shape(model_server, provider: str) -> None:
    data = run(model_server, provider).model_dump(mode="json")
    assert {
        "runner",
        "runner_version",
        "case",
        "model",
        "stop_reason",
        "answer",
        "native_cap",
        "totals",
        "trace",
    } <= set(data)
    assert data["runner"] == "handrolled" and data["runner_version"].startswith(provider)
    assert data["native_cap"] == {"knob": "for step in range(max_steps)", "value": 12}
    assert set(data["totals"]) >= {"model_calls", "tool_calls", "input_tokens", "output_tokens", "cost_usd", "wall_s"}
    step = data["trace"]["steps"][0]
    assert {"input_tokens", "output_tokens", "latency_s", "finish_reason"} <= set(step["model_call"])
    assert set(step["tool_calls"][0]) >= {"name", "args", "is_error", "result_preview", "duration_s"}
    assert data["totals"]["input_tokens"] == sum(s["model_call"]["input_tokens"] for s in data["trace"]["steps"])


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_max_steps_stops_after_n_model_calls_with_the_partial_trace(never_stops, provider: str, n: int) -> None:
    result = run(never_stops, provider, Limits(max_steps=n))
    assert (result.stop_reason, result.answer) == (StopReason.MAX_STEPS, None)
    assert result.totals.model_calls == n and len(result.trace.steps) == n
    # each call's tool ran but the last one's: no model call was left to read its result
    assert [len(step.tool_calls) for step in result.trace.steps] == [1] * (n - 1) + [0]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("k", [1, 3])
def test_an_answer_on_the_last_allowed_call_is_final(provider: str, k: int) -> None:
    with ScriptedModelServer(AnswersOnCall(k)) as server:
        result = run(server, provider, Limits(max_steps=k))
    assert result.stop_reason == StopReason.FINAL_ANSWER and result.answer == f"answered on model call {k}"
    assert result.totals.model_calls == k


def _same_read_forever(conv: Conversation) -> Decision:
    return Decision((Call("read_file", {"path": "README.md"}),))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_repetition_ends_the_run_with_the_repeats_in_the_trace(provider: str) -> None:
    with ScriptedModelServer(_same_read_forever) as server:
        result = run(server, provider, Limits(max_repeats=3))
    assert (result.stop_reason, result.answer) == (StopReason.REPETITION, None)
    assert [c.outcome for c in result.trace.tool_calls] == ["ok", "ok", "repetition"]
    assert result.totals.model_calls == 3


def _two_at_once(conv: Conversation) -> Decision:
    if conv.results:
        return Decision(answer="read both")
    return Decision(
        (Call("read_file", {"path": "tests/test_invoice.py"}), Call("read_file", {"path": "billing/discount.py"}))
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_parallel_tool_calls_share_one_step(provider: str) -> None:
    with ScriptedModelServer(_two_at_once) as server:
        result = run(server, provider)
    assert result.stop_reason == StopReason.FINAL_ANSWER
    assert [[c.args["path"] for c in s.tool_calls] for s in result.trace.steps] == [
        ["tests/test_invoice.py", "billing/discount.py"],
        [],
    ]


def _bad_calls_then_answer(conv: Conversation) -> Decision:
    script: list[Callable[[], Decision]] = [
        lambda: Decision((Call("read_file", {"path": "../../etc/passwd"}), Call("read_file", {"path": ".env"}))),
        lambda: Decision((Call("read_file", {"path": "tests/test_invoce.py"}),)),
        lambda: Decision(answer=" | ".join(r.content.split(":")[0] for r in conv.results)),
    ]
    return script[min(conv.assistant_turns, 2)]()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_errors_go_back_to_the_model_as_observations(provider: str) -> None:
    with ScriptedModelServer(_bad_calls_then_answer) as server:
        result = run(server, provider)
    assert result.stop_reason == StopReason.FINAL_ANSWER
    assert result.answer == "PathRefused | PathRefused | FileNotFoundError"
    assert [c.is_error for c in result.trace.tool_calls] == [True, True, True]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_unreachable_model_ends_the_run_as_error(provider: str) -> None:
    with Workspace(FIXTURE_REPO) as ws:
        spec = ModelSpec(
            provider, "scripted", "http://127.0.0.1:9/v1" if provider == "openai" else "http://127.0.0.1:9", "unused"
        )
        result = RUNNER.run(TASK, Guard(ws), Limits(max_seconds=5), spec, system_prompt=SYSTEM_PROMPT)
    assert (result.stop_reason, result.answer, result.totals.model_calls) == (StopReason.ERROR, None, 0)
    assert "Connection" in result.stop_detail


def test_a_cost_budget_stops_before_the_next_call(model_server) -> None:
    from looplab.adapters.contract.pricing import Pricing

    with Workspace(FIXTURE_REPO) as ws:
        spec = ModelSpec(
            "anthropic",
            "scripted",
            model_server.anthropic_base_url,
            "unused",
            pricing=Pricing(input_per_mtok=1000.0, output_per_mtok=1000.0),
        )
        result = RUNNER.run(TASK, Guard(ws), Limits(max_cost_usd=0.5), spec, system_prompt=SYSTEM_PROMPT)
    assert (result.stop_reason, result.answer) == (StopReason.BUDGET, None)
    assert 0 < result.totals.model_calls < 5 and result.totals.cost_usd <= 0.5
