"""`RunSession.conclude`: how each way a framework ends meets each stop the boundaries can ask for.

No framework runs here. Each test builds a `RunSession` over a real `Guard` and `Workspace`, puts the
boundaries in a state by hand (model calls in the recorder, a Guard stop, the clock, the spend), lets
the "framework" end in one of its ways, and checks what `conclude` decides. The expected outcome of
every row is written out in `MODEL_BOUNDARY` and `GUARD`: one row per way of ending, one column per
boundary stop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from looplab.adapters.contract.errors import StopRun
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.contract.pricing import Pricing
from looplab.adapters.contract.runner import Probe
from looplab.adapters.contract.trace import ModelCall
from looplab.adapters.session import RunSession
from looplab.shared_tools import Guard, Workspace
from looplab.shared_tools.records import StopSignal

MAX_STEPS = 3
MAX_SECONDS = 10.0
MAX_COST_USD = 0.001
#: Size of the request the gate is asked about: about 1000 tokens in, at $1 per million tokens.
REQUEST_BYTES = 4000

ANSWER = "apply_discount in shop/pricing.py applies the VIP rate twice"
PARTIAL = "Let me read the failing test first."
REPEAT_DETAIL = "read_file was called with the same arguments 3 times in a row"
REJECT_DETAIL = "write_file was not approved: no approver is configured, so effects are denied"
TOOL_TIMEOUT_DETAIL = "run deadline reached inside run_tests"


class Clock:
    """A clock the test moves by hand; the Guard, the recorder and the session all read it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def model_call(index: int, *, wants_tools: bool, cost_usd: float) -> ModelCall:
    return ModelCall(
        index=index,
        endpoint="chat.completions",
        url="http://127.0.0.1:1/v1/chat/completions",
        status=200,
        streamed=False,
        request_bytes=REQUEST_BYTES,
        response_bytes=400,
        input_tokens=1000,
        output_tokens=100,
        finish_reason="tool_calls" if wants_tools else "stop",
        tool_calls_requested=["read_file"] if wants_tools else [],
        started_at=float(index - 1) * 0.1,
        latency_s=0.05,
        cost_usd=cost_usd,
    )


# --- the boundary stops (columns) ---------------------------------------------------------------


@dataclass(frozen=True)
class Boundary:
    """The boundaries' state when the framework ends: model calls made, time, spend, a Guard stop."""

    calls: int
    clock: float = 1.0
    max_cost_usd: float | None = None
    cost_per_call: float = 0.0
    guard_stop: StopSignal | None = None


BOUNDARIES = {
    "no_stop": Boundary(calls=2),
    "max_steps": Boundary(calls=MAX_STEPS),
    "timeout": Boundary(calls=2, clock=MAX_SECONDS + 0.5),
    # Spent 0.0008 of 0.001; the next call would cost about 0.0011 more, so the gate refuses it.
    "budget": Boundary(calls=2, max_cost_usd=MAX_COST_USD, cost_per_call=0.0004),
    "repetition": Boundary(calls=2, guard_stop=StopSignal(reason="repetition", detail=REPEAT_DETAIL)),
    "rejected": Boundary(calls=2, guard_stop=StopSignal(reason="rejected", detail=REJECT_DETAIL)),
    # The Guard stops for the deadline when a tool runs into it: the clock is at the deadline.
    "tool_timeout": Boundary(
        calls=2, clock=MAX_SECONDS, guard_stop=StopSignal(reason="timeout", detail=TOOL_TIMEOUT_DETAIL)
    ),
}


# --- the ways a framework ends (rows) -----------------------------------------------------------


def refusal(session: RunSession) -> StopRun:
    """The gate's signal, as a framework's next model request would meet it."""
    with pytest.raises(StopRun) as caught:
        session.budget.gate(REQUEST_BYTES)
    return caught.value


def wrapped_refusal(session: RunSession) -> RuntimeError:
    stop = refusal(session)
    try:
        raise RuntimeError("model call failed") from stop
    except RuntimeError as exc:
        return exc


def swallowed_refusal(session: RunSession) -> None:
    refusal(session)  # the framework catches the signal and returns as if its loop had ended


def past_deadline(clock: Clock) -> TimeoutError:
    clock.now = max(clock.now, MAX_SECONDS + 0.5)  # e.g. a model call that hung until the deadline
    return TimeoutError("timed out")


@dataclass(frozen=True)
class Ending:
    """How the framework ended: what it returned or raised, and what its last model call asked for."""

    last_call_wants_tools: bool
    act: Callable[[RunSession, Clock], tuple[str | None, BaseException | None]]
    native_kind: str
    native_exception: str | None = None


REFUSED = "refused by the model boundary"
ENDINGS = {
    "answered": Ending(False, lambda s, c: (ANSWER, None), "returned"),
    "returned_none": Ending(True, lambda s, c: (None, None), "returned"),
    "returned_empty": Ending(False, lambda s, c: ("", None), "returned"),
    "returned_text_wanting_tools": Ending(True, lambda s, c: (PARTIAL, None), "returned"),
    "raised_error": Ending(
        True, lambda s, c: (None, RuntimeError("connection reset")), "raised", "builtins.RuntimeError"
    ),
    "raised_StopRun": Ending(True, lambda s, c: (None, refusal(s)), REFUSED),
    "raised_from_StopRun": Ending(True, lambda s, c: (None, wrapped_refusal(s)), "raised", "builtins.RuntimeError"),
    "raised_group_with_StopRun": Ending(
        True,
        lambda s, c: (None, BaseExceptionGroup("unhandled errors in a TaskGroup", [refusal(s)])),
        "raised",
        "builtins.BaseExceptionGroup",
    ),
    "swallowed_StopRun": Ending(True, lambda s, c: (None, swallowed_refusal(s)), "returned"),
    "raised_after_deadline": Ending(True, lambda s, c: (None, past_deadline(c)), "raised", "builtins.TimeoutError"),
}


# --- the expected outcomes ----------------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    reason: StopReason
    detail: str | None = None
    answer: str | None = None


FINAL = Expect(StopReason.FINAL_ANSWER, answer=ANSWER)
STEPS = Expect(StopReason.MAX_STEPS, "max_steps=3 model calls made")
STEPS_RETURNED = Expect(StopReason.MAX_STEPS, "max_steps=3 model calls made; the runner returned without an answer")
STEPS_RAISED = Expect(StopReason.MAX_STEPS, "max_steps=3 model calls made; the runner raised RuntimeError")
TIME = Expect(StopReason.TIMEOUT, "max_seconds=10 elapsed")
TIME_RAISED = Expect(StopReason.TIMEOUT, "max_seconds=10 elapsed (RuntimeError)")
TIME_TIMED_OUT = Expect(StopReason.TIMEOUT, "max_seconds=10 elapsed (TimeoutError)")
BUDGET = Expect(StopReason.BUDGET, "max_cost_usd=0.001: spent 0.000800, the next call would cost about 0.001100")
REPEAT = Expect(StopReason.REPETITION, REPEAT_DETAIL)
REJECT = Expect(StopReason.REJECTED, REJECT_DETAIL)
TOOL_TIME = Expect(StopReason.TIMEOUT, TOOL_TIMEOUT_DETAIL)
CRASH = Expect(StopReason.ERROR, "RuntimeError: connection reset")
NO_ANSWER = Expect(StopReason.ERROR, "the runner stopped before the model answered")
#: Cannot happen: with no stop due, the gate lets the next call through, so there is no StopRun.
NOT_REACHABLE = None

# An empty reply answers nothing; text returned while the last call still asked for tools is no answer either,
# and after the deadline both are the timeout.

# One row per way of ending, one column per boundary stop; the Guard's stops are the second table.
# fmt: off
MODEL_BOUNDARY_COLUMNS = ("no_stop", "max_steps", "timeout", "budget")
MODEL_BOUNDARY: dict[str, tuple[Expect | None, ...]] = {
    #                              no_stop          max_steps       timeout          budget
    "answered":                    (FINAL,          FINAL,          FINAL,           FINAL),
    "returned_none":               (NO_ANSWER,      STEPS_RETURNED, TIME,            NO_ANSWER),
    "returned_empty":              (NO_ANSWER,      NO_ANSWER,      TIME,            NO_ANSWER),
    "returned_text_wanting_tools": (NO_ANSWER,      STEPS_RETURNED, TIME,            NO_ANSWER),
    "raised_error":                (CRASH,          STEPS_RAISED,   TIME_RAISED,     CRASH),
    "raised_StopRun":              (NOT_REACHABLE,  STEPS,          TIME,            BUDGET),
    "raised_from_StopRun":         (NOT_REACHABLE,  STEPS,          TIME,            BUDGET),
    "raised_group_with_StopRun":   (NOT_REACHABLE,  STEPS,          TIME,            BUDGET),
    "swallowed_StopRun":           (NOT_REACHABLE,  STEPS,          TIME,            BUDGET),
    "raised_after_deadline":       (TIME_TIMED_OUT, TIME_TIMED_OUT, TIME_TIMED_OUT,  TIME_TIMED_OUT),
}
GUARD_COLUMNS = ("repetition", "rejected", "tool_timeout")
GUARD: dict[str, tuple[Expect | None, ...]] = {
    #                              repetition  rejected  tool_timeout
    "answered":                    (REPEAT,    REJECT,   TOOL_TIME),
    "returned_none":               (REPEAT,    REJECT,   TOOL_TIME),
    "returned_empty":              (REPEAT,    REJECT,   TOOL_TIME),
    "returned_text_wanting_tools": (REPEAT,    REJECT,   TOOL_TIME),
    "raised_error":                (REPEAT,    REJECT,   TOOL_TIME),
    "raised_StopRun":              (REPEAT,    REJECT,   TOOL_TIME),
    "raised_from_StopRun":         (REPEAT,    REJECT,   TOOL_TIME),
    "raised_group_with_StopRun":   (REPEAT,    REJECT,   TOOL_TIME),
    "swallowed_StopRun":           (REPEAT,    REJECT,   TOOL_TIME),
    "raised_after_deadline":       (REPEAT,    REJECT,   TOOL_TIME),
}
# fmt: on


def rows() -> list:
    params = []
    for columns, table in ((MODEL_BOUNDARY_COLUMNS, MODEL_BOUNDARY), (GUARD_COLUMNS, GUARD)):
        for ending, cells in table.items():
            for boundary, cell in zip(columns, cells, strict=True):
                if cell is NOT_REACHABLE:
                    continue
                params.append(pytest.param(ending, boundary, cell, id=f"{ending}-{boundary}"))
    return params


def start(workspace: Workspace, boundary: Boundary, *, last_call_wants_tools: bool) -> tuple[RunSession, Clock]:
    """A session whose boundaries are in `boundary`'s state."""
    clock = Clock()
    guard = Guard(workspace, clock=clock, max_repeats=3)
    limits = Limits(max_steps=MAX_STEPS, max_seconds=MAX_SECONDS, max_cost_usd=boundary.max_cost_usd)
    model = ModelSpec("openai", "scripted", base_url="http://127.0.0.1:1/v1", pricing=Pricing(1.0, 1.0))
    session = RunSession(guard, limits, model, Probe(knob="max_turns", value=MAX_STEPS))
    for i in range(1, boundary.calls + 1):
        wants_tools = last_call_wants_tools if i == boundary.calls else True
        session.recorder.calls.append(model_call(i, wants_tools=wants_tools, cost_usd=boundary.cost_per_call))
    guard.stop = boundary.guard_stop
    clock.now = boundary.clock
    return session, clock


@pytest.mark.parametrize(("ending", "boundary", "expect"), rows())
def test_conclude(workspace: Workspace, ending: str, boundary: str, expect: Expect) -> None:
    how = ENDINGS[ending]
    session, clock = start(workspace, BOUNDARIES[boundary], last_call_wants_tools=how.last_call_wants_tools)
    answer, error = how.act(session, clock)

    finished = session.conclude(answer, error)

    assert (finished.reason, finished.detail) == (expect.reason, expect.detail)
    assert finished.answer == expect.answer
    assert session.native_end is not None
    assert (session.native_end.kind, session.native_end.exception) == (how.native_kind, how.native_exception)


def test_the_tables_cover_every_ending_and_boundary() -> None:
    assert list(MODEL_BOUNDARY) == list(GUARD) == list(ENDINGS)
    assert set(MODEL_BOUNDARY_COLUMNS + GUARD_COLUMNS) == set(BOUNDARIES)
    # 10 endings x 7 boundaries, less the 4 endings that need a StopRun where no stop is due.
    assert len(rows()) == 66


def test_native_end_is_the_first_one_recorded(workspace: Workspace) -> None:
    """An adapter may conclude, raise, and be concluded again by `Runner.run`: the first ending stays."""
    session, _ = start(workspace, BOUNDARIES["no_stop"], last_call_wants_tools=False)
    session.conclude(ANSWER)
    session.conclude(None, RuntimeError("late"))
    assert session.native_end is not None
    assert (session.native_end.kind, session.native_end.text) == ("returned", ANSWER)


def test_refusal_message_is_in_native_end(workspace: Workspace) -> None:
    session, _ = start(workspace, BOUNDARIES["max_steps"], last_call_wants_tools=True)
    session.conclude(None, refusal(session))
    assert session.native_end is not None
    assert session.native_end.message == "max_steps=3 model calls made"


# --- two stops: which one the run reports --------------------------------------------------------

# The gate refusing first (and a tool stopping later, on another thread) is the stop the run reports; a
# Guard stop that came first is what the gate itself refuses with.


def gate_then_guard(session: RunSession, signal: StopSignal) -> StopRun:
    stop = refusal(session)  # the gate refuses the next model call first...
    session.guard.stop = signal  # ...then a tool still running (another thread, an out-of-process runner) stops
    return stop


def guard_then_gate(session: RunSession, signal: StopSignal) -> StopRun:
    session.guard.stop = signal
    return refusal(session)


@pytest.mark.parametrize(
    ("boundary", "order", "signal", "expect"),
    [
        pytest.param(
            "max_steps",
            guard_then_gate,
            BOUNDARIES["repetition"].guard_stop,
            REPEAT,
            id="repetition-then-max_steps",
        ),
        pytest.param(
            "max_steps",
            gate_then_guard,
            BOUNDARIES["repetition"].guard_stop,
            STEPS,
            id="max_steps-then-repetition",
        ),
        pytest.param(
            "budget",
            gate_then_guard,
            BOUNDARIES["rejected"].guard_stop,
            BUDGET,
            id="budget-then-rejected",
        ),
    ],
)
def test_first_stop_wins(
    workspace: Workspace,
    boundary: str,
    order: Callable[[RunSession, StopSignal], StopRun],
    signal: StopSignal,
    expect: Expect,
) -> None:
    session, _ = start(workspace, BOUNDARIES[boundary], last_call_wants_tools=True)
    stop = order(session, signal)

    finished = session.conclude(None, stop)

    assert (finished.reason, finished.detail, finished.answer) == (expect.reason, expect.detail, None)
