"""The model boundary: one recorder for every model request of every runner.

It sits in the HTTP client the provider SDK uses (the recording transport, `boundary/transport.py`), so it sees
the same bytes for the scripted model and for a real provider; a runner in another process reaches it through the
proxy (`boundary/proxy.py`). Here is its bookkeeping: the record (`ModelRecorder`) and the sequence one request
follows through it (`Exchange`), whichever way the request goes out. Beside it, one job each:

- `deadline`: every connect, send and read of a model exchange bound to the time left in the run, so an endpoint
  that dribbles its reply or keeps a stream alive with comments cannot hold the run past `max_seconds`: the
  exchange fails there, is recorded as an attempt that got no answer, and the run stops as `timeout`;
- `wire` and one reader per wire API (`wire_chat`, `wire_responses`, `wire_messages`, `wire_gemini`): tokens,
  finish reason and requested tools read out of a reply;
- `budget`: what the record counts against the run's limits, and the gate before each request.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from looplab.adapters.boundary.budget import InFlight, RunBudget, forecast_input_tokens
from looplab.adapters.boundary.deadline import bind_to_deadline
from looplab.adapters.boundary.transport import ReplyTee, transport_classes
from looplab.adapters.boundary.wire import parse_exchange
from looplab.adapters.boundary.wire_reply import read_json
from looplab.adapters.contract.pricing import Pricing
from looplab.adapters.contract.trace import Attempt, ModelCall
from looplab.adapters.contract.wire_apis import ENDPOINT_OF_SUFFIX
from looplab.shared_tools.records import clean, preview

__all__ = ["ModelRecorder"]

#: How much of a failed attempt's error body the record keeps: enough for a server's list of validation
#: errors, whose decisive line (llama-cpp-python's "messages[2] ... content") comes after the first few hundred.
ERROR_CHARS = 2000


@dataclass
class ModelRecorder:
    """Records every model request that passes its transports: each answered call, and each attempt that was not.

    `calls` are the answered model calls (what `max_steps` counts); `failed` every attempt that got
    no answer (an error status, a broken connection, a timeout), in order; `pending` those since the
    last answered call, which the next answered call takes as its retries.
    """

    clock: Callable[[], float]
    #: The model's price; None when it has none, and then every cost is unknown (None).
    pricing: Pricing | None = None
    #: The run's budget: it gates every model request, bounds every wait by the run's time left, and is told of
    #: every 429's retry-after. None: nothing is gated, paced or bounded (a recorder outside a run).
    budget: RunBudget | None = None
    #: Added to every request sent, replacing a header of the same name (the model spec's `headers`).
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The tools a reply's text names, for a runner whose loop reads tool calls from text (the runner's
    #: `tools_named_in_text`); read only from a reply that requests no tool natively. None: text requests nothing.
    tools_named_in_text: Callable[[str], list[str]] | None = None
    #: The agents of a run with more than one: each name and what its requests alone carry (`Delegate.marker`);
    #: a request carrying none of them is `main_agent`'s. Empty: one agent, and no call names one.
    agents: Mapping[str, bytes] = field(default_factory=dict)
    main_agent: str | None = None
    calls: list[ModelCall] = field(default_factory=list)
    failed: list[Attempt] = field(default_factory=list)
    pending: list[Attempt] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        #: Whether the run's deadline has cut an exchange short (here, or at the proxy's relay).
        self.out_of_time = False
        #: Replies whose 2xx status has come and whose body is not yet recorded (see `replies_begun`).
        self._answering = 0
        #: The requests the budget let go whose reply is not yet recorded (see `RunBudget.refusal`).
        self._in_flight = InFlight()
        if self.budget is not None:  # the budget counts what this recorder records
            self.budget.ledger = self

    @property
    def cost_usd(self) -> float | None:
        """Dollars spent on answered calls; None when the model has no price."""
        return None if self.pricing is None else sum(c.cost_usd or 0.0 for c in self.calls)

    def time_left(self) -> float:
        """Seconds left in the run for a model exchange (its budget's; no bound without one)."""
        return float("inf") if self.budget is None else self.budget.time_left()

    def http_client(self, http: ModuleType, *, is_async: bool = False, tls: bool = True, **kwargs: Any) -> Any:
        """A `Client` (or `AsyncClient`) of `http` (the `httpx` or `httpx2` module) that records.

        `tls=False` for a plain-http endpoint: the transport then skips building an SSL context (loading
        the CA bundle costs tens of milliseconds per client, for a connection that never uses it).
        """
        sync_cls, async_cls = transport_classes(http)
        kwargs.setdefault("timeout", http.Timeout(600.0, connect=10.0))
        verify = {} if tls else {"verify": False}
        inner = http.AsyncHTTPTransport(**verify) if is_async else http.HTTPTransport(**verify)
        if self.budget is not None:
            bind_to_deadline(inner, self, is_async=is_async)
        if is_async:
            return http.AsyncClient(transport=async_cls(self, inner), **kwargs)
        return http.Client(transport=sync_cls(self, inner), **kwargs)

    def agent_of(self, request_body: bytes) -> str | None:
        """Which agent sent a request: the one whose marker it carries, else the main one (None with one agent)."""
        if not self.agents:
            return None
        return next((name for name, marker in self.agents.items() if marker in request_body), self.main_agent)

    @property
    def replies_begun(self) -> int:
        """The answered calls and the 2xx replies still arriving: what the Guard's cutoff counts (`max_steps`).

        A framework may run a tool as soon as its block of a streamed reply arrives, before the reply ends and
        is recorded (Claude Code does); counted from its status on, the call spends its step before that tool
        can reach the Guard. A reply that then breaks off is an attempt that got no answer and counts no more.
        """
        with self._lock:
            return len(self.calls) + self._answering

    @property
    def in_flight(self) -> InFlight:
        """The requests sent and not yet recorded, and what they hold of the budget."""
        with self._lock:
            return self._in_flight

    def _send(self, budget: RunBudget, request_bytes: int) -> InFlight:
        """Checks the budget again counting the requests in flight, and holds this one's share, in one step: of
        agents sending at once, those past the budget are refused (`StopRun`) before they go."""
        with self._lock:
            if why := budget.refusal(request_bytes):
                budget.run.stop_with(why)
            held = budget.hold(request_bytes)
            self._in_flight = self._in_flight.plus(held)
            return held

    def _settle(self, held: InFlight | None) -> None:
        """A request's reply is recorded (answered, failed or broken off): it holds nothing more."""
        if held is not None:
            with self._lock:
                self._in_flight = self._in_flight.plus(held, sign=-1)

    def outgoing(self, headers: Mapping[str, str]) -> dict[str, str]:
        """`headers` as a relay sends them on (boundary/proxy.py): with `self.headers` in place of any of the same
        name, whatever its case, as the recording transport does."""
        replaced = {name.lower() for name in self.headers}
        return {k: v for k, v in headers.items() if k.lower() not in replaced} | dict(self.headers)

    async def settle(self, url: str, body: bytes) -> None:
        """Before an async model request: the requests under way recorded first where the budget would refuse this
        one (`RunBudget.settle`)."""
        if self.budget is not None and _endpoint(url) is not None:
            await self.budget.settle(len(body))

    def exchange(self, url: str, body: bytes, *, stop_at_deadline: bool = True) -> Exchange:
        """A request about to go out to `url`, gated now (the gate may raise to refuse it): see `Exchange`.

        `stop_at_deadline=False` for a caller that ends the run itself when the deadline cuts the exchange
        short (the proxy's relay answers its child first); otherwise the failure is recorded and the budget's
        `expire` raises the run's stop.
        """
        return Exchange(self, url, body, stop_at_deadline)

    def _record(
        self,
        url: str,
        request_body: bytes,
        status: int,
        response_body: bytes,
        started: float,
        error: BaseException | None = None,
    ) -> None:
        endpoint = _endpoint(url)
        if endpoint is None:  # model listings, token counting: not model calls
            return
        latency = self.clock() - started
        if error is not None or not 200 <= status < 300:
            message = _error_message(response_body)
            if error is not None:
                message = f"the reply broke off after {len(response_body)} bytes: {type(error).__name__}: {error}"
            self._failed(endpoint, status, message, len(request_body), len(response_body), started)
            return
        info = parse_exchange(endpoint, response_body, self.tools_named_in_text)
        # What the model sent is text from outside: it must still serialize (no lone surrogates).
        info.tool_calls_requested = [clean(str(name)) for name in info.tool_calls_requested]
        info.finish_reason = clean(str(info.finish_reason)) if info.finish_reason is not None else None
        if info.usage_unusable or (not info.input_tokens and not info.output_tokens):
            # No usage reported (e.g. a stream without include_usage), or a count no budget can trust (negative,
            # not an integer): estimate, and say so.
            info.cached_input_tokens = info.cache_write_tokens = 0
            info.input_tokens, info.output_tokens = (
                forecast_input_tokens(len(request_body)),
                -(-len(response_body) // 8),
            )
            info.usage_estimated = True
        with self._lock:
            call = ModelCall(
                index=len(self.calls) + 1,
                endpoint=endpoint,
                url=url,
                status=status,
                request_bytes=len(request_body),
                response_bytes=len(response_body),
                started_at=round(started, 6),
                latency_s=round(latency, 6),
                cost_usd=None
                if self.pricing is None
                else self.pricing.cost(
                    info.input_tokens, info.output_tokens, info.cached_input_tokens, info.cache_write_tokens
                ),
                failed_attempts=self.pending,
                agent=self.agent_of(request_body),
                **info.__dict__,
            )
            self.calls.append(call)
            self.pending = []

    def _failed(
        self, endpoint: str, status: int | None, error: str, request_bytes: int, response_bytes: int, started: float
    ) -> None:
        """An attempt that got no answer: kept under the step it was for."""
        with self._lock:
            attempt = Attempt(
                step=len(self.calls) + 1,
                attempt=len(self.pending) + 1,
                endpoint=endpoint,
                status=status,
                error=clean(error),
                request_bytes=request_bytes,
                response_bytes=response_bytes,
                started_at=round(started, 6),
                latency_s=round(self.clock() - started, 6),
            )
            self.pending.append(attempt)
            self.failed.append(attempt)


def _error_message(body: bytes) -> str:
    """The server's message from an error body (`{"error": {"message": ...}}` in every dialect), trimmed."""
    data = read_json(body)
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
    text = message if isinstance(message, str) else body.decode("utf-8", errors="replace")
    return preview(" ".join(text.split()), ERROR_CHARS)


def _endpoint(url: str) -> str | None:
    """The recorded endpoint a request's URL is for, by the wire-API table; None for any other request."""
    path = url.split("?")[0]
    return next((kind for suffix, kind in ENDPOINT_OF_SUFFIX.items() if path.endswith(suffix)), None)


class Exchange:
    """One model request through the recorder, the sequence every transport and the relay (boundary/proxy.py) follow.

    Made just before the request goes out, which gates it: the gate may raise to refuse it. Sent inside
    `with exchange:`, a failure with no response is recorded as an attempt that got no answer, and raised on.
    Its reply is then recorded once, whichever comes first: `whole()` for a body read whole (or broken off),
    or the end of a `tee()` the body passes through.
    """

    def __init__(self, recorder: ModelRecorder, url: str, body: bytes, stop_at_deadline: bool = True) -> None:
        #: What this request holds of the budget until its reply is recorded (None: no budget, or no model call).
        self.held: InFlight | None = None
        if recorder.budget is not None and _endpoint(url) is not None:
            recorder.budget.gate(len(body))  # the run's stop, the limits, the request's turn (it may wait)
            self.held = recorder._send(recorder.budget, len(body))
        self.recorder, self.url, self.body, self.started = recorder, url, body, recorder.clock()
        self.stop_at_deadline = stop_at_deadline
        self.recorded = False
        self.answering = False

    def __enter__(self) -> Exchange:
        return self

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> None:
        # A cancellation too (a framework cancelling a sibling's task when the run stops): the request went, so
        # it is an attempt that got no answer, and it holds nothing of the budget any more.
        if error is not None and (endpoint := _endpoint(self.url)) is not None:
            with self.recorder._lock:
                self.recorded = True
                message = f"{type(error).__name__}: {str(error) or 'cancelled before the reply came'}"
                self.recorder._failed(endpoint, None, message, len(self.body), 0, self.started)
                self.recorder._settle(self.held)
                self.held = None
            if isinstance(error, Exception):
                self._stop_if_out_of_time()

    def reply_begins(self, status: int) -> None:
        """The reply's status has come, its body not yet: a 2xx one counts in `replies_begun` until recorded."""
        with self.recorder._lock:
            if 200 <= status < 300 and not self.recorded and not self.answering:
                self.answering = True
                self.recorder._answering += 1

    def whole(self, status: int, headers: Any, body: bytes, error: BaseException | None = None) -> None:
        """The reply (or what came before `error` broke it off): recorded; a 429's retry-after is told to the budget."""
        with self.recorder._lock:  # recorded and no longer arriving at one moment: counted once throughout
            if self.recorded:
                return
            self.recorded = True
            try:
                self.recorder._record(self.url, self.body, status, body, self.started, error)
            finally:
                self.recorder._settle(self.held)
                self.held = None
                if self.answering:
                    self.answering = False
                    self.recorder._answering -= 1
        if status == 429 and self.recorder.budget is not None:
            self.recorder.budget.hold_back(headers)
        if isinstance(error, Exception):  # never in place of a cancellation, which must reach its task
            self._stop_if_out_of_time()

    def _stop_if_out_of_time(self) -> None:
        """After a failure the deadline caused: the run's stop, raised in place of the failure (no retry)."""
        if self.stop_at_deadline and self.recorder.out_of_time and self.recorder.budget is not None:
            self.recorder.budget.expire()

    def tee(self, status: int, headers: Any, chunks: Any, kind: type[ReplyTee] = ReplyTee) -> ReplyTee:
        """The reply's body passing through `kind`, recorded when it ends, breaks off or is closed."""
        self.reply_begins(status)
        return kind(chunks, lambda body, error: self.whole(status, headers, body, error))
