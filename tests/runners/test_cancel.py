"""A caller cancels one run among many: `looplab.start`'s handle, and a matrix cell wherever it runs.

Each runner's own part (the run stops within a second, as `cancelled`, with its partial trace and its test
processes ended) is a conformance check (`looplab.testing.conformance`); these pin what the harness adds: the
handle, the workspace removed, a cell cancelled in this process, in a worker process or in a runner environment's
lane, before or while it runs, and the other cells going on.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.types import ASGIApp

import looplab
from looplab.adapters import registry
from looplab.adapters.contract.cancel import Cancellation
from looplab.adapters.contract.limits import StopReason
from looplab.records.outcome import RunOutcome
from looplab.run import harness, isolation, matrix
from looplab.run.environments import RunnerEnv
from looplab.run.handle import Cancels
from looplab.run.harness import Endpoint, ModelChoice
from looplab.run.options import RunOptions
from looplab.scenarios.cases import Case, load_cases
from looplab.scenarios.scripted.server import ScriptedModelServer
from tests.late_model import LateModel

CASE = load_cases()["vip-compound"]
#: Each reply this late: an investigation of five calls takes seconds, so a cancel finds it running.
REPLY_S = 0.4


class Counted(LateModel):
    """The scripted model with each reply `REPLY_S` late, counting the requests it was sent."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app, REPLY_S)

    def cancel_after(self, requests: int, cancel: Callable[[], None]) -> None:
        """Call `cancel` (on a thread of its own) once `requests` requests came: the run sending them is under way."""

        def watch() -> None:
            give_up = time.monotonic() + 60
            while self.requests < requests and time.monotonic() < give_up:
                time.sleep(0.02)
            cancel()

        threading.Thread(target=watch, daemon=True).start()


@pytest.fixture
def counted() -> Iterator[tuple[Endpoint, Counted]]:
    apps: list[Counted] = []
    with ScriptedModelServer(wrap=lambda app: apps.append(Counted(app)) or apps[-1]) as server:
        yield Endpoint(ModelChoice(), server.base_urls), apps[0]


@pytest.fixture
def slow_model(counted: tuple[Endpoint, Counted]) -> Endpoint:
    return counted[0]


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The run's workspaces go under this test's own folder (other tests run in parallel)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path.resolve()))
    return tmp_path.resolve()


def _cancelled(outcome: RunOutcome) -> bool:
    return outcome.result is not None and outcome.result.stop_reason == StopReason.CANCELLED


def test_a_started_run_cancelled_from_another_thread_ends_with_its_partial_trace_and_no_workspace(
    counted: tuple[Endpoint, Counted], private_tmp: Path
) -> None:
    where, model = counted
    handle = looplab.start("handrolled", CASE, where)
    cancelled_at: list[float] = []
    model.cancel_after(3, lambda: cancelled_at.append(time.monotonic()) or handle.cancel())  # in its third call
    outcome = handle.outcome(timeout=30)
    assert cancelled_at and time.monotonic() - cancelled_at[0] < 1.0
    assert _cancelled(outcome) and outcome.result.answer is None, outcome.error
    assert outcome.result.stop_detail == "cancelled by the caller"
    assert 1 <= outcome.result.totals.model_calls < 5 and outcome.result.trace.steps  # what it did before
    assert not list(private_tmp.glob("looplab-ws-*"))  # its workspace is gone


def test_a_handle_is_awaited_and_cancelled_from_a_task(counted: tuple[Endpoint, Counted]) -> None:
    slow_model, model = counted

    async def main() -> RunOutcome:
        handle = looplab.start("handrolled", CASE, slow_model)
        while not handle.done() and model.requests < 1:
            await asyncio.sleep(0.02)
        handle.cancel("the user closed the page")
        return await handle

    outcome = asyncio.run(main())
    assert _cancelled(outcome) and outcome.result.stop_detail == "the user closed the page"


def test_a_run_cancelled_before_it_starts_makes_no_model_call(slow_model: Endpoint) -> None:
    cancel = Cancellation()
    cancel.cancel()
    outcome = looplab.run_one("handrolled", CASE, slow_model, cancel=cancel)
    assert _cancelled(outcome) and outcome.result.totals.model_calls == 0


def test_a_cancel_that_comes_while_the_runner_is_imported_waits_for_the_run_to_hear_it(
    slow_model: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold import (seconds in a fresh worker process under load) cannot hear a cancel, and is no hung run."""
    monkeypatch.setattr(harness, "CANCEL_GRACE_S", 0.3)
    load = registry.load
    monkeypatch.setattr(registry, "load", lambda name: time.sleep(1.0) or load(name))  # longer than the grace
    cancel = Cancellation()
    cancel.cancel()
    outcome = looplab.run_one("handrolled", CASE, slow_model, cancel=cancel)
    assert _cancelled(outcome) and outcome.result.totals.model_calls == 0, outcome.error


#: Three cells, all in flight at once: one cancelled before it starts, one while it runs (once four requests came,
#: at least two of them its own: tight-budget makes two), one left to end by itself.
CELLS = ("three-hops", "vip-compound", "tight-budget")


def _long(case_id: str) -> Case:
    case = load_cases()[case_id]
    return case.model_copy(update={"limits": case.limits.model_copy(update={"max_seconds": 60.0})})


@pytest.mark.full  # a matrix in worker processes
@pytest.mark.parametrize("jobs", [1, 2], ids=["in-process", "worker-processes"])
def test_a_cell_cancelled_in_a_matrix_ends_alone_and_the_others_go_on(
    counted: tuple[Endpoint, Counted], jobs: int
) -> None:
    where, model = counted
    cancels = Cancels()
    cancels.cancel("handrolled", "three-hops", detail="not wanted")
    model.cancel_after(4, lambda: cancels.cancel("handrolled", "vip-compound"))
    outcomes = matrix.run_matrix(
        ["handrolled"], [_long(c) for c in CELLS], where, jobs=jobs, concurrency=3, cancels=cancels
    )
    ends = {o.case: (o.result.stop_reason, o.result.stop_detail[:30]) for o in outcomes if o.result is not None}
    assert ends == {
        "three-hops": (StopReason.CANCELLED, "not wanted"),
        "vip-compound": (StopReason.CANCELLED, "cancelled by the caller"),
        "tight-budget": (StopReason.MAX_STEPS, "max_steps=2 model calls made; "),
    }, outcomes
    calls = {o.case: o.result.totals.model_calls for o in outcomes if o.result is not None}
    assert calls["three-hops"] == 0 and 1 <= calls["vip-compound"] < 5  # its second call was cut


@pytest.mark.full  # a lane of another interpreter process
def test_a_cell_cancelled_in_a_runner_environments_lane_ends_as_cancelled(counted: tuple[Endpoint, Counted]) -> None:
    where, model = counted
    plan = [("handrolled", _long(c)) for c in CELLS]
    switches = [Cancellation() for _ in plan]
    switches[0].cancel("not wanted")
    model.cancel_after(4, switches[1].cancel)
    outcomes: dict[int, RunOutcome] = {}
    env = RunnerEnv.this_one("handrolled")
    isolation.run_isolated(
        plan, where, lambda _: env, 1, 3, outcomes.__setitem__, RunOptions(), cancel_of=switches.__getitem__
    )
    ends = [(outcomes[i].result.stop_reason, outcomes[i].result.totals.model_calls) for i in range(3)]  # type: ignore[union-attr]
    assert ends[0] == (StopReason.CANCELLED, 0) and ends[2] == (StopReason.MAX_STEPS, 2), outcomes
    assert ends[1][0] == StopReason.CANCELLED and 1 <= ends[1][1] < 5
