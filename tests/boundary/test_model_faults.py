"""Every HTTP attempt at the model is on the record: failed ones under their step, with the server's word.

A loopback endpoint answers with scheduled error statuses (`HttpFaults`) before the scripted model's
replies; what the endpoint served is compared with what the record says, for every runner and every
wire API it speaks.
"""

from __future__ import annotations

import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.types import ASGIApp

from looplab.adapters import registry
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import DEFAULT_RETRIES
from looplab.adapters.contract.result import RunResult
from looplab.run.harness import Endpoint, ModelChoice
from looplab.scenarios.scripted.faults import BROKEN, HANG, Fault, HttpFaults
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Guard, Workspace
from tests.conftest import FIXTURE_REPO, SYSTEM_PROMPT, TASK
from tests.runs import ALL_RUNNERS, GEMINI_RETRIES_A_BROKEN_REPLY, run_runner
from tests.tiers import by_tier

RUNNER_APIS = [pytest.param(r, a, id=f"{r}-{a}") for r in ALL_RUNNERS for a in registry.load(r).apis]
#: Runners and APIs that only stream: an SDK retries a request until its response starts, not a stream that
#: breaks off after it began, so there the broken reply ends the run as `error` (recorded as a failed attempt).
ONLY_STREAMED = {("strands", "responses"), ("strands", "messages")}
#: A framework's own sleep before it retries, which no deadline shortens: DSPy waits 2**attempt seconds
#: (`dspy.clients.execution._delay`) and only then sends the retry the model boundary refuses.
RETRY_SLEEP_S = {"dspy": 1.0}
#: google-genai retries no reply that breaks off, streamed or not (tests/runners/test_gemini_runners.py).
STREAM_BREAKS = [
    p
    for p in RUNNER_APIS
    if tuple(p.values) not in ONLY_STREAMED
    and (p.values[1] != "gemini" or p.values[0] in GEMINI_RETRIES_A_BROKEN_REPLY)
]


def run_behind(
    faults: dict[str, HttpFaults],
    runner: str,
    api: str,
    statuses: list[Fault],
    then: Fault | None,
    retries: int = 2,
    limits: Limits | None = None,
) -> RunResult:
    def wrap(app: ASGIApp) -> ASGIApp:
        faults["endpoint"] = HttpFaults(app, statuses, then=then)
        return faults["endpoint"]

    with ScriptedModelServer(wrap=wrap) as server:
        return run_runner(runner, server, limits or Limits(max_seconds=30), api=api, retries=retries)


@pytest.mark.parametrize(("runner", "api"), by_tier(RUNNER_APIS))
def test_failed_attempts_are_recorded_under_the_step_they_were_for(runner: str, api: str) -> None:
    faults: dict[str, HttpFaults] = {}
    result = run_behind(faults, runner, api, [500, 429], None)
    served = faults["endpoint"].served
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert served[:2] == [500, 429] and result.totals.model_calls == served.count(200) == 5
    assert (result.totals.failed_model_calls, result.totals.retries) == (2, 2)
    first = result.trace.steps[0].model_call
    assert [(a.step, a.attempt, a.status) for a in first.failed_attempts] == [(1, 1, 500), (1, 2, 429)]
    assert first.failed_attempts[0].error == "injected fault: HTTP 500"
    assert all(not s.model_call.failed_attempts for s in result.trace.steps[1:]) and not result.trace.unanswered


@pytest.mark.parametrize(("runner", "api"), by_tier(RUNNER_APIS))
def test_an_endpoint_that_always_fails_leaves_every_attempt_and_its_message(runner: str, api: str) -> None:
    faults: dict[str, HttpFaults] = {}
    result = run_behind(faults, runner, api, [], 500)
    served = faults["endpoint"].served
    assert (result.stop_reason, result.answer) == (StopReason.ERROR, None)
    assert result.totals.model_calls == 0 and result.totals.failed_model_calls == len(served) >= 1
    assert [a.status for a in result.trace.unanswered] == served
    assert result.stop_detail is not None
    assert "answered 500" in result.stop_detail and "injected fault: HTTP 500" in result.stop_detail


@pytest.mark.parametrize(("runner", "api"), by_tier(STREAM_BREAKS))
def test_a_reply_that_breaks_off_is_a_failed_attempt_not_an_answer(runner: str, api: str) -> None:
    faults: dict[str, HttpFaults] = {}
    result = run_behind(faults, runner, api, [BROKEN], None)
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert (result.totals.model_calls, result.totals.failed_model_calls) == (5, 1)
    [attempt] = result.trace.steps[0].model_call.failed_attempts
    assert attempt.error.startswith("the reply broke off after 11 bytes")


@pytest.mark.parametrize(("runner", "api"), by_tier(p for p in RUNNER_APIS if tuple(p.values) in ONLY_STREAMED))
def test_a_stream_that_breaks_off_ends_a_runner_that_only_streams_as_error_with_the_attempt(
    runner: str, api: str
) -> None:
    faults: dict[str, HttpFaults] = {}
    result = run_behind(faults, runner, api, [BROKEN], None)
    assert (result.stop_reason, result.answer, result.totals.model_calls) == (StopReason.ERROR, None, 0)
    [attempt] = result.trace.unanswered
    assert attempt.error.startswith("the reply broke off after 11 bytes")


@pytest.mark.parametrize(("runner", "api"), by_tier(RUNNER_APIS))
def test_a_reply_that_never_comes_ends_the_run_as_timeout_on_time(runner: str, api: str) -> None:
    # A runner's first run in a process also pays its framework's lazy imports (LiteLLM's first call takes over a
    # second), which is not what this test times: the deadline's hold on a model call that never answers.
    assert run_behind({}, runner, api, [], None).stop_reason == StopReason.FINAL_ANSWER
    faults: dict[str, HttpFaults] = {}
    # A runner in another process starts it anew each run: its model request must go out before the deadline,
    # which takes more than a second for node on a machine busy with other tests.
    limits = Limits(max_seconds=3.0 if registry.RUNNERS[runner].out_of_process else 1.0)
    result = run_behind(faults, runner, api, [], HANG, limits=limits)
    assert (result.stop_reason, result.answer, result.totals.model_calls) == (StopReason.TIMEOUT, None, 0)
    assert result.totals.wall_s <= limits.max_seconds + 1 + RETRY_SLEEP_S.get(runner, 0.0)
    assert result.trace.unanswered and all("Timeout" in a.error for a in result.trace.unanswered)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("api", ["messages", "chat"])
def test_a_connection_that_is_refused_is_an_attempt_too(api: str) -> None:
    port = _closed_port()
    adapter = registry.load("handrolled")
    urls = {"openai": f"http://127.0.0.1:{port}/v1", "anthropic": f"http://127.0.0.1:{port}"}
    spec = Endpoint(ModelChoice(api=api), urls).spec_for(adapter)  # type: ignore[arg-type]
    with Workspace(FIXTURE_REPO) as ws:
        result = adapter.run(TASK, Guard(ws), Limits(max_seconds=30), spec, system_prompt=SYSTEM_PROMPT)
    assert (result.stop_reason, result.totals.model_calls) == (StopReason.ERROR, 0)
    assert result.totals.failed_model_calls >= 1
    assert all(a.status is None and "Connect" in a.error for a in result.trace.unanswered)
    assert result.stop_detail is not None and result.stop_detail.startswith("the model endpoint gave no response")


@pytest.mark.parametrize("retries", [0, 3])
@pytest.mark.parametrize(("runner", "api"), by_tier(RUNNER_APIS))
def test_one_retry_policy_for_every_runner(runner: str, api: str, retries: int) -> None:
    """looplab builds every SDK client, so --retries N means N + 1 attempts at a failing call in every runner."""
    faults: dict[str, HttpFaults] = {}
    result = run_behind(faults, runner, api, [], 500, retries=retries)
    assert len(faults["endpoint"].served) == result.totals.failed_model_calls == retries + 1
    assert result.totals.retries == retries


def test_the_command_line_default_is_the_library_default() -> None:
    from looplab.cli import _parser

    assert _parser().parse_args(["run"]).retries == DEFAULT_RETRIES


def _whole(text: str) -> bool:
    try:
        return int(text) >= 0
    except ValueError:
        return False


@settings(deadline=None)
@given(n=st.integers(max_value=-1).map(str) | st.text(max_size=6).filter(lambda t: not _whole(t)))
def test_retries_must_be_a_whole_number(n: str) -> None:
    from looplab.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["run", f"--retries={n}"])
    assert exit_.value.code == 2


@pytest.mark.parametrize("runner", by_tier(ALL_RUNNERS))
def test_a_server_that_would_compress_its_replies_is_still_read(runner: str) -> None:
    """The boundary asks for identity encoding: usage, finish reasons and tool calls come from the reply's bytes."""
    from starlette.middleware.gzip import GZipMiddleware

    with ScriptedModelServer(wrap=lambda app: GZipMiddleware(app, minimum_size=1)) as server:
        result = run_runner(runner, server, Limits(max_steps=2))
    calls = [s.model_call for s in result.trace.steps]
    assert calls and not any(c.usage_estimated for c in calls)
    assert calls[0].tool_calls_requested == ["run_tests"]
