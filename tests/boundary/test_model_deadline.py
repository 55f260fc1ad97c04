"""The model boundary holds the run's deadline, whatever the model endpoint does.

An endpoint that answers 200 and then sends its body one byte at a time (`DRIBBLE`), or keeps an event stream
alive with `: keep-alive` comments (`KEEP_ALIVE`), never lets a single read wait long, so per-read HTTP timeouts
never fire. The run still ends within `max_seconds` + 1 s, as `timeout`, with what arrived recorded as a failed
attempt: in process (a non-streaming and a streaming runner) and through the proxy (a runner in another process).
"""

from __future__ import annotations

import shlex
import sys
import time

import pytest
from starlette.types import ASGIApp

from looplab.adapters import registry
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.result import RunResult
from looplab.adapters.runners.external import EXTERNAL_COMMAND_ENV
from looplab.scenarios.scripted.faults import DRIBBLE, KEEP_ALIVE, Fault, HttpFaults
from looplab.scenarios.scripted.server import ScriptedModelServer
from tests.paths import REPO
from tests.runs import ALL_RUNNERS, run_runner
from tests.tiers import by_tier

#: The budget each run here gets: long enough for a few pieces of a dribbled reply to arrive first.
MAX_SECONDS = 1.5
#: A runner in another process also pays for starting its interpreter before the deadline's clock matters.
CHILD_START_S = 0.5
#: Every runner in this process, on its default wire API: handrolled does not stream (the OpenAI SDK, synchronous),
#: Strands does (the Anthropic SDK, asynchronous), DSPy reads through lm15's own HTTP layer, LiteLLM's runners
#: through theirs.
RUNNERS = [
    pytest.param(name, registry.load(name).apis[0], id=name)
    for name in ALL_RUNNERS
    if not registry.load(name).out_of_process
]
FAULTS = [pytest.param(DRIBBLE, id="json-one-byte-at-a-time"), pytest.param(KEEP_ALIVE, id="sse-keep-alive-comments")]
EXAMPLE = REPO / "examples" / "stdlib_agent.py"


def _warm_up(runner: str, api: str) -> None:
    """One ordinary run first: a runner's first run in a process also pays its framework's lazy imports (and a
    child runner's, the tool server's), which is not what these tests time."""
    with ScriptedModelServer() as server:
        assert run_runner(runner, server, Limits(max_steps=1), api=api).totals.model_calls == 1


def _run_behind(fault: Fault, runner: str, api: str, limits: Limits) -> tuple[RunResult, float, HttpFaults]:
    faults: list[HttpFaults] = []

    def wrap(app: ASGIApp) -> ASGIApp:
        faults.append(HttpFaults(app, then=fault))
        return faults[0]

    with ScriptedModelServer(wrap=wrap) as server:
        started = time.monotonic()
        result = run_runner(runner, server, limits, api=api)
        took = time.monotonic() - started
    return result, took, faults[0]


def _assert_cut_at_the_deadline(result: RunResult, took: float, slack: float = 0.0) -> None:
    assert (result.stop_reason, result.answer) == (StopReason.TIMEOUT, None), result.stop_detail
    assert took <= MAX_SECONDS + 1 + slack and result.totals.wall_s <= MAX_SECONDS + 1
    assert result.totals.model_calls == 0 and result.trace.unanswered
    last = result.trace.unanswered[-1]
    # Something arrived (the reply had started), and the record says the deadline cut it.
    assert last.status == 200 and last.response_bytes > 0
    assert "deadline passed" in last.error and last.error.startswith("the reply broke off after")


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize(("runner", "api"), by_tier(RUNNERS))
def test_a_reply_that_never_ends_ends_the_run_as_timeout_on_time(runner: str, api: str, fault: Fault) -> None:
    _warm_up(runner, api)
    result, took, faults = _run_behind(fault, runner, api, Limits(max_seconds=MAX_SECONDS))
    _assert_cut_at_the_deadline(result, took)
    assert faults.served == [fault]  # cut, not retried: the deadline had passed
    assert result.stop_detail == f"max_seconds={MAX_SECONDS:g} elapsed during a model call"


@pytest.mark.parametrize("fault", FAULTS)
def test_a_reply_that_never_ends_ends_a_runner_in_another_process_on_time(
    monkeypatch: pytest.MonkeyPatch, fault: Fault
) -> None:
    monkeypatch.setenv(EXTERNAL_COMMAND_ENV, f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE))}")
    _warm_up("external", "chat")
    result, took, faults = _run_behind(fault, "external", "chat", Limits(max_seconds=MAX_SECONDS))
    _assert_cut_at_the_deadline(result, took, slack=CHILD_START_S)
    assert faults.served == [fault]
    # The boundary's word, whether the child heard the proxy's refusal before its own end at the deadline or not.
    assert result.stop_detail == f"max_seconds={MAX_SECONDS:g} elapsed during a model call"
