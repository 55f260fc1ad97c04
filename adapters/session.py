"""The normalized contracts every runner shares.

`Limits` in, `RunResult` out; between them a `Runner` runs its framework's
loop with the model reached through the `ModelRecorder` and the tools through
the `Guard` (in-process, or served over MCP: `session.tools`). `RunSession`
holds what one run needs from both boundaries: its clock, its stop and its
result; whether another model call is allowed is its budget's (`session.budget`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import threading
from abc import abstractmethod
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any, NoReturn, TypeVar

from looplab.adapters.boundary import pacing
from looplab.adapters.boundary.budget import Refusal, RunBudget, check_priced
from looplab.adapters.boundary.clients import RunClients
from looplab.adapters.boundary.noise import framework_noise
from looplab.adapters.boundary.recorder import ModelRecorder
from looplab.adapters.contract.agents import MAIN_AGENT, Delegate
from looplab.adapters.contract.cancel import Cancellation
from looplab.adapters.contract.errors import LooplabError, StopRun
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import ModelSpec, ToolTransport
from looplab.adapters.contract.result import Finished, NativeEnd, RunResult, Totals
from looplab.adapters.contract.runner import Probe, RunnerDeclaration
from looplab.adapters.contract.tools import ToolBoundary
from looplab.adapters.contract.trace import Trace
from looplab.shared_tools import Guard
from looplab.shared_tools.records import clean

__all__ = ["RunSession", "Runner"]

T = TypeVar("T")


class RunSession:
    """One run's shared bookkeeping: the clock, the stop and the result, over both boundaries and the budget.

    Every model request passes the budget's gate first (`budget.gate()`), so a runner whose own cap
    would allow one more call is still stopped at `max_steps`, the deadline,
    the budget or a stop the Guard asked for; `stop` remembers which.
    """

    #: What the runner's `prepare` returned for this run, for its `loop` (None: it prepares nothing).
    prepared: Any = None

    def __init__(
        self,
        guard: Guard,
        limits: Limits,
        model: ModelSpec,
        probe: Probe,
        *,
        system_prompt: str = "",
        tools_named_in_text: Callable[[str], list[str]] | None = None,
        cancel: Cancellation | None = None,
        delegate: Delegate | None = None,
    ) -> None:
        """`tools_named_in_text`: the runner's reader of tool calls in a reply's text (`Runner.tools_named_in_text`),
        for the recorder; None where no runner's loop runs. `cancel`: the caller's switch (`cancel_run` hears it)."""
        self.guard, self.limits, self.model = guard, limits, model
        #: What the runner tells the model first (the case's); empty only in a session that runs no loop.
        self.system_prompt = system_prompt
        #: The second agent the run's agent may hand work to (the case's), built with the framework's own way of
        #: delegating, with the agent it may hand work to in turn (`Delegate.delegate`); None in a run of one agent.
        self.delegate = delegate
        #: What the adapter calls tools through; the Guard keeps the records either way.
        self.tools: ToolBoundary = guard
        self.tool_transport: ToolTransport = "in-process"
        #: The native knob the runner sets, and its value (None: the framework's default).
        self.knob, self.cap = probe.knob, probe.value
        #: The value a delegate's own knob is set to (None: the framework's default): the parent's, unless the probe
        #: leaves the agents below at their default (`Probe.child_default`).
        self.child_cap = None if probe.child_default else probe.value
        #: The tool the runner marks as ending the run with its result, the framework's own way (None: none).
        self.ending_tool = probe.ending_tool
        #: The framework's own dollar budget to set (`Runner.cost_knob`; None: unset).
        self.budget_usd = probe.budget_usd
        self.native_end: NativeEnd | None = None
        #: The framework's own counters where the run ended, as the runner read them (`report_counters`).
        self.counters: dict[str, int] = {}
        self.clock = guard.clock
        #: The run's limits on its model calls, the gate before each request; counted off `recorder`.
        self.budget = RunBudget(limits, self, pacing.current())
        self.recorder = ModelRecorder(
            clock=self.clock,
            pricing=model.pricing,
            budget=self.budget,
            headers=model.headers,
            tools_named_in_text=tools_named_in_text,
            agents={d.name: d.marker for d in delegate.tree} if delegate is not None else {},
            main_agent=MAIN_AGENT if delegate is not None else None,
        )
        # The run may have begun before its session (its workspace copied on its clock): `max_seconds` counts from then.
        self.started = self.clock() if guard.began is None else guard.began
        self.guard.deadline = self.started + limits.max_seconds
        self.guard.cutoff = self.budget.steps_spent
        self.stop: StopRun | None = None
        #: The run's provider SDK clients, recorded at the model boundary.
        self.clients = RunClients(self.recorder, model, limits)
        #: Set when the caller cancelled the run: every wait of the run ends within a slice of `WAIT_SLICE_S`.
        self.cancelled = threading.Event()
        self._on_cancel: list[Callable[[], None]] = []
        self.stop_listening = cancel.listen(self.cancel_run) if cancel is not None else (lambda: None)

    def cancel_run(self, detail: str) -> None:
        """End the run as `cancelled` (unless it already stopped): the next model call is refused, the exchange in
        flight cut, the tool running not waited for and the tests it started killed."""
        self.stop = self.stop or StopRun(StopReason.CANCELLED, detail)
        self.cancelled.set()
        self.guard.halt(detail)
        for callback in self._on_cancel:
            callback()

    def when_cancelled(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the run is cancelled (now, if it was): for a transport that cuts its own exchanges."""
        self._on_cancel.append(callback)
        if self.cancelled.is_set():
            callback()

    def report_counters(self, counters: Mapping[str, int | None]) -> None:
        """Keep what the framework's own counters read when the run ended, by where a user reads each; a counter
        the framework did not fill (None) is left out. A later reading of the same counter replaces the earlier."""
        self.counters |= {k: v for k, v in counters.items() if isinstance(v, int) and not isinstance(v, bool)}

    def halted(self) -> Refusal | None:
        """A stop decided outside the budget, which the gate asks first: the Guard's, or the run's cancel."""
        return self.tool_stop() or self._cancelled_stop()

    def stop_with(self, why: Refusal) -> NoReturn:
        """End the run for `why`, unless it already stopped (the first stop wins), and raise the stop: a refused
        request, or an exchange the deadline cut short (raised so that neither an SDK nor a framework retries)."""
        self.stop = self.stop or StopRun(*why)
        raise self.stop

    def conclude(self, answer: str | None, error: BaseException | None = None) -> Finished:
        """How a framework's run ended, decided from the boundaries rather than from the framework.

        A stop the boundaries asked for wins, however the framework surfaced
        it (raised, wrapped, swallowed). Otherwise a run whose last model call
        still asked for tools did not answer: it hit the cap (`max_steps`) or
        failed (`error`).
        """
        self.native_end = self.native_end or _native_end(answer, error)
        # The first stop wins. A gate refusal is always the first: the gate asks the Guard before anything
        # else, so a Guard stop that came earlier is what the gate refused with.
        if self.stop is not None:
            return Finished(self.stop.reason, detail=self.stop.detail)
        if why := self.tool_stop():
            return Finished.stopped(why)
        if answer is not None and not answer.strip():  # an empty reply answers nothing
            answer = None
        calls = self.recorder.calls
        wanted_tools = bool(calls and calls[-1].tool_calls_requested)
        if (answer is None or wanted_tools) and self.remaining_s() <= 0:  # e.g. a model call hung until the deadline
            how = f" ({type(error).__name__})" if error else ""
            return Finished(StopReason.TIMEOUT, detail=f"max_seconds={self.limits.max_seconds:g} elapsed{how}")
        if wanted_tools and len(calls) >= self.limits.max_steps:
            how = f"the runner raised {type(error).__name__}" if error else "the runner returned without an answer"
            return Finished(StopReason.MAX_STEPS, detail=f"max_steps={self.limits.max_steps} model calls made; {how}")
        if answer is None and (unanswered := self.recorder.pending):  # the model endpoint failed the last call
            last = unanswered[-1]
            how = f"answered {last.status}" if last.status is not None else "gave no response"
            tries = f" after {len(unanswered)} attempts" if len(unanswered) > 1 else ""
            return Finished(StopReason.ERROR, detail=f"the model endpoint {how}{tries}: {last.error}")
        if error is not None:
            return Finished(StopReason.ERROR, detail=f"{type(error).__name__}: {error}")
        if wanted_tools or answer is None:
            return Finished(StopReason.ERROR, detail="the runner stopped before the model answered")
        return Finished(StopReason.FINAL_ANSWER, answer)

    def openai_client(self, *, is_async: bool = True) -> Any:
        """An `openai` client for this run's model, recorded at the model boundary (`clients`)."""
        return self.clients.openai_client(is_async=is_async)

    def anthropic_client(self, *, is_async: bool = True) -> Any:
        """An `anthropic` client for this run's model, recorded at the model boundary (`clients`)."""
        return self.clients.anthropic_client(is_async=is_async)

    def gemini_client(self, *, is_async: bool = True) -> Any:
        """A `google.genai.Client` for this run's model, recorded at the model boundary (`clients`)."""
        return self.clients.gemini_client(is_async=is_async)

    def http_client(self, sdk: ModuleType, *, is_async: bool = False) -> Any:
        """A recording HTTP client of the kind `sdk` (the `openai` or `anthropic` module) takes (`clients`)."""
        return self.clients.http_client(sdk, is_async=is_async)

    def run_async(self, main: Coroutine[Any, Any, T]) -> T:
        """`asyncio.run(main)`, closing this run's async HTTP clients inside the loop before it ends.

        Their connections belong to the loop: closed after it, they leak (one open socket a run).
        """

        async def closing() -> T:
            try:
                return await main
            finally:
                await self.clients.aclose()

        return asyncio.run(closing())

    def close_clients(self) -> None:
        """Close the run's HTTP clients (async ones are closed by `run_async`, in their loop)."""
        self.clients.close()

    def remaining_s(self) -> float:
        """Seconds left of `max_seconds`; none once the run is cancelled."""
        if self.cancelled.is_set():
            return 0.0
        return max(0.0, self.started + self.limits.max_seconds - self.clock())

    def budget_stop(self, request_bytes: int = 0) -> Refusal | None:
        """Checked before every model call: the reason another call is not allowed, if any (a cancel, or the
        budget's `refusal`: a limit reached, or a call that would pass one)."""
        return self._cancelled_stop() or self.budget.refusal(request_bytes)

    def _cancelled_stop(self) -> Refusal | None:
        """The stop of a cancelled run: every request after the cancel is refused with it."""
        if self.cancelled.is_set() and self.stop is not None:  # set before `cancelled`: the cancel, or a stop before
            return self.stop.reason, self.stop.detail
        return None

    def tool_stop(self) -> tuple[StopReason, str] | None:
        """Checked after tool calls: the Guard's request to end the run, if any."""
        if self.guard.stop:
            return StopReason(self.guard.stop.reason), self.guard.stop.detail
        return None

    def result(
        self, runner: Runner, reason: StopReason, answer: str | None = None, detail: str | None = None
    ) -> RunResult:
        trace = Trace.from_boundaries(self.recorder.calls, self.guard.records, self.recorder.pending)
        calls, failed = self.recorder.calls, self.recorder.failed
        return RunResult(
            runner=runner.name,
            runner_version=runner.version(self.model),
            model=self.model.label,
            stop_reason=reason,
            stop_detail=_cleaned(detail),
            answer=_cleaned(answer) if reason is StopReason.FINAL_ANSWER else None,
            native_cap=runner.native_cap(self.limits),
            limits=self.limits,
            started_at=datetime.now(UTC) - timedelta(seconds=self.clock()),
            totals=Totals(
                model_calls=len(calls),
                failed_model_calls=len(failed),
                # every attempt but the first of each model call tried (the answered ones, and one left unanswered)
                retries=len(failed) - (1 if self.recorder.pending else 0),
                tool_calls=len(trace.tool_calls),
                input_tokens=sum(c.input_tokens for c in calls),
                output_tokens=sum(c.output_tokens for c in calls),
                cached_input_tokens=sum(c.cached_input_tokens for c in calls),
                cost_usd=None if (cost := self.recorder.cost_usd) is None else round(cost, 8),
                wall_s=round(self.clock() - self.started, 4),
            ),
            trace=trace,
        )


class Runner(RunnerDeclaration):
    """One runner: the class a runner module subclasses, exporting its runner as `RUNNER`.

    Subclasses hold framework glue only: `loop()` and `native_cap()`, and `prepare()` for set-up a run needs before
    its clock starts. `run` is shared.
    """

    @abstractmethod
    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the framework's loop; only framework glue belongs here."""

    def prepare(self, model: ModelSpec, tools: ToolTransport) -> Any:
        """Set-up for one run, done by `run` once the run is accepted and before its session starts the run's clock
        (importing an SDK that takes seconds, installing a program's packages); `loop` reads what it returns as
        `session.prepared`. `model` is the run's, its `stream` decided; `tools` is the transport asked for.

        A caller that started the clock before (`Guard.began`: the harness, for the workspace copy) counts it too.
        """
        return None

    def run(
        self,
        task: str,
        guard: Guard,
        limits: Limits,
        model: ModelSpec,
        probe: Probe | None = None,
        tools: ToolTransport = "in-process",
        *,
        system_prompt: str,
        cancel: Cancellation | None = None,
        delegate: Delegate | None = None,
    ) -> RunResult:
        """Run `task` with the tools behind `guard`; never raises for a failing run. Every runner's: a runner's own
        set-up goes in `prepare`.

        `system_prompt` (the case's) is what the model is told first: `loop` reads it as `session.system_prompt`.

        `probe` sets one of `knobs` to a value (or leaves it unset) instead of
        mapping `max_steps` onto the first; `looplab caps` measures that way,
        with `max_steps` as the safety stop. `tools="mcp"` serves the Guard over
        MCP and has the runner call it as a client (it needs the `mcp` extra). `cancel` ends the run as
        `cancelled` when its caller cancels it, with the partial trace. `delegate` is a second agent the run's
        agent may hand work to (a runner whose `delegation` is None refuses it).
        """
        check_priced(limits, model)
        self.api_for(model)  # a wire API the runner does not speak is refused here, whatever its loop does
        model = dataclasses.replace(model, stream=self.stream_for(model))  # the loop reads a decided `stream`
        if delegate is not None and self.delegation is None:
            raise LooplabError(f"{self.name} cannot delegate here: its declaration names no `delegation`")
        if delegate is not None and delegate.delegate is not None and (why := self.delegation_gaps.get("nested")):
            raise LooplabError(f"{self.name} cannot nest delegates here: {why}")
        probe = probe or Probe(knob=self.knobs[0], value=limits.max_steps)
        if probe.ending_tool is not None and self.ending_tool is None:
            raise LooplabError(f"{self.name} cannot end a run by a tool here: its declaration names no `ending_tool`")
        if probe.budget_usd is not None and self.cost_knob is None:
            raise LooplabError(f"{self.name} has no dollar budget of its own: its declaration names no `cost_knob`")
        prepared = self.prepare(model, tools)
        session = RunSession(
            guard,
            limits,
            model,
            probe,
            system_prompt=system_prompt,
            tools_named_in_text=self.tools_named_in_text,
            cancel=cancel,
            delegate=delegate,
        )
        session.prepared = prepared
        with framework_noise() as noise, contextlib.ExitStack() as stack:
            try:
                if tools == "mcp" and not self.out_of_process:
                    from looplab.adapters.boundary.mcp_tools import serve_to

                    session.tools, session.tool_transport = (
                        stack.enter_context(serve_to(session.guard, session.limits.max_seconds)),
                        "mcp",
                    )
                # In a copy of the caller's context: what a framework leaves in its context variables (CrewAI's
                # event stack after a run that raised) ends with the run instead of carrying into the next one.
                finished = contextvars.copy_context().run(self.loop, task, session)
            except LooplabError:
                raise
            except (Exception, StopRun, BaseExceptionGroup) as exc:  # a crash is `error`, with its partial trace
                finished = session.conclude(None, exc)
            finally:
                session.stop_listening()
                session.close_clients()
        result = session.result(self, finished.reason, finished.answer, finished.detail)
        result.warnings = [clean(w) for w in noise]
        result.native_end = session.native_end
        if result.native_end is not None:
            result.native_end.counters = dict(session.counters)
        result.tool_transport = session.tool_transport
        return result


def _cleaned(text: str | None) -> str | None:
    """Text a model or a framework produced, safe to write (a lone surrogate would break every JSON writer)."""
    return None if text is None else clean(text)


def _native_end(answer: str | None, error: BaseException | None) -> NativeEnd:
    if isinstance(error, StopRun):
        return NativeEnd(kind="refused by the model boundary", message=error.detail)
    if error is None:
        return NativeEnd(kind="returned", text=_cleaned(answer))
    kind = type(error)
    carriers = ("run_data", "messages", "state", "history")
    history = next((f"{kind.__name__}.{attr}" for attr in carriers if getattr(error, attr, None)), None)
    return NativeEnd(
        kind="raised",
        exception=f"{kind.__module__}.{kind.__qualname__}",
        message=clean(str(error)[:300]),
        history=history,
    )
