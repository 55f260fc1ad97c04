"""Runs made up for the statistics over repeats: whole records with the verdict and numbers a test needs, no model
run for them."""

from __future__ import annotations

from looplab.adapters.contract.limits import StopReason
from looplab.adapters.contract.result import NativeCap, RunResult, Totals
from looplab.adapters.contract.trace import ModelCall, Step, Trace
from looplab.records.outcome import RunOutcome
from looplab.scenarios.cases import CheckResult

__all__ = ["run", "synthetic_result"]


def synthetic_result(runner: str, case: str, calls: int, wall_s: float, tokens_in: int = 100) -> RunResult:
    """A finished run of `calls` model calls (`tokens_in` tokens in and 10 out each, $0.001 a call) and no tool
    calls, made up whole: no model runs for it."""
    steps = [
        Step(
            index=i,
            model_call=ModelCall(
                index=i,
                endpoint="messages",
                url="http://127.0.0.1:1/v1/messages",
                status=200,
                streamed=False,
                request_bytes=1000,
                response_bytes=200,
                input_tokens=tokens_in,
                output_tokens=10,
                finish_reason="end_turn",
                tool_calls_requested=[],
                started_at=float(i) / 100,
                latency_s=0.005,
                cost_usd=0.001,
            ),
            tool_calls=[],
        )
        for i in range(1, calls + 1)
    ]
    return RunResult(
        runner=runner,
        runner_version="1.0",
        case=case,
        model="scripted",
        stop_reason=StopReason.FINAL_ANSWER,
        answer="done",
        native_cap=NativeCap(knob="max_steps", value=12),
        totals=Totals(
            model_calls=calls,
            tool_calls=0,
            input_tokens=tokens_in * calls,
            output_tokens=10 * calls,
            cost_usd=0.001 * calls,
            wall_s=wall_s,
        ),
        trace=Trace(steps=steps),
    )


def run(runner: str, case: str, repeat: int, passed: bool, tokens: int = 1000, wall_s: float = 1.0) -> RunOutcome:
    """`runner` on `case`, repeat `repeat`: five model calls of `tokens` tokens in all, `wall_s` seconds, passed or
    not."""
    result = synthetic_result(runner, case, 5, wall_s, tokens_in=0)
    result.totals = result.totals.model_copy(update={"input_tokens": tokens, "output_tokens": 0})
    checks = [] if passed else [CheckResult(name="answer names the bug", passed=False, detail="")]
    return RunOutcome(runner, case, result, checks, repeat=repeat)
