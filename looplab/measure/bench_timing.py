"""The bench's timing of one run: through looplab (`timed_run`) and of the same loop written bare (`timed_bare`).

How a run is timed, and what a turn's overhead is, is the bench's method (`looplab.measure.bench`).
"""

from __future__ import annotations

import functools
import gc
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from looplab.adapters.contract.bare import BareRun, BareTool
    from looplab.adapters.contract.trace import Trace
    from looplab.shared_tools import Tool


# --- one timed run through looplab ---------------------------------------------------


class Sample(BaseModel):
    """One timed run: wall time, time in tools and in the model, and the per-turn overheads."""

    wall_s: float
    #: Time inside the tool functions themselves: the Guard's checks and its hand-off to a worker thread around
    #: them are looplab's time, as a bare loop's tools have neither.
    tools_s: float
    model_s: float
    turns: int
    turn_overheads_s: list[float]
    stop_reason: str


def timed_run(runner: str, case: Any, where: Any) -> Sample:
    """Run `case` once through `runner`, timing it as `looplab.measure.bench`'s docstring says."""
    from looplab.adapters import registry
    from looplab.shared_tools import Guard, Workspace

    adapter = registry.load(runner)
    tools = [_timed(t) for t in case.tool_set()]
    spent_before = _WATCH.spent
    spec = where.spec_for(adapter, case.model)
    with Workspace(case.repo_path, overlay=case.overlay_path) as ws:
        origin = [0.0]
        # The run's own clock starts when Runner.run is called, so turn windows start at 0.
        guard = Guard(
            ws, tools=tools, max_repeats=case.limits.max_repeats, clock=lambda: time.perf_counter() - origin[0]
        )
        gc.collect()  # the previous run's garbage is not this run's overhead
        origin[0] = time.perf_counter()
        result = adapter.run(case.stated_task, guard, case.limits, spec, system_prompt=case.system_prompt)
        end = guard.clock()
    steps = result.trace.steps
    return Sample(
        wall_s=end,
        tools_s=_WATCH.spent - spent_before,
        model_s=sum(s.model_call.latency_s for s in steps),
        turns=len(steps),
        turn_overheads_s=turn_overheads(result.trace, end),
        stop_reason=str(result.stop_reason),
    )


def turn_overheads(trace: Trace, end: float) -> list[float]:
    """Seconds of each model turn spent outside the model call and the turn's tool calls.

    Turn i's window runs from turn i's model request to turn i+1's (from 0,
    the start of the run, for the first; to `end` for the last), so setup and
    teardown are counted; tool calls made before any model call count against
    the first turn.
    """
    steps = trace.steps
    bounds = [0.0] + [s.model_call.started_at for s in steps[1:]] + [end]
    orphans = sum(c.duration_s for c in trace.orphan_tool_calls)
    overheads = []
    for i, step in enumerate(steps):
        inside = step.model_call.latency_s + sum(c.duration_s for c in step.tool_calls) + (orphans if i == 0 else 0.0)
        overheads.append(bounds[i + 1] - bounds[i] - inside)
    return overheads


# --- the same loops written bare -----------------------------------------------------


class BareSample(BaseModel):
    """One run of a bare loop: wall time, time in the tool functions, model turns."""

    wall_s: float
    tools_s: float
    turns: int


def bare_loop(runner: str) -> BareRun | None:
    """`runner`'s bare loop, as it declares it; None for a runner without one (one in node).

    A framework that is not installed fails here, as its looplab run would.
    """
    from looplab.adapters import registry

    return registry.load(runner).bare_loop()


class Stopwatch:
    """Seconds spent inside the functions it wraps, summed over every thread that calls them (a framework may run
    one turn's tool calls on threads)."""

    def __init__(self) -> None:
        self.spent, self._lock = 0.0, threading.Lock()

    def timed(self, fn: Callable[..., str]) -> Callable[..., str]:
        """`fn`, timed; its signature kept (the Guard reads a tool's own timeout from it)."""

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> str:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with self._lock:
                    self.spent += time.perf_counter() - started

        return call


#: Times the tool functions of every looplab run the bench makes (a run reads what it added).
_WATCH = Stopwatch()


@functools.lru_cache(maxsize=64)
def _timed(tool: Tool) -> Tool:
    """`tool` with its function timed by `_WATCH`, one copy per tool: a run's shared tools are built once per process,
    so a copy made for every timed run would count work against looplab that a real run does not do."""
    return replace(tool, fn=_WATCH.timed(tool.fn))


def bare_tools(ws: Any, tools: list[Tool], watch: Stopwatch) -> list[BareTool]:
    """The tool functions called directly on a workspace, as `BareTool`s, timed; a failure is an error string."""
    from looplab.adapters.contract.bare import BareTool

    def plain(fn: Callable[..., str]) -> Callable[..., str]:
        def call(**kwargs: Any) -> str:
            try:
                return fn(ws, **kwargs)
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"

        return call

    return [BareTool(t.name, t.description, t.parameters, watch.timed(plain(t.fn))) for t in tools]


def timed_bare(runner: str, loop: BareRun, case: Any, where: Any) -> BareSample:
    """One run of `runner`'s bare loop on `case`, in a fresh workspace (its copy not counted), on its twin's model."""
    from looplab.adapters import registry
    from looplab.shared_tools import Workspace, default_tools

    model = where.spec_for(registry.load(runner), case.model).name
    with Workspace(case.repo_path, overlay=case.overlay_path) as ws:
        watch = Stopwatch()
        tools = bare_tools(ws, default_tools(allow_writes=case.allow_writes), watch)
        gc.collect()
        started = time.perf_counter()
        turns = loop(
            case.stated_task, tools, where.scripted_urls, model, case.limits.max_steps, system_prompt=case.system_prompt
        )
        return BareSample(wall_s=time.perf_counter() - started, tools_s=watch.spent, turns=turns)


def outside_tools(sample: Sample | BareSample) -> float:
    """A run's time outside its tool calls."""
    return sample.wall_s - sample.tools_s
