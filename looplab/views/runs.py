"""The runs of a results document as the views see them: each run (or cell that did not run) with its verdict, and
per case each runner's first run."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from looplab.adapters.contract.result import RunResult
from looplab.records import results

__all__ = ["RunView", "runs_from"]


@dataclass
class RunView:
    """One run (or one cell that did not run) as the report shows it."""

    runner: str
    case: str
    repeat: int
    result: RunResult | None
    passed: bool | None = None
    failed_checks: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def anchor(self) -> str:
        """The HTML id of this run's details, linked from the matrix."""
        return slug(f"run-{self.runner}-{self.case}-{self.repeat}")

    @property
    def stop(self) -> str:
        """The stop reason, or 'not run'."""
        return str(self.result.stop_reason) if self.result else "not run"

    @property
    def why(self) -> str:
        """A short reason for the tooltip: the first failed check, the stop detail or the error."""
        if self.error:
            return self.error
        if self.failed_checks:
            return "failed: " + ", ".join(self.failed_checks)
        return (self.result.stop_detail or "") if self.result else ""


def slug(text: str) -> str:
    """An HTML id from free text."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")


def runs_from(doc: Any) -> list[RunView]:
    """The runs in a results document (a `results.Document`, or its parsed JSON of any readable schema).

    Each result is paired with its cell (pass/fail and failed checks); cells that did not run stay
    as rows without a result. Schema 1 `run` output has no checks, so `passed` stays None there.
    """
    document = results.load(doc)
    return [
        RunView(c.runner, c.case, c.repeat, document.result_of(c), c.passed, c.failed_checks, c.error)
        for c in document.cells
    ]


def first_runs(runs: Sequence[RunView]) -> dict[str, dict[str, RunView]]:
    """Per case, each runner's first run (a run that ran preferred to one that did not)."""
    cases: dict[str, dict[str, RunView]] = {}
    for view in runs:
        mine = cases.setdefault(view.case, {})
        if view.runner not in mine or (mine[view.runner].result is None and view.result is not None):
            mine[view.runner] = view
    return cases
