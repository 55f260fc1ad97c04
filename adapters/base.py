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
import functools
import importlib.metadata
import inspect
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from types import ModuleType
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from adapters import pacing
from adapters.noise import framework_noise
from adapters.pricing import Pricing
from adapters.recorder import ModelRecorder, http_module_for
from adapters.trace import Trace
from shared_tools import Guard
from shared_tools.records import clean

Api = Literal["chat", "responses", "messages"]
#: How a runner reaches the Guard: calling it in this process, or as an MCP client of a tool server.
ToolTransport = Literal["in-process", "mcp"]
T = TypeVar("T")
#: Retries of a failed model request, with the SDK's own backoff (and its reading of retry-after).
DEFAULT_RETRIES = 2
#: The reply length every runner asks for on Anthropic Messages, which requires one (a framework's own default
#: would make one runner's replies shorter than another's).
MESSAGES_MAX_TOKENS = 4096
PROVIDER_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
#: Whose wire format each API is.
PROVIDER_OF_API: dict[str, str] = {"messages": "anthropic", "chat": "openai", "responses": "openai"}


def check_api(api: str | None, provider: str) -> None:
    """Refuse, in one line, an API that belongs to the other provider than the model's."""
    if api is None or PROVIDER_OF_API[api] == provider:
        return
    if provider == "openai":
        why = "Anthropic's: use an anthropic: model, or --api chat or responses with openai models"
    else:
        why = "OpenAI's: use an openai: model, or --api messages with anthropic models"
    raise LooplabError(f"the {api} API is {why}")


def check_priced(limits: Limits, model: ModelSpec) -> None:
    """Refuse, in one line and before the run, a dollar budget for a model whose price is unknown."""
    if limits.max_cost_usd is not None and model.pricing is None:
        raise LooplabError(
            f"max_cost_usd={limits.max_cost_usd:g} needs a price and {model.label} has none in the table: "
            "pass --price IN,OUT (dollars per million tokens)"
        )


class StopReason(StrEnum):
    """Why a run ended. Anything but `final_answer` carries `answer=None`."""

    FINAL_ANSWER = "final_answer"
    MAX_STEPS = "max_steps"
    TIMEOUT = "timeout"
    BUDGET = "budget"
    REPETITION = "repetition"
    REJECTED = "rejected"
    ERROR = "error"


class Limits(BaseModel):
    """Normalized limits: the same numbers mean the same behaviour in every runner."""

    model_config = ConfigDict(frozen=True)

    max_steps: int = Field(12, ge=1, description="Most model calls a run may make.")
    max_seconds: float = Field(300.0, gt=0, description="Wall-clock budget for the whole run.")
    max_cost_usd: float | None = Field(None, ge=0, description="Dollar budget, from token usage and the model's price.")
    max_repeats: int = Field(3, ge=2, description="Identical consecutive tool calls that end the run.")


class LooplabError(Exception):
    """A problem the user can fix; its message is one line that says how."""


class MissingExtra(LooplabError, ImportError):
    """A runner's framework is not installed."""

    def __init__(self, runner: str, extra: str, module: str) -> None:
        super().__init__(f"runner {runner!r} needs {module!r}: pip install 'looplab[{extra}]'")
        self.runner, self.extra, self.module = runner, extra, module


@dataclass(frozen=True)
class ModelSpec:
    """Which model, through which provider and endpoint.

    `provider` is `openai` or `anthropic`; `base_url` points it at a
    compatible server (the scripted model, vLLM, ...); `api` picks the wire
    format where a runner can speak several; `retries` is how often the
    provider SDK retries a failed request (a 5xx, a 429, a broken
    connection), the same for every runner, since looplab builds every client.
    `pricing` None means the model has no known price: its cost is unknown.
    `headers` are extra headers sent with every model request, by every runner
    (the recorder adds them in-process and at the proxy): a provider's or a
    gateway's options (an API version, a beta flag, an organization or project,
    a routing or attribution header), or the scripted model's persona.
    """

    provider: Literal["openai", "anthropic"]
    name: str
    base_url: str | None = None
    api_key: str | None = None
    api: Api | None = None
    pricing: Pricing | None = None
    retries: int = DEFAULT_RETRIES
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)  # out of the hash: a dict has none

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.name}"

    def key(self) -> str:
        """The API key: given, or from the provider's usual variable; a local base URL needs none."""
        key = self.api_key or os.environ.get(PROVIDER_ENV[self.provider])
        if key:
            return key
        if self.base_url:
            return "not-needed"
        raise LooplabError(
            f"{PROVIDER_ENV[self.provider]} is not set; export it, or pass --base-url for a local server"
        )


def parse_model(text: str) -> tuple[str, str]:
    """Split 'provider:name' (e.g. 'openai:gpt-4.1'), checking the provider."""
    provider, sep, name = text.partition(":")
    if not sep or provider not in PROVIDER_ENV or not name:
        raise LooplabError(f"model {text!r}: spell it provider:name with provider one of {', '.join(PROVIDER_ENV)}")
    return provider, name


class NativeCap(BaseModel):
    """The framework knob that caps the loop, and the value looplab set."""

    knob: str
    value: Any


class NativeEnd(BaseModel):
    """How the framework itself ended the run, before looplab normalized it."""

    kind: Literal["returned", "raised", "refused by the model boundary"]
    exception: str | None = Field(None, description="Import path of the exception class, when it raised.")
    message: str | None = None
    text: str | None = Field(None, description="The final text the framework returned, if any.")
    history: str | None = Field(None, description="Where the exception carries the run's history, if it does.")


class Totals(BaseModel):
    """Sums over the run, from the two boundaries' records."""

    model_config = ConfigDict(protected_namespaces=())

    model_calls: int = Field(description="Model calls that were answered: what max_steps counts.")
    failed_model_calls: int = Field(0, description="HTTP attempts at the model that got no answer.")
    retries: int = Field(0, description="Attempts after the first at the same model call.")
    tool_calls: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = Field(0, description="Input tokens read from the provider's prompt cache.")
    cost_usd: float | None = Field(description="Dollars at the model's price; None (unknown) when it has none.")
    wall_s: float


class RunResult(BaseModel):
    """The same record for every runner."""

    runner: str
    runner_version: str
    case: str | None = None
    model: str
    stop_reason: StopReason
    stop_detail: str | None = None
    answer: str | None
    native_cap: NativeCap
    totals: Totals
    trace: Trace
    warnings: list[str] = Field(
        default_factory=list,
        description="What the framework warned, logged (WARNING and up) or printed during the run; a warning or "
        "log record said again is kept once, ending '(N times)'.",
    )
    native_end: NativeEnd | None = None
    tool_transport: ToolTransport = Field(
        default="in-process", description="How the runner reached the tools: in this process, or over MCP."
    )
    limits: Limits | None = Field(None, description="The normalized limits the run was held to.")
    started_at: datetime | None = Field(
        None, description="Wall-clock time (UTC) when the run's clock read 0: the trace's started_at count from it."
    )


class ToolReply(Protocol):
    """What a tool call hands back to the runner: the text the model reads, and whether it is an error."""

    result: str
    is_error: bool


class ToolBoundary(Protocol):
    """The tools as an adapter sees them: the Guard itself, or an MCP client of it (`adapters/mcp_tools.py`)."""

    @property
    def tools(self) -> Sequence[Any]:
        """Each tool's `name`, `description` and `parameters` (its JSON schema)."""

    def call(self, name: str, args: Any, call_id: str | None = None) -> ToolReply:
        """Run one tool call; never raises for what the call held or did."""


class ModelServerUrls:
    """The base URLs the two SDK families take for a model server at `url`: OpenAI's under `/v1`, Anthropic's at it."""

    @property
    def url(self) -> str:
        raise NotImplementedError

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url


class StopRun(BaseException):  # noqa: N818 - a signal, like KeyboardInterrupt, not an error
    """Raised at the model boundary when the budget allows no further model call.

    A `BaseException` on purpose: SDK retry loops and framework error
    handlers catch `Exception`, and this must end the framework's loop rather
    than be retried or handed to the model.
    """

    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


class KnobDefault(BaseModel):
    """A knob's default value (None: no limit) and where in the installed library it was read."""

    value: int | None
    source: str


def read_default(*candidates: tuple[str, str]) -> KnobDefault:
    """The first `(module, attribute)` that exists, as a default; older releases keep it elsewhere."""
    for module, attribute in candidates:
        try:
            value = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError):
            continue
        return KnobDefault(value=None if value is None else int(value), source=f"{module}.{attribute}")
    raise LooplabError(f"default not found in the installed library: {candidates}")


def signature_default(func: Any, param: str) -> KnobDefault:
    """`param`'s default in `func`'s signature (a class: its constructor's), read from the installed library.

    A default that is not an int (None, or a sentinel such as the Anthropic SDK's `omit`) means "unset": no
    limit from that knob.
    """
    default = inspect.signature(func).parameters[param].default
    value = default if isinstance(default, int) and not isinstance(default, bool) else None
    # A sentinel's repr carries a memory address: name its type instead, so the caps doc is stable.
    shown = repr(default) if default is None or value is not None else type(default).__name__
    return KnobDefault(value=value, source=f"{func.__module__}.{func.__qualname__}({param}={shown}) signature")


class Probe(BaseModel):
    """A native cap to set instead of the mapping from `max_steps` (`value=None`: leave it unset)."""

    knob: str
    value: int | None


class RunSession:
    """One run's shared bookkeeping: the clock, both boundaries, the budget.

    Every model request passes `gate()` first, so a runner whose own cap
    would allow one more call is still stopped at `max_steps`, the deadline,
    the budget or a stop the Guard asked for; `stop` remembers which.
    """

    def __init__(
        self, guard: Guard, limits: Limits, model: ModelSpec, probe: Probe, *, system_prompt: str = ""
    ) -> None:
        self.guard, self.limits, self.model = guard, limits, model
        #: What the runner tells the model first (the case's); empty only in a session that runs no loop.
        self.system_prompt = system_prompt
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
        )
        self.started = self.clock()
        self.guard.deadline = self.started + limits.max_seconds
        self.guard.cutoff = self.steps_spent
        self.stop: StopRun | None = None
        self._clients: list[tuple[Any, bool]] = []  # the HTTP clients built, and whether each is async

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

    def _client_options(self) -> dict[str, Any]:
        """What every provider SDK client of this run is built with: key, endpoint, and the one retry policy."""
        return {"api_key": self.model.key(), "base_url": self.model.base_url, "max_retries": self.model.retries}

    def http_client(self, sdk: ModuleType, *, is_async: bool = False) -> Any:
        """A recording HTTP client of the kind `sdk` (the `openai` or `anthropic` module) takes.

        Its timeout is the run's whole `max_seconds`, so a model call that hangs cannot outlast the run.
        """
        http = http_module_for(sdk)
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
        return max(0.0, self.started + self.limits.max_seconds - self.clock())

    def budget_stop(self, request_bytes: int = 0) -> tuple[StopReason, str] | None:
        """Checked before every model call: the reason another call is not allowed, if any.

        The dollar budget looks ahead: a call whose estimated cost (from the
        request's size) would take the spend past `max_cost_usd` is not made.
        """
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
        if len(self.recorder.calls) >= self.limits.max_steps:
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


@dataclass(frozen=True)
class Finished:
    """What a runner's loop hands back: how it ended, and the answer if it answered."""

    reason: StopReason
    answer: str | None = None
    detail: str | None = None

    @classmethod
    def stopped(cls, why: tuple[StopReason, str]) -> Finished:
        """A stop the boundaries asked for (what `budget_stop()` or `tool_stop()` returned): no answer."""
        return cls(why[0], detail=why[1])


class Adapter(ABC):
    """One runner. Subclasses hold framework glue only: `loop()` and `native_cap()`."""

    #: Runner name, as the CLI spells it.
    name: str
    #: The pip extra that installs its framework.
    extra: str
    #: The distribution whose version is reported as `runner_version`.
    distribution: str
    #: Wire APIs the runner speaks, its default first; `messages` is Anthropic's, the others OpenAI's.
    apis: tuple[Api, ...] = ("chat",)
    #: The native caps it can set: the first is where `max_steps` maps; the rest are the framework's
    #: alternatives, which `looplab caps` measures the same way.
    knobs: tuple[str, ...] = ()
    #: Whether its loop runs in another process (it reaches the tools over MCP whatever `run` is told).
    out_of_process: bool = False

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """Each knob's default, read from the installed library at run time."""
        return {}

    def api_for(self, model: ModelSpec) -> Api:
        """The wire API for `model`, or a one-line refusal that says what would work instead.

        `model.api` if given (it must be the provider's and one this runner speaks), else the
        runner's first API of the model's provider.
        """
        if model.api is None:
            fits = [a for a in self.apis if PROVIDER_OF_API[a] == model.provider]
            if fits:
                return fits[0]
            # A runner that speaks none of one provider's APIs speaks the other's.
            theirs = PROVIDER_OF_API[self.apis[0]]
            apis = f"{', '.join(self.apis)} API{'s' if len(self.apis) > 1 else ''}"
            raise LooplabError(
                f"runner {self.name!r} speaks only {theirs} {apis}: use an {theirs}: model with it, "
                f"not an {model.provider} one"
            )
        check_api(model.api, model.provider)
        if model.api not in self.apis:
            raise LooplabError(f"runner {self.name!r} cannot use the {model.api} API; it speaks {', '.join(self.apis)}")
        return model.api

    def version(self, model: ModelSpec | None = None) -> str:
        """The installed version of the framework (for some runners, the one `model` uses)."""
        return installed_version(self.distribution)

    @abstractmethod
    def native_cap(self, limits: Limits) -> NativeCap:
        """The framework knob and the value set for these limits."""

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
    ) -> RunResult:
        """Run `task` with the tools behind `guard`; never raises for a failing run.

        `system_prompt` (the case's) is what the model is told first: `loop` reads it as `session.system_prompt`.

        `probe` sets one of `knobs` to a value (or leaves it unset) instead of
        mapping `max_steps` onto the first; `looplab caps` measures that way,
        with `max_steps` as the safety stop. `tools="mcp"` serves the Guard over
        MCP and has the runner call it as a client (it needs the `mcp` extra).
        """
        check_priced(limits, model)
        probe = probe or Probe(knob=self.knobs[0], value=limits.max_steps)
        session = RunSession(guard, limits, model, probe, system_prompt=system_prompt)
        with framework_noise() as noise, contextlib.ExitStack() as stack:
            try:
                if tools == "mcp" and not self.out_of_process:
                    from adapters.mcp_tools import serve_to

                    session.tools, session.tool_transport = stack.enter_context(serve_to(session)), "mcp"
                finished = self.loop(task, session)
            except LooplabError:
                raise
            except (Exception, StopRun, BaseExceptionGroup) as exc:  # a crash is `error`, with its partial trace
                finished = session.conclude(None, exc)
            finally:
                session.close_clients()
        result = session.result(self, finished.reason, finished.answer, finished.detail)
        result.warnings = [clean(w) for w in noise]
        result.native_end = session.native_end
        result.tool_transport = session.tool_transport
        return result


@functools.cache
def installed_version(distribution: str) -> str:
    """A distribution's installed version, looked up once per process (a lookup scans site-packages)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


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
