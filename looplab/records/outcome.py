"""One runner on one case: the unit every record, summary and view is made of."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from looplab.adapters.contract.result import RunResult
from looplab.scenarios.cases import CheckResult

__all__ = ["RunOutcome"]


@dataclass
class RunOutcome:
    """One runner on one case: a result with its checks, or the one-line reason there is none."""

    runner: str
    case: str
    result: RunResult | None = None
    checks: list[CheckResult] = field(default_factory=list)
    error: str | None = None
    #: Which repeat of its cell this is (1-based), set by the matrix; None: count the outcomes in order.
    repeat: int | None = None
    #: Where it ran (a `looplab.records.environment.Environment`) when not in this process: a runner environment's lane.
    environment: Any = None

    @property
    def passed(self) -> bool:
        return self.result is not None and all(c.passed for c in self.checks)
