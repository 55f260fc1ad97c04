"""One run's budget at the model boundary: what its model calls have spent against its `Limits`, and the gate.

Every model request passes the gate before it is sent, whichever way it goes out (an SDK's recording transport,
the proxy's relay, a runner's own transport): a request past `max_steps`, the deadline, `max_cost_usd` or
`max_tokens` is refused with the limit named, and `--rpm` or a 429's retry-after spaces the requests that go.
The counts are read off the run's record (the recorder that uses this budget); the run's clock and its stop
stay the run's own (`BoundedRun`).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, Protocol

from looplab.adapters.boundary.pacing import Pacer, retry_after_s
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits, StopReason

if TYPE_CHECKING:
    from looplab.adapters.contract.model import ModelSpec
    from looplab.adapters.contract.pricing import Pricing
    from looplab.adapters.contract.trace import ModelCall

__all__ = ["Refusal", "RunBudget", "check_priced"]

#: Why a model request may not go: the stop it ends the run with, and its detail naming the limit.
Refusal = tuple[StopReason, str]

#: How long at most an async request the budget would refuse waits for the requests still under way (`settle`).
UNDER_WAY_WAIT_S = 10.0
#: How often that wait looks again.
UNDER_WAY_POLL_S = 0.01


class Ledger(Protocol):
    """What the budget reads of the run's record (the recorder that uses it)."""

    calls: list[ModelCall]
    pricing: Pricing | None

    @property
    def cost_usd(self) -> float | None:
        """Dollars spent on answered calls; None when the model has no price."""
        ...

    @property
    def replies_begun(self) -> int:
        """The answered calls and the 2xx replies still arriving."""
        ...

    @property
    def in_flight(self) -> InFlight:
        """The requests sent and not yet recorded: what they hold of the budget until they are."""
        ...


class InFlight(NamedTuple):
    """What the requests sent and not yet recorded hold of a budget: agents sending at once (a parent's children
    run side by side) count each other's requests before either is answered, so together they cannot pass it."""

    requests: int = 0
    #: Their input tokens, forecast from their sizes.
    input_tokens: int = 0
    #: Their forecast cost (0 without a price).
    cost_usd: float = 0.0

    def plus(self, other: InFlight, sign: int = 1) -> InFlight:
        """This with `other` added (`sign=-1`: taken away)."""
        return InFlight(*(mine + sign * theirs for mine, theirs in zip(self, other, strict=True)))


class BoundedRun(Protocol):
    """What the budget reads of the run it bounds (the session; the boundary knows no more of it than this)."""

    def remaining_s(self) -> float:
        """Seconds left of the run's `max_seconds` (none once it is cancelled)."""
        ...

    def halted(self) -> Refusal | None:
        """A stop decided outside the budget (the Guard's, a cancel), if there is one."""
        ...

    def stop_with(self, why: Refusal) -> NoReturn:
        """End the run for `why` (its first stop wins) and raise that stop."""
        ...


def check_priced(limits: Limits, model: ModelSpec) -> None:
    """Refuse, in one line and before the run, a dollar budget for a model whose price is unknown."""
    if limits.max_cost_usd is not None and model.pricing is None:
        raise LooplabError(
            f"max_cost_usd={limits.max_cost_usd:g} needs a price and {model.label} has none in the table: "
            "pass --price IN,OUT (dollars per million tokens)"
        )


def forecast_input_tokens(request_bytes: int) -> int:
    """A request's input tokens before it is answered: one per 4 bytes, rounded up (JSON and its escapes make a
    request's bytes outnumber its text's characters, so this errs high for text)."""
    return -(-request_bytes // 4)


class RunBudget:
    """One run's limits on its model calls, counted off the recorder that uses it, and the gate before each request.

    `ledger` is that recorder: it names itself here when it is made with this budget.
    """

    def __init__(self, limits: Limits, run: BoundedRun, pacer: Pacer | None = None) -> None:
        self.limits, self.run = limits, run
        #: Spaces the requests of every run in flight (`--rpm`, a 429's retry-after); None: no pacing.
        self.pacer = pacer
        self.ledger: Ledger | None = None

    def _record(self) -> Ledger:
        if self.ledger is None:  # pragma: no cover - a budget is made for a recorder
            raise RuntimeError("this budget counts no recorder's calls")
        return self.ledger

    def time_left(self) -> float:
        """Seconds left in the run: every wait of a model exchange is bounded by it."""
        return self.run.remaining_s()

    @property
    def steps(self) -> int:
        """Answered model calls (what `max_steps` counts)."""
        return len(self._record().calls)

    @property
    def tokens(self) -> int:
        """Input plus output tokens of the answered calls (what `max_tokens` counts)."""
        return sum(c.input_tokens + c.output_tokens for c in self._record().calls)

    @property
    def cost_usd(self) -> float | None:
        """Dollars spent on answered calls (what `max_cost_usd` counts); None when the model has no price."""
        return self._record().cost_usd

    def forecast_cost(self, request_bytes: int) -> float | None:
        """A call's likely cost: its input tokens forecast from its size, the largest reply so far out."""
        record = self._record()
        if record.pricing is None:
            return None
        output = max((c.output_tokens for c in record.calls), default=0)
        return record.pricing.cost(forecast_input_tokens(request_bytes), output)

    def refusal(self, request_bytes: int = 0) -> Refusal | None:
        """Checked before every model call: the limit that allows no further call, if any.

        The dollar and token budgets look ahead: a call whose estimated cost (from the request's size) would take
        the spend past `max_cost_usd`, or whose input would take the tokens past `max_tokens`, is not made; what a
        made call adds beyond the budget is at most its own output (bounded by the request's `max_tokens`).
        """
        limits, out = self.limits, self._record().in_flight
        if self.steps + out.requests >= limits.max_steps:
            under_way = f" ({out.requests} of them still under way)" if out.requests else ""
            return StopReason.MAX_STEPS, f"max_steps={limits.max_steps} model calls made{under_way}"
        if self.time_left() <= 0:
            return StopReason.TIMEOUT, f"max_seconds={limits.max_seconds:g} elapsed"
        if limits.max_cost_usd is not None:
            spent, next_call = (self.cost_usd or 0.0) + out.cost_usd, self.forecast_cost(request_bytes) or 0.0
            if spent + next_call > limits.max_cost_usd:
                return StopReason.BUDGET, (
                    f"max_cost_usd={limits.max_cost_usd:g}: spent {spent:.6f}, "
                    f"the next call would cost about {next_call:.6f}"
                )
        if limits.max_tokens is not None:
            spent, next_input = self.tokens + out.input_tokens, forecast_input_tokens(request_bytes)
            if spent + next_input > limits.max_tokens:
                return StopReason.BUDGET, (
                    f"max_tokens={limits.max_tokens}: {spent} tokens spent, "
                    f"the next request's input is about {next_input} more"
                )
        return None

    def pace(self) -> Refusal | None:
        """Waits for this request's turn (`--rpm`, a 429's retry-after); the reason to stop if it comes too late.

        The wait blocks this run's thread only; other runs in flight go on.
        """
        if self.pacer is None:
            return None
        wait = self.pacer.reserve(self.pacer.clock() + self.time_left())
        if wait is None:
            rpm = f"--rpm {self.pacer.rpm} or " if self.pacer.rpm else ""
            return StopReason.TIMEOUT, (
                f"max_seconds={self.limits.max_seconds:g} would pass before the next request may go "
                f"({rpm}a 429's retry-after holds requests back)"
            )
        if wait > 0:
            time.sleep(wait)
        return None

    async def settle(self, request_bytes: int = 0) -> None:
        """Before an async request this budget would refuse while other requests are under way: wait for them to
        be recorded (at most `UNDER_WAY_WAIT_S`, and never past the run's time), then let the gate decide.

        Agents side by side on one event loop: a framework that cancels the siblings of a call that raises
        (Microsoft Agent Framework's concurrent function calls) would otherwise drop a sibling's reply the budget
        had let go, and the run would end one call short of its cap; a sibling that fails gives its step back
        to this request. Sync requests are not held: their siblings run on threads no refusal cancels.
        """
        until = time.monotonic() + min(UNDER_WAY_WAIT_S, max(self.time_left(), 0.0))
        while (
            self._record().in_flight.requests
            and self.run.halted() is None
            and self.refusal(request_bytes) is not None
            and time.monotonic() < until
        ):
            await asyncio.sleep(UNDER_WAY_POLL_S)

    def gate(self, request_bytes: int = 0) -> None:
        """Called before each model request: raises the run's stop (`StopRun`) if the run must end instead.

        A stop the run already has comes first (the Guard's, a cancel), then the limits, then the request's turn.
        """
        if why := self.run.halted() or self.refusal(request_bytes) or self.pace():
            self.run.stop_with(why)

    def hold(self, request_bytes: int) -> InFlight:
        """What a request about to go holds of the budget while it is in flight (the recorder keeps the sum)."""
        return InFlight(1, forecast_input_tokens(request_bytes), self.forecast_cost(request_bytes) or 0.0)

    def expire(self) -> NoReturn:
        """The run's deadline cut a model exchange short: the run stops as `timeout` (raised, as `gate` raises, so
        that neither an SDK nor a framework retries the call)."""
        self.run.stop_with((StopReason.TIMEOUT, f"max_seconds={self.limits.max_seconds:g} elapsed during a model call"))

    def hold_back(self, headers: Any) -> None:
        """A 429's retry-after (`headers`: the reply's), told to the pacer: every run in flight holds back, not only
        the one that got it."""
        if self.pacer is not None and (wait := retry_after_s(headers)) is not None:
            self.pacer.hold(wait)

    def steps_spent(self) -> str | None:
        """Why no model call is left to read a tool's result, if `max_steps` says so (the Guard's `cutoff`).

        One behaviour for every runner: the tools of the last allowed model call do not run, whether the
        framework would have run them (most do) or ended first (LangGraph's step counter does).
        """
        if self._record().replies_begun >= self.limits.max_steps:
            return f"max_steps={self.limits.max_steps} model calls made"
        return None
