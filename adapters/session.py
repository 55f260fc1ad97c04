"""The normalized contracts every runner shares.

`Limits` in, `RunResult` out; between them an `Adapter` runs its framework's
loop with the model reached through the `ModelRecorder` and the tools through
the `Guard` (in-process, or served over MCP: `session.tools`). `RunSession`
holds what one run needs from both boundaries and is the one place that
decides whether the budget allows another model call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import importlib
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any, TypeVar

from looplab.adapters.boundary import pacing
from looplab.adapters.boundary.noise import framework_noise
from looplab.adapters.boundary.recorder import ModelRecorder, forecast_input_tokens, http_module_for
from looplab.adapters.contract.agents import MAIN_AGENT, Delegate
from looplab.adapters.contract.cancel import Cancellation
from looplab.adapters.contract.errors import LooplabError, StopRun
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import ModelSpec, ToolTransport
from looplab.adapters.contract.result import Finished, NativeEnd, RunResult, Totals
from looplab.adapters.contract.runner import Probe, Runner
from looplab.adapters.contract.tools import ToolBoundary
from looplab.adapters.contract.trace import Trace
from looplab.shared_tools import Guard
from looplab.shared_tools.records import clean

__all__ = ["Adapter", "RunSession", "check_priced"]

T = TypeVar("T")


def check_priced(limits: Limits, model: ModelSpec) -> None:
    """Refuse, in one line and before the run, a dollar budget for a model whose price is unknown."""
    if limits.max_cost_usd is not None and model.pricing is None:
        raise LooplabError(
            f"max_cost_usd={limits.max_cost_usd:g} needs a price and {model.label} has none in the table: "
            "pass --price IN,OUT (dollars per million tokens)"
        )


class RunSession:
    """One run's shared bookkeeping: the clock, both boundaries, the budget.

    Every model request passes `gate()` first, so a runner whose own cap
    would allow one more call is still stopped at `max_steps`, the deadline,
    the budget or a stop the Guard asked for; `stop` remembers which.
    """

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
        #: delegating; None in a run of one agent.
        self.delegate = delegate
        #: What the adapter calls tools through; the Guard keeps the records either way.
        self.tools: ToolBoundary = guard
        self.tool_transport: ToolTransport = "in-process"
        #: The native knob the runner sets, and its value (None: the framework's default).
        self.knob, self.cap = probe.knob, probe.value
        self.native_end: NativeEnd | None = None
        self.clock = guard.clock
        self.pacer = pacing.current()
        self.recorder = ModelRecorder(
            clock=self.clock,
            pricing=model.pricing,
            gate=self.gate,
            pacer=self.pacer,
            headers=model.headers,
            time_left=self.remaining_s,
            expire=self.expire,
            tools_named_in_text=tools_named_in_text,
            agents={delegate.name: delegate.marker} if delegate is not None else {},
            main_agent=MAIN_AGENT if delegate is not None else None,
        )
        # The run may have begun before its session (its workspace copied on its clock): `max_seconds` counts from then.
        self.started = self.clock() if guard.began is None else guard.began
        self.guard.deadline = self.started + limits.max_seconds
        self.guard.cutoff = self.steps_spent
        self.stop: StopRun | None = None
        self._clients: list[tuple[Any, bool]] = []  # the HTTP clients built, and whether each is async
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

    def gate(self, request_bytes: int = 0) -> None:
        """Called before each model request: raises `StopRun` if the run must end instead."""
        if why := self.tool_stop() or self.budget_stop(request_bytes) or self.pace():
            self.stop = self.stop or StopRun(*why)
            raise self.stop

    def expire(self) -> None:
        """Called when the run's deadline cut a model exchange short: the run stops as `timeout` (raised, as `gate`
        raises, so that neither an SDK nor a framework retries the call)."""
        detail = f"max_seconds={self.limits.max_seconds:g} elapsed during a model call"
        self.stop = self.stop or StopRun(StopReason.TIMEOUT, detail)
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
        """An `openai` client for this run's model, recorded at the model boundary."""
        import openai  # a provider SDK, present whenever a runner that calls this is installed

        cls = openai.AsyncOpenAI if is_async else openai.OpenAI
        http = self.http_client(openai, is_async=is_async)
        return cls(**self._client_options(), http_client=http)

    def anthropic_client(self, *, is_async: bool = True) -> Any:
        """An `anthropic` client for this run's model, recorded at the model boundary."""
        import anthropic

        cls = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        http = self.http_client(anthropic, is_async=is_async)
        return cls(**self._client_options(), http_client=http)

    def gemini_client(self, *, is_async: bool = True) -> Any:
        """A `google.genai.Client` for this run's model, its sync (or async) requests recorded at the model boundary.

        The recording HTTP client is the caller's to google-genai: neither closing nor collecting the `Client`
        closes it; the session does, with the run's other clients.
        """
        from google import genai
        from google.genai import _api_client, types

        # The HTTP client module google-genai itself would build on (httpx unless GOOGLE_GENAI_HTTP_CLIENT says;
        # google-genai 1.x, which CrewAI pins, knows httpx only).
        backend = getattr(_api_client, "_get_http_client_backend", lambda: "httpx")
        http = importlib.import_module(backend())
        recorded = self._recording_client(http, is_async=is_async)
        options = types.HttpOptions(
            base_url=self.model.base_url,
            # google-genai sends its own per-request timeout (None: none at all), so the run's is set here too.
            timeout=int(self.limits.max_seconds * 1000),
            retry_options=types.HttpRetryOptions(attempts=self.model.retries + 1),
            **{"httpx_async_client" if is_async else "httpx_client": recorded},
        )
        # `google:` is Gemini's own API: a caller's GOOGLE_GENAI_USE_VERTEXAI must not turn the paths into Vertex AI's.
        return genai.Client(vertexai=False, api_key=self.model.key(), http_options=options)

    def _client_options(self) -> dict[str, Any]:
        """What every provider SDK client of this run is built with: key, endpoint, and the one retry policy."""
        return {"api_key": self.model.key(), "base_url": self.model.base_url, "max_retries": self.model.retries}

    def http_client(self, sdk: ModuleType, *, is_async: bool = False) -> Any:
        """A recording HTTP client of the kind `sdk` (the `openai` or `anthropic` module) takes.

        Its timeout is the run's whole `max_seconds`, so a model call that hangs cannot outlast the run.
        """
        return self._recording_client(http_module_for(sdk), is_async=is_async)

    def _recording_client(self, http: ModuleType, *, is_async: bool) -> Any:
        """A recording client of the HTTP module `http` (`httpx` or `httpx2`), closed with the run."""
        timeout = http.Timeout(self.limits.max_seconds, connect=min(10.0, self.limits.max_seconds))
        plain = (self.model.base_url or "").startswith("http://")
        client = self.recorder.http_client(http, is_async=is_async, tls=not plain, timeout=timeout)
        self._clients.append((client, is_async))
        return client

    def run_async(self, main: Coroutine[Any, Any, T]) -> T:
        """`asyncio.run(main)`, closing this run's async HTTP clients inside the loop before it ends.

        Their connections belong to the loop: closed after it, they leak (one open socket a run).
        """

        async def closing() -> T:
            try:
                return await main
            finally:
                for client, is_async in self._clients:
                    if is_async:
                        await client.aclose()

        return asyncio.run(closing())

    def close_clients(self) -> None:
        """Close the run's HTTP clients (async ones are closed by `run_async`, in their loop)."""
        for client, is_async in self._clients:
            if not is_async:
                client.close()

    def remaining_s(self) -> float:
        """Seconds left of `max_seconds`; none once the run is cancelled."""
        if self.cancelled.is_set():
            return 0.0
        return max(0.0, self.started + self.limits.max_seconds - self.clock())

    def budget_stop(self, request_bytes: int = 0) -> tuple[StopReason, str] | None:
        """Checked before every model call: the reason another call is not allowed, if any.

        The dollar and token budgets look ahead: a call whose estimated cost (from the request's size) would take
        the spend past `max_cost_usd`, or whose input would take the tokens past `max_tokens`, is not made; what a
        made call adds beyond the budget is at most its own output (bounded by the request's `max_tokens`).
        """
        if self.cancelled.is_set() and self.stop is not None:  # set before `cancelled`: the cancel, or a stop before
            return self.stop.reason, self.stop.detail
        calls = len(self.recorder.calls)
        if calls >= self.limits.max_steps:
            return StopReason.MAX_STEPS, f"max_steps={self.limits.max_steps} model calls made"
        if self.remaining_s() <= 0:
            return StopReason.TIMEOUT, f"max_seconds={self.limits.max_seconds:g} elapsed"
        if self.limits.max_cost_usd is not None:
            spent, next_call = self.recorder.cost_usd or 0.0, self.recorder.forecast_cost(request_bytes) or 0.0
            if spent + next_call > self.limits.max_cost_usd:
                return StopReason.BUDGET, (
                    f"max_cost_usd={self.limits.max_cost_usd:g}: spent {spent:.6f}, "
                    f"the next call would cost about {next_call:.6f}"
                )
        if self.limits.max_tokens is not None:
            spent, next_input = self.recorder.tokens, forecast_input_tokens(request_bytes)
            if spent + next_input > self.limits.max_tokens:
                return StopReason.BUDGET, (
                    f"max_tokens={self.limits.max_tokens}: {spent} tokens spent, "
                    f"the next request's input is about {next_input} more"
                )
        return None

    def pace(self) -> tuple[StopReason, str] | None:
        """Waits for this request's turn (`--rpm`, a 429's retry-after); the reason to stop if it comes too late.

        The wait blocks this run's thread only; other runs in flight go on.
        """
        wait = self.pacer.reserve(self.pacer.clock() + self.remaining_s())
        if wait is None:
            rpm = f"--rpm {self.pacer.rpm} or " if self.pacer.rpm else ""
            return StopReason.TIMEOUT, (
                f"max_seconds={self.limits.max_seconds:g} would pass before the next request may go "
                f"({rpm}a 429's retry-after holds requests back)"
            )
        if wait > 0:
            time.sleep(wait)
        return None

    def steps_spent(self) -> str | None:
        """Why no model call is left to read a tool's result, if `max_steps` says so (the Guard's `cutoff`).

        One behaviour for every runner: the tools of the last allowed model call do not run, whether the
        framework would have run them (most do) or ended first (LangGraph's step counter does).
        """
        if self.recorder.replies_begun >= self.limits.max_steps:
            return f"max_steps={self.limits.max_steps} model calls made"
        return None

    def tool_stop(self) -> tuple[StopReason, str] | None:
        """Checked after tool calls: the Guard's request to end the run, if any."""
        if self.guard.stop:
            return StopReason(self.guard.stop.reason), self.guard.stop.detail
        return None

    def result(
        self, runner: Adapter, reason: StopReason, answer: str | None = None, detail: str | None = None
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


class Adapter(Runner):
    """One runner. Subclasses hold framework glue only: `loop()` and `native_cap()`."""

    @abstractmethod
    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the framework's loop; only framework glue belongs here."""

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
        """Run `task` with the tools behind `guard`; never raises for a failing run.

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
        probe = probe or Probe(knob=self.knobs[0], value=limits.max_steps)
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
