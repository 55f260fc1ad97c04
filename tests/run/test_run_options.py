"""Run options: one typed value from the command line to every run, on threads here, in worker processes and lanes."""

from __future__ import annotations

import json
import pickle
import threading
from typing import Any

import pytest

from looplab.records.outcome import RunOutcome
from looplab.run import lane, schedule
from looplab.run.harness import Endpoint, ModelChoice
from looplab.run.options import RunOptions
from looplab.scenarios.cases import load_cases

WHERE = Endpoint(ModelChoice(), {"openai": "http://127.0.0.1:9/v1", "anthropic": "http://127.0.0.1:9"})


def test_fields_given_by_name_go_over_the_value() -> None:
    base = RunOptions(max_steps=3, tools="mcp")
    assert RunOptions.of(base, sandbox=True) == RunOptions(max_steps=3, tools="mcp", sandbox=True)
    assert RunOptions.of({"grace_s": 1.0}) == RunOptions(grace_s=1.0)
    assert RunOptions.of(None) == RunOptions() and RunOptions.of(base) is base
    with pytest.raises(TypeError):
        RunOptions.of(base, max_step=3)  # a misspelt field, as an unknown keyword argument is refused


def test_the_options_cross_to_worker_processes_and_to_lanes_unchanged() -> None:
    options = RunOptions(max_steps=2, max_tokens=500, grace_s=5.0, tools="mcp", sandbox=True)
    assert pickle.loads(pickle.dumps(options)) == options
    line = lane.encode_job(WHERE, [], 2, options)
    # The wire form: the fields that were asked for, by name (the keywords `run_one` takes).
    wired = {"max_steps": 2, "max_tokens": 500, "grace_s": 5.0, "tools": "mcp", "sandbox": True}
    assert json.loads(line)["options"] == wired
    assert lane.decode_job(line)[3] == options
    assert RunOptions().to_wire() == {} and RunOptions.from_wire({}) == RunOptions()


def test_an_approver_does_not_leave_this_process() -> None:
    with pytest.raises(TypeError, match="approver"):
        RunOptions(approver=lambda name, args: True).to_wire()


@pytest.mark.parametrize("concurrency", [1, 3])
def test_here_runs_every_cell_once_with_the_options(monkeypatch: pytest.MonkeyPatch, concurrency: int) -> None:
    asked: list[RunOptions] = []
    threads: set[str] = set()

    def run_one(runner: str, case: Any, where: Any, options: RunOptions, *, cancel: Any) -> RunOutcome:
        asked.append(options)
        threads.add(threading.current_thread().name)
        return RunOutcome(runner, case.id, error="not run")

    monkeypatch.setattr(schedule, "run_one", run_one)
    cases = list(load_cases().values())[:5]
    plan = [("handrolled", c) for c in cases]
    done: dict[int, str] = {}
    options = RunOptions(max_steps=2, sandbox=True)
    schedule.Here(concurrency).run(plan, WHERE, options, lambda i, o: done.__setitem__(i, o.case))
    assert done == {i: c.id for i, c in enumerate(cases)} and asked == [options] * len(cases)
    assert (threads == {threading.current_thread().name}) == (concurrency == 1)


def test_an_error_out_of_on_done_ends_the_queue_and_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule, "run_one", lambda runner, case, where, options, **_: RunOutcome(runner, case.id))
    plan = [("handrolled", c) for c in list(load_cases().values())[:6]]
    reported: list[int] = []

    def on_done(i: int, outcome: RunOutcome) -> None:
        reported.append(i)
        raise RuntimeError("the caller's own error")

    with pytest.raises(RuntimeError, match="the caller's own error"):
        schedule.Here(2).run(plan, WHERE, RunOptions(), on_done)
    assert 1 <= len(reported) <= 2  # the cells not started yet were dropped
