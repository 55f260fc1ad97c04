"""Runs that wait, in flight together: `eval --concurrency`, `--rpm`, 429 holds, and each run's own warnings."""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import signal
import socket
import threading
import warnings
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.types import ASGIApp, Receive, Scope, Send

from looplab import cli
from looplab.adapters.boundary import pacing
from looplab.adapters.boundary.noise import framework_noise
from looplab.adapters.boundary.pacing import Pacer, retry_after_s
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.session import Runner, RunSession
from looplab.records.outcome import RunOutcome
from looplab.run import matrix, schedule
from looplab.run.harness import Endpoint, ModelChoice
from looplab.scenarios.cases import load_cases
from looplab.scenarios.scripted.faults import MODEL_PATHS, HttpFaults, SlowReplies
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Guard, Workspace
from tests.conftest import FIXTURE_REPO
from tests.runs import ALL_RUNNERS, run_runner
from tests.tiers import by_tier

CASES = load_cases()


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- the pacer -------------------------------------------------------------------------------------------------


@given(rpm=st.integers(1, 6000), n=st.integers(1, 30))
def test_requests_taken_together_are_spaced_sixty_over_rpm_apart(rpm: int, n: int) -> None:
    clock = FakeClock()
    pacer = Pacer(rpm, clock=clock)
    waits = [pacer.reserve(deadline=clock.now + 1e9) for _ in range(n)]
    assert waits == pytest.approx([k * 60 / rpm for k in range(n)])


@given(hold=st.floats(0, 500), rpm=st.none() | st.integers(1, 600))
def test_a_hold_makes_the_next_request_wait_that_long(hold: float, rpm: int | None) -> None:
    clock = FakeClock()
    pacer = Pacer(rpm, clock=clock)
    pacer.hold(hold)
    assert pacer.reserve(deadline=clock.now + 1e9) == pytest.approx(hold)


def test_a_slot_after_the_deadline_is_refused_and_not_taken() -> None:
    clock = FakeClock()
    pacer = Pacer(rpm=1, clock=clock)
    assert pacer.reserve(deadline=clock.now + 10) == 0
    assert pacer.reserve(deadline=clock.now + 10) is None  # the next slot is 60 s away
    assert pacer.reserve(deadline=clock.now + 100) == 60  # the refused slot was not taken


def test_pacers_sharing_a_schedule_share_the_slots() -> None:
    clock, shared = FakeClock(), multiprocessing.get_context("spawn").Value("d", 0.0)
    first, second = Pacer(60, shared, clock), Pacer(60, shared, clock)  # as two worker processes hold them
    waits = [p.reserve(deadline=clock.now + 1e9) for p in (first, second, first, second)]
    assert waits == [0, 1, 2, 3]


@given(seconds=st.floats(0, 1e6, allow_nan=False))
def test_retry_after_reads_seconds_and_milliseconds(seconds: float) -> None:
    assert retry_after_s({"Retry-After": repr(seconds)}) == pytest.approx(seconds)
    assert retry_after_s({"retry-after-ms": repr(seconds * 1000), "retry-after": "999"}) == pytest.approx(seconds)


def test_retry_after_reads_an_http_date() -> None:
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    header = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after_s({"retry-after": header}, now=now.timestamp) == pytest.approx(30)


@given(st.text(max_size=40))
def test_a_retry_after_that_means_nothing_is_ignored(text: str) -> None:
    value = retry_after_s({"retry-after": text, "retry-after-ms": text})
    assert value is None or value >= 0  # never an exception, never a negative wait


def test_a_run_under_rpm_spaces_its_model_calls(model_server: ScriptedModelServer) -> None:
    previous = pacing.current()
    pacing.install(Pacer(rpm=300))  # 0.2 s apart
    try:
        result = run_runner("handrolled", model_server, Limits(max_steps=4))
    finally:
        pacing.install(previous)
    starts = [s.model_call.started_at for s in result.trace.steps]
    assert len(starts) == 4 and all(b - a >= 0.19 for a, b in zip(starts, starts[1:], strict=False)), starts


def test_a_run_whose_next_slot_is_past_its_deadline_stops_as_timeout(model_server: ScriptedModelServer) -> None:
    previous = pacing.current()
    pacing.install(Pacer(rpm=1))  # one request a minute
    try:
        result = run_runner("handrolled", model_server, Limits(max_steps=5, max_seconds=5))
    finally:
        pacing.install(previous)
    assert result.stop_reason == StopReason.TIMEOUT and result.totals.model_calls == 1
    assert "--rpm 1" in (result.stop_detail or "")


class _Holds(Pacer):
    """A pacer that remembers the holds it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.holds: list[float] = []

    def hold(self, seconds: float) -> None:
        self.holds.append(seconds)
        super().hold(seconds)


@pytest.mark.parametrize("runner", by_tier(["handrolled", "pydantic_ai"]))
def test_a_429_holds_back_every_run_by_its_retry_after(runner: str) -> None:
    holds = _Holds()
    previous = pacing.current()
    pacing.install(holds)
    try:
        with ScriptedModelServer(wrap=lambda app: HttpFaults(app, [429])) as server:
            result = run_runner(runner, server, Limits(max_steps=2))
    finally:
        pacing.install(previous)
    assert holds.holds == [pytest.approx(0.001)]  # the fault's retry-after-ms: 1
    assert result.totals.failed_model_calls == 1 and result.totals.model_calls == 2


# --- each run's warnings and logs ------------------------------------------------------------------------------


class _Chatty(Runner):
    """A runner that warns and logs its task, from its own thread, an asyncio task and a tool worker."""

    name, extra, distribution, knobs = "chatty", "none", "pytest", ("steps",)

    def __init__(self, barrier: threading.Barrier, stray: bool = False) -> None:
        self.barrier, self.stray = barrier, stray

    def native_cap(self, limits: Limits) -> NativeCap:
        return NativeCap(knob="steps", value=limits.max_steps)

    def loop(self, task: str, session: RunSession) -> Finished:
        self.barrier.wait(timeout=10)  # every run is in flight before any speaks
        warnings.warn(f"warned by {task}", UserWarning, stacklevel=1)
        logging.getLogger("chatty").warning("logged by %s", task)

        async def in_a_task() -> None:
            logging.getLogger("chatty").warning("task of %s", task)

        session.run_async(in_a_task())
        session.guard.call("read_file", '{"path": "README.md"}')  # the Guard's worker thread
        if self.stray:  # a thread that did not copy the run's context
            thread = threading.Thread(target=logging.getLogger("stray").warning, args=("from nowhere",))
            thread.start()
            thread.join()
        self.barrier.wait(timeout=10)  # nobody leaves before every run has spoken
        return Finished(StopReason.FINAL_ANSWER, f"done {task}")


def _run_chatty(tasks: list[str], stray: bool = False) -> dict[str, list[str]]:
    barrier = threading.Barrier(len(tasks))
    adapter = _Chatty(barrier, stray)
    spec = ModelSpec("openai", "none", base_url="http://127.0.0.1:9/v1")
    seen: dict[str, list[str]] = {}

    def one(task: str) -> None:
        with Workspace(FIXTURE_REPO) as ws:
            seen[task] = adapter.run(task, Guard(ws), Limits(), spec, system_prompt="unused").warnings

    threads = [threading.Thread(target=one, args=(t,)) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return seen


@settings(deadline=None)
@given(n=st.integers(2, 6))
def test_each_runs_warnings_and_logs_stay_with_that_run_when_runs_overlap(n: int) -> None:
    tasks = [f"run-{i}" for i in range(n)]
    seen = _run_chatty(tasks)
    for task in tasks:
        assert sorted(seen[task]) == sorted(
            [f"UserWarning: warned by {task}", f"chatty: logged by {task}", f"chatty: task of {task}"]
        ), seen[task]


def test_a_message_no_run_owns_goes_to_none_of_the_overlapping_runs_and_each_says_so() -> None:
    seen = _run_chatty(["a", "b"], stray=True)
    for task in ("a", "b"):
        assert not any("from nowhere" in w for w in seen[task])
        assert any(w.startswith("looplab: 2 warning(s) or log record(s) came from a thread") for w in seen[task])


def test_with_one_run_in_flight_a_message_from_any_thread_is_that_runs() -> None:
    seen = _run_chatty(["only"], stray=True)
    assert "stray: from nowhere" in seen["only"]


def test_an_object_collected_during_a_run_does_not_warn_into_its_record() -> None:
    leaked = socket.socket()  # left open by someone else: its finalizer warns whenever the collector gets to it
    with framework_noise() as messages:
        del leaked
        gc.collect()
        warnings.warn("said during the run", UserWarning, stacklevel=1)
    assert messages == ["UserWarning: said during the run"]


@settings(deadline=None)
@given(said=st.lists(st.tuples(st.sampled_from(["warn", "log", "print"]), st.integers(0, 3)), max_size=40))
def test_a_warning_or_log_record_said_again_is_kept_once_saying_how_many_times(said: list[tuple[str, int]]) -> None:
    text = {"warn": "UserWarning: warning {}", "log": "repeats: record {}", "print": "stdout: line {}"}
    with framework_noise() as messages:
        for kind, n in said:
            if kind == "warn":
                warnings.warn(f"warning {n}", UserWarning, stacklevel=1)
            elif kind == "log":
                logging.getLogger("repeats").warning("record %d", n)
            else:
                print(f"line {n}")
    expected: list[str] = []
    times: dict[str, int] = {}
    for kind, n in said:
        message = text[kind].format(n)
        if kind == "print" or message not in times:  # every printed line is kept
            expected.append(message)
        times[message] = times.get(message, 0) + 1
    assert messages == [m if m.startswith("stdout") or times[m] == 1 else f"{m} ({times[m]} times)" for m in expected]


def test_the_process_warning_settings_come_back_after_the_last_run() -> None:
    before = (warnings.showwarning, list(warnings.filters), list(logging.getLogger().handlers))
    with framework_noise():
        with framework_noise():
            pass
        assert warnings.showwarning is not before[0]
    assert (warnings.showwarning, list(warnings.filters), list(logging.getLogger().handlers)) == before


# --- the matrix ------------------------------------------------------------------------------------------------


class _InFlight:
    """Counts the model requests being answered at once (each takes `seconds`)."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app, self.seconds, self.now, self.peak = SlowReplies(app, seconds), seconds, 0, 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        counted = scope["type"] == "http" and scope["path"].endswith(MODEL_PATHS)
        self.now += counted
        self.peak = max(self.peak, self.now)
        try:
            await self.app(scope, receive, send)
        finally:
            self.now -= counted


def _shape(outcome: RunOutcome) -> tuple:
    r = outcome.result
    assert r is not None, outcome.error
    return (outcome.runner, outcome.case, r.stop_reason, r.trace.trajectory(), [c.passed for c in outcome.checks])


MATRIX = (["handrolled", "langgraph"], [CASES[c] for c in ("vip-compound", "three-hops", "sloppy-calls")])


@pytest.mark.full  # runs a matrix of runners and cases
def test_cells_in_flight_together_come_to_what_they_come_to_one_at_a_time() -> None:
    counter: list[_InFlight] = []

    def wrap(app: ASGIApp) -> ASGIApp:
        counter.append(_InFlight(app, 0.2))
        return counter[0]

    with ScriptedModelServer(wrap=wrap) as server:
        where = Endpoint(ModelChoice(), {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url})
        one_at_a_time = matrix.run_matrix(*MATRIX, where, jobs=1, concurrency=1)
        assert counter[0].peak == 1
        together = matrix.run_matrix(*MATRIX, where, jobs=1, concurrency=4)
    assert 1 < counter[0].peak <= 4
    assert [_shape(o) for o in together] == [_shape(o) for o in one_at_a_time]  # and in plan order


@pytest.mark.full  # runs a matrix of runners and cases
def test_lanes_of_worker_processes_with_threads_come_to_the_same_outcomes(model_server: ScriptedModelServer) -> None:
    urls = {"openai": model_server.openai_base_url, "anthropic": model_server.anthropic_base_url}
    where = Endpoint(ModelChoice(), urls)
    one_at_a_time = matrix.run_matrix(*MATRIX, where, jobs=1)
    seen: list[RunOutcome] = []
    in_lanes = matrix.run_matrix(*MATRIX, where, jobs=2, concurrency=3, on_done=seen.append)
    assert [_shape(o) for o in in_lanes] == [_shape(o) for o in one_at_a_time]
    assert sorted(map(_shape, seen)) == sorted(map(_shape, in_lanes))  # on_done saw every cell, as it ended


@given(concurrency=st.integers(1, 64), lanes=st.integers(1, 16))
def test_concurrency_is_spread_over_at_most_that_many_lanes(concurrency: int, lanes: int) -> None:
    shape = schedule.split(concurrency, lanes)
    assert sum(shape) == concurrency and len(shape) == min(concurrency, lanes)
    assert max(shape) - min(shape) <= 1


@pytest.mark.full  # runs a matrix of runners and cases
def test_a_lane_that_dies_loses_only_its_own_cells() -> None:
    cases = [CASES[c] for c in ("vip-compound", "three-hops", "slow-tests")]
    killed: list[int] = []

    def kill_a_lane(outcome: RunOutcome) -> None:
        if not killed and (lanes := multiprocessing.active_children()):
            killed.append(lanes[0].pid)
            os.kill(lanes[0].pid, signal.SIGKILL)

    with ScriptedModelServer(wrap=lambda app: SlowReplies(app, 0.3)) as server:
        where = Endpoint(ModelChoice(), {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url})
        outcomes = matrix.run_matrix(["handrolled"], cases, where, repeat=3, jobs=2, concurrency=2, on_done=kill_a_lane)
    assert killed and len(outcomes) == 9  # every cell accounted for
    lost = [o for o in outcomes if o.result is None]
    assert lost and all(o.error and o.error.startswith("worker process failed") for o in lost)
    assert any(o.result is not None for o in outcomes[1:])  # the other lane went on


@pytest.mark.parametrize("option", ["--concurrency", "--rpm"])
@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_concurrency_and_rpm_take_a_whole_number_of_one_or_more(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.main(["eval", option, value])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and option in err


@pytest.mark.full  # runs a matrix of runners and cases
def test_every_runner_closes_its_connections_when_the_run_ends(model_server: ScriptedModelServer) -> None:
    import gc

    for runner in ALL_RUNNERS:
        run_runner(runner, model_server, Limits(max_steps=2))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gc.collect()
        leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
        assert not leaks, f"{runner}: {leaks}"


@pytest.mark.full  # runs a matrix of runners and cases
def test_the_concurrency_bench_runs_the_matrix_at_each_level_and_prints_the_speedup() -> None:
    from looplab.measure import bench_concurrency

    cases = [CASES["vip-compound"], CASES["three-hops"]]
    rows = bench_concurrency.measure(["handrolled"], cases, [1, 2], jobs=1, reply_s=0.2)
    assert [(r.concurrency, r.cells, r.passed) for r in rows] == [(1, 2, 2), (2, 2, 2)]
    assert rows[0].model_calls == rows[1].model_calls >= 2 * 5  # the same runs, at both levels
    assert rows[1].wall_s < rows[0].wall_s
    assert rows[1].speedup == pytest.approx(rows[0].wall_s / rows[1].wall_s, abs=0.1)
    lines = bench_concurrency.table(rows, 0.2)
    assert lines[0] == "matrix against a model that takes 0.2 s a reply" and len(lines) == 6
