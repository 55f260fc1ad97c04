"""The runner base (`looplab.adapters.session.Runner`): one shared `run`, which no runner overrides, and the set-up
hook it calls before the run's clock starts, whose result reaches the loop as `session.prepared`."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from looplab.adapters import registry
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import ModelSpec, ToolTransport
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import Probe
from looplab.adapters.session import Runner, RunSession
from looplab.shared_tools import Guard, Workspace
from tests.conftest import FIXTURE_REPO, SYSTEM_PROMPT

INSTALLED = [name for name, info in registry.RUNNERS.items() if info.installed()]
#: How long the fake runner's set-up takes: longer than its run's whole `max_seconds`.
PREPARE_S = 0.3


@pytest.mark.parametrize("runner", INSTALLED)
def test_no_runner_overrides_the_shared_run(runner: str) -> None:
    assert type(registry.load(runner)).run is Runner.run


class SlowToPrepare(Runner):
    """A runner whose set-up outlasts its run's `max_seconds`, and whose loop says what it was handed."""

    name, extra, distribution, knobs = "slow_to_prepare", "none", "none", ("k",)

    def native_cap(self, limits: Limits) -> NativeCap:
        return NativeCap(knob="k", value=limits.max_steps)

    def prepare(self, model: ModelSpec, tools: ToolTransport) -> Any:
        time.sleep(PREPARE_S)
        return (tools, model.stream)

    def loop(self, task: str, session: RunSession) -> Finished:
        if session.remaining_s() <= 0:  # the set-up was spent from `max_seconds`
            return session.conclude(None)
        return session.conclude(f"prepared {session.prepared}")


def test_the_set_up_is_off_the_runs_clock_and_reaches_the_loop(guard: Guard) -> None:
    limits = Limits(max_seconds=PREPARE_S / 3)
    result = SlowToPrepare().run("task", guard, limits, ModelSpec("openai", "m"), system_prompt=SYSTEM_PROMPT)
    assert (result.stop_reason, result.answer) == (StopReason.FINAL_ANSWER, "prepared ('in-process', False)")
    assert result.totals.wall_s < PREPARE_S


def test_a_refused_run_is_not_set_up(guard: Guard) -> None:
    """The run's checks come first: a model the runner cannot take is refused without the set-up's wait."""
    began = time.monotonic()
    with pytest.raises(LooplabError, match="speaks only openai"):
        SlowToPrepare().run("task", guard, Limits(), ModelSpec("anthropic", "m"), system_prompt=SYSTEM_PROMPT)
    assert time.monotonic() - began < PREPARE_S


def test_a_frameworks_counters_keep_whole_numbers_and_a_later_reading_replaces_an_earlier() -> None:
    spec = ModelSpec("openai", "scripted", base_url="http://127.0.0.1:9")
    with Workspace(FIXTURE_REPO) as ws:
        session = RunSession(Guard(ws), Limits(), spec, Probe(knob="test", value=None))

        @given(st.dictionaries(st.text(max_size=20), st.none() | st.booleans() | st.integers(), max_size=5), st.data())
        def check(first: dict[str, int | bool | None], data: st.DataObject) -> None:
            later = data.draw(st.dictionaries(st.sampled_from([*first, "other"]), st.integers(), max_size=3))
            session.counters = {}
            session.report_counters(first)
            session.report_counters(later)
            assert session.counters == {k: v for k, v in first.items() if type(v) is int} | later

        check()
