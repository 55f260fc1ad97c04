"""The normalized limits a run is held to, and the named reasons a run stops."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Limits", "StopReason"]


class StopReason(StrEnum):
    """Why a run ended. Anything but `final_answer` carries `answer=None`."""

    FINAL_ANSWER = "final_answer"
    MAX_STEPS = "max_steps"
    TIMEOUT = "timeout"
    BUDGET = "budget"
    REPETITION = "repetition"
    REJECTED = "rejected"
    ERROR = "error"
    CANCELLED = "cancelled"


class Limits(BaseModel):
    """Normalized limits: the same numbers mean the same behaviour in every runner."""

    model_config = ConfigDict(frozen=True)

    max_steps: int = Field(12, ge=1, description="Most model calls a run may make.")
    max_seconds: float = Field(300.0, gt=0, description="Wall-clock budget for the whole run.")
    max_cost_usd: float | None = Field(None, ge=0, description="Dollar budget, from token usage and the model's price.")
    max_tokens: int | None = Field(
        None, ge=1, description="Token budget: input plus output tokens, summed over every model call of the run."
    )
    max_repeats: int = Field(3, ge=2, description="Identical consecutive tool calls that end the run.")
