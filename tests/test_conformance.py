"""One Limits, one behaviour: every runner against the same scripted policies.

Model calls are counted at the model boundary (the recorder), never by the
framework, so `max_steps=N` is checked against what went over the wire.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import adapters
from adapters.base import Limits, LooplabError, StopReason
from adapters.pricing import Pricing
from scenarios.scripted.conversation import Conversation
from scenarios.scripted.policy import Call, Decision
from scenarios.scripted.probes import AnswersOnCall, NeverStops
from scenarios.scripted.server import ScriptedModelServer
from shared_tools import default_tools, tree_fingerprint
from tests.conftest import FIXTURE_REPO
from tests.runs import ALL_RUNNERS, run_runner

SEED_TRAJECTORY = [
    "run_tests(tests/test_invoice.py::test_invoice_total)",
    "read_file(tests/test_invoice.py)",
    "search_code(def apply_discount)",
    "read_file(billing/discount.py)",
]

runners = pytest.mark.parametrize("runner", ALL_RUNNERS)


@pytest.fixture(scope="module")
def never_stops() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(NeverStops()) as server:
        yield server


def serve(policy) -> ScriptedModelServer:
    return ScriptedModelServer(policy)


@runners
def test_the_investigation_answers_with_the_seed_trajectory(runner: str, model_server) -> None:
    before = tree_fingerprint(FIXTURE_REPO)
    result = run_runner(runner, model_server)
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert result.trace.trajectory() == SEED_TRAJECTORY
    assert "apply_discount" in result.answer and "billing/discount.py" in result.answer
    assert result.totals.model_calls == 5 and len(result.trace.steps) == 5
    assert result.native_cap.knob and result.native_cap.value is not None
    assert tree_fingerprint(FIXTURE_REPO) == before


@runners
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_max_steps_n_means_n_model_calls(runner: str, n: int, never_stops) -> None:
    result = run_runner(runner, never_stops, Limits(max_steps=n))
    assert (result.stop_reason, result.answer) == (StopReason.MAX_STEPS, None), result.stop_detail
    assert result.totals.model_calls == n
    assert len(result.trace.steps) == n
    # every call asked for a tool; each ran but the last call's, which no model call was left to read
    assert [len(s.tool_calls) for s in result.trace.steps] == [1] * (n - 1) + [0]
    assert result.trace.steps[-1].model_call.tool_calls_requested == ["search_code"]


def _always_write(conv: Conversation) -> Decision:
    return Decision((Call("write_file", {"path": "NOTES.md", "content": f"turn {conv.assistant_turns + 1}"}),))


@runners
@pytest.mark.parametrize("n", [1, 2])
def test_the_last_allowed_calls_tools_do_not_run_nor_ask_for_approval(runner: str, n: int) -> None:
    asked: list[str] = []
    approve = lambda name, args: asked.append(args["content"]) or True  # noqa: E731
    with serve(_always_write) as server:
        result = run_runner(
            runner, server, Limits(max_steps=n), tools=default_tools(allow_writes=True), approver=approve
        )
    assert (result.stop_reason, result.answer) == (StopReason.MAX_STEPS, None), result.stop_detail
    assert result.totals.model_calls == n
    assert asked == [f"turn {t}" for t in range(1, n)]  # every call's write was approved and ran but the last's
    assert [c.outcome for c in result.trace.tool_calls] == ["ok"] * (n - 1)
    assert result.stop_detail and f"max_steps={n}" in result.stop_detail


@runners
@pytest.mark.parametrize("k", [1, 2, 4])
def test_an_answer_on_call_k_with_max_steps_k_is_final(runner: str, k: int) -> None:
    with serve(AnswersOnCall(k)) as server:
        result = run_runner(runner, server, Limits(max_steps=k))
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert result.answer == f"answered on model call {k}" and result.totals.model_calls == k


def _same_read(conv: Conversation) -> Decision:
    return Decision((Call("read_file", {"path": "README.md"}),))


@runners
def test_repetition_stops_every_runner_the_same_way(runner: str) -> None:
    with serve(_same_read) as server:
        result = run_runner(runner, server, Limits(max_repeats=3))
    assert (result.stop_reason, result.answer) == (StopReason.REPETITION, None), result.stop_detail
    assert [c.outcome for c in result.trace.tool_calls] == ["ok", "ok", "repetition"]
    assert result.totals.model_calls == 3
    assert result.stop_detail == "read_file was called with the same arguments 3 times in a row"


def _overwrite_tests(conv: Conversation) -> Decision:
    if conv.results:
        return Decision(answer="done")
    return Decision((Call("write_file", {"path": "tests/test_invoice.py", "content": "def test_ok():\n    pass\n"}),))


@runners
def test_an_unapproved_effect_ends_the_run_as_rejected(runner: str) -> None:
    with serve(_overwrite_tests) as server:
        result = run_runner(runner, server, tools=default_tools(allow_writes=True))
    assert (result.stop_reason, result.answer) == (StopReason.REJECTED, None), result.stop_detail
    assert [c.outcome for c in result.trace.tool_calls] == ["rejected"]
    assert result.totals.model_calls == 1
    assert result.stop_detail == "write_file was not approved: no approver is configured, so effects are denied"


def _two_reads(conv: Conversation) -> Decision:
    if conv.results:
        return Decision(answer="read " + " and ".join(sorted(r.call.args["path"] for r in conv.results)))
    return Decision(
        (Call("read_file", {"path": "tests/test_invoice.py"}), Call("read_file", {"path": "billing/discount.py"}))
    )


@runners
def test_parallel_tool_calls_stay_in_one_step(runner: str) -> None:
    with serve(_two_reads) as server:
        result = run_runner(runner, server)
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert result.answer == "read billing/discount.py and tests/test_invoice.py"
    reads = ["billing/discount.py", "tests/test_invoice.py"]
    if adapters.RUNNERS[runner].one_tool_a_reply:
        # A text protocol (DSPy's fields) names one tool a reply: the model's two reads come one a step.
        assert [len(s.tool_calls) for s in result.trace.steps] == [1, 1, 0]
        assert sorted(c.args["path"] for s in result.trace.steps for c in s.tool_calls) == reads
        return
    assert sorted(c.args["path"] for c in result.trace.steps[0].tool_calls) == reads
    assert [len(s.tool_calls) for s in result.trace.steps] == [2, 0]


@runners
def test_a_cost_budget_ends_every_runner_as_budget(runner: str, model_server) -> None:
    pricing = Pricing(input_per_mtok=1000.0, output_per_mtok=1000.0)
    # Room for every runner's first call: smolagents' own prompt template makes its first request about 6.5 KB
    # (1.64 at this price), DSPy's about 4 KB, most others' about 1.7 KB (0.44).
    result = run_runner(runner, model_server, Limits(max_cost_usd=2.0), pricing=pricing)
    assert (result.stop_reason, result.answer) == (StopReason.BUDGET, None), result.stop_detail
    assert 0 < result.totals.model_calls < 5
    assert result.totals.cost_usd <= 2.0  # stopped before the call that would have gone over


@pytest.fixture(scope="module")
def slow_repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("slow") / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_slow.py").write_text("import time\n\ndef test_slow():\n    time.sleep(30)\n")
    return repo


def _run_slow(conv: Conversation) -> Decision:
    return (
        Decision((Call("run_tests", {"target": "tests/test_slow.py"}),)) if not conv.results else Decision(answer="x")
    )


@runners
def test_max_seconds_ends_every_runner_as_timeout(runner: str, slow_repo: Path) -> None:
    with serve(_run_slow) as server:
        result = run_runner(
            runner, server, Limits(max_seconds=2), repo=slow_repo, task="Why does tests/test_slow.py hang?"
        )
    assert (result.stop_reason, result.answer) == (StopReason.TIMEOUT, None), result.stop_detail
    assert result.totals.wall_s < 3.5
    assert [c.outcome for c in result.trace.tool_calls] == ["timeout"]


API_CELLS = [(r, api) for r in ALL_RUNNERS for api in adapters.load(r).apis]


@pytest.mark.parametrize(("runner", "api"), API_CELLS)
def test_every_declared_wire_api_investigates(runner: str, api: str, model_server) -> None:
    result = run_runner(runner, model_server, api=api)
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert result.trace.trajectory() == SEED_TRAJECTORY
    assert {s.model_call.endpoint for s in result.trace.steps} == {
        {"chat": "chat.completions", "responses": "responses", "messages": "messages"}[api]
    }


UNSPOKEN = [(r, a) for r in ALL_RUNNERS for a in ("chat", "responses", "messages") if a not in adapters.load(r).apis]


@pytest.mark.parametrize(("runner", "api"), UNSPOKEN)
def test_an_api_a_runner_cannot_speak_is_refused_in_one_line(runner: str, api: str, model_server) -> None:
    with pytest.raises(LooplabError) as info:
        run_runner(runner, model_server, api=api)
    assert "\n" not in str(info.value) and f"cannot use the {api} API" in str(info.value)


def _hang(conv: Conversation) -> Decision:
    import time

    time.sleep(4)  # a model that does not answer within the run's 1.5 s
    return Decision(answer="too late")


@pytest.fixture(scope="module")
def hanging_model() -> Iterator[ScriptedModelServer]:
    with serve(_hang) as server:
        yield server


@runners
def test_a_model_call_that_hangs_ends_as_timeout(runner: str, hanging_model) -> None:
    result = run_runner(runner, hanging_model, Limits(max_seconds=1.5))
    assert (result.stop_reason, result.answer) == (StopReason.TIMEOUT, None), result.stop_detail
    assert result.totals.wall_s < 3 and result.totals.model_calls == 0


def _says_nothing(conv: Conversation) -> Decision:
    return Decision(answer="")


@pytest.mark.parametrize(("runner", "api"), API_CELLS)
def test_an_empty_reply_is_no_answer_in_every_runner(runner: str, api: str) -> None:
    with serve(_says_nothing) as server:
        result = run_runner(runner, server, Limits(max_steps=3), api=api)
    # Some frameworks ask again after an empty reply (up to the cap); none may call it an answer.
    assert result.stop_reason in (StopReason.ERROR, StopReason.MAX_STEPS) and result.answer is None, result.stop_detail
    assert result.native_end is not None  # how the framework itself ended is on the record for every runner
