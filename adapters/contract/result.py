"""The one record every runner's run produces, and what a runner's loop hands back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import ToolTransport
from looplab.adapters.contract.trace import Trace

__all__ = ["Finished", "NativeCap", "NativeEnd", "RunResult", "Totals"]


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
    counters: dict[str, int] = Field(
        default_factory=dict,
        description="The framework's own counters as it left them, by where a user reads each (`usage.requests`,"
        " `RunResultStreaming.current_turn`): what it says it counted, beside what the boundaries recorded.",
    )


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
