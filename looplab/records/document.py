"""The results document's model: its schema version, the cases, cells and environments it holds, and its results.

`looplab.records.results` reads, writes and validates a `Document` (its module docstring describes the shapes),
`merge` merges documents and `migrate` builds one from a schema 1 file. The results stay JSON in it, parsed on
demand; the summary per runner is derived from its cells.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, PrivateAttr

from looplab.adapters.contract.result import RunResult
from looplab.records.environment import Environment
from looplab.records.identity import CellKey
from looplab.records.summary import RunnerSummary

__all__ = ["Document", "case_descriptions"]


#: The shape this looplab writes. Bump it when a field changes meaning or a reader would need a new one.
#: 3: the stop reason and tool outcome `cancelled`, and `limits.max_tokens` (values a schema 2 reader refuses).
#: 4: with repeats, the summary's 95 % intervals (`summary.RunnerSummary`), and its tokens and wall-time medians.
SCHEMA = 4
#: The versioned shapes this looplab reads: a schema 2 document is a schema 3 one that holds none of what 3 adds,
#: and a schema 3 one a schema 4 one whose summary is derived again from its cells on reading (`results.load`).
READS = (2, 3, 4)
#: Unversioned files: the shapes looplab wrote before the schema was recorded.
UNVERSIONED = 1
#: The key that holds the schema version (the first in the file).
SCHEMA_KEY = "looplab_schema"


class CaseRecord(BaseModel):
    """A case as the document knows it: its content hash (None: not a case of the suite, nothing to hash) and its
    one-line description (a team's case is not in the suite a reader of the document has)."""

    hash: str | None
    description: str = ""


class CellRecord(BaseModel):
    """One runner on one case, one repeat, one model: its checks, where it ran, and its result's index."""

    runner: str
    case: str
    repeat: int
    model: str
    api: str | None = None
    #: `--stream on|off` as asked: True, False, or None for each runner's own (see `CellKey.stream`).
    stream: bool | None = None
    runner_version: str | None = None
    #: The id of its entry in `Document.environments` (None in schema 1 files).
    environment: str | None = None
    #: Whether every check passed; None when no checks ran (schema 1 `run` output).
    passed: bool | None
    stop_reason: str | None = None
    failed_checks: list[str] = []
    error: str | None = None
    #: Index into `Document.results`; None when the cell has no result (it errored, hung, or its runner is missing).
    result: int | None = None

    @property
    def key(self) -> CellKey:
        """Its identity (see `CellKey`)."""
        return CellKey(self.runner, self.case, self.repeat, self.model, self.api, self.stream)


class Document(BaseModel):
    """A results document (its shapes: `looplab.records.results`); `results` stay JSON, parsed on demand by
    `run_results`."""

    looplab_schema: int = SCHEMA
    #: Why the command stopped early (an interrupt), or None for a complete set.
    incomplete: str | None = None
    runners: list[str] = []
    environments: dict[str, Environment] = {}
    cases: dict[str, CaseRecord] = {}
    summary: list[dict[str, Any]] = []
    cells: list[CellRecord] = []
    results: list[dict[str, Any]] = []
    _parsed: list[RunResult] | None = PrivateAttr(default=None)

    def run_results(self) -> list[RunResult]:
        """The results as `RunResult`s (parsed once)."""
        if self._parsed is None:
            self._parsed = [parse_result(r) for r in self.results]
        return self._parsed

    def runner_summaries(self) -> list[RunnerSummary]:
        """The per-runner summary as `RunnerSummary`s (its entries are checked when the document is read)."""
        return [RunnerSummary.model_validate(s) for s in self.summary]

    def result_of(self, cell: CellRecord) -> RunResult | None:
        """A cell's `RunResult`, or None."""
        return None if cell.result is None else self.run_results()[cell.result]


def parse_result(data: dict[str, Any] | RunResult) -> RunResult:
    """A `RunResult` from its JSON; a tool call's full `result` is not in the JSON, its preview stands in.

    Anything but a `RunResult`'s shape is a `ValidationError` whose first location names the field.
    """
    if isinstance(data, RunResult):
        return data
    return RunResult.model_validate(_with_results(data))


def _with_results(data: Any) -> Any:
    """`data` with each tool call's `result` filled in from its preview, where the shapes allow it.

    Whatever is not the shape expected is passed on as it is, for validation to name it.
    """
    if not isinstance(data, dict):
        return data
    trace = data.get("trace")
    if trace is None:  # a missing trace reads as an empty one, as it always has
        trace = {}
    if not isinstance(trace, dict):
        return data
    trace = dict(trace)
    if isinstance(steps := trace.get("steps"), list):
        trace["steps"] = [_step_with_results(step) for step in steps]
    if isinstance(orphans := trace.get("orphan_tool_calls"), list):
        trace["orphan_tool_calls"] = [_with_result(call) for call in orphans]
    return {**data, "trace": trace}


def _step_with_results(step: Any) -> Any:
    if isinstance(step, dict) and isinstance(calls := step.get("tool_calls"), list):
        return {**step, "tool_calls": [_with_result(call) for call in calls]}
    return step


def _with_result(call: Any) -> Any:
    if not isinstance(call, dict) or "result" in call:
        return call
    preview = call.get("result_preview")
    return {**call, "result": preview if isinstance(preview, str) else ""}


def summarize(doc: Document) -> list[dict[str, Any]]:
    """The per-runner summary (`summary.RunnerSummary`) over the document's cells."""
    from looplab.records.outcome import RunOutcome
    from looplab.records.summary import summarize as summarize_outcomes
    from looplab.scenarios.cases import CheckResult

    outcomes = [
        RunOutcome(
            c.runner,
            c.case,
            doc.result_of(c),
            [CheckResult(name=name, passed=False, detail="") for name in c.failed_checks],
            c.error,
            repeat=c.repeat,
        )
        for c in doc.cells
    ]
    return [s.model_dump(mode="json") for s in summarize_outcomes(outcomes)]


def case_descriptions(doc: Document | None = None) -> dict[str, str]:
    """Each case's one-line description: as `doc` recorded it, else from looplab's own suite (an older document
    has none); none when neither has it (a document needs no suite)."""
    try:
        from looplab.scenarios.cases import load_cases

        known = {cid: c.description for cid, c in load_cases(every=True).items()}
    except Exception:
        known = {}
    recorded = {cid: c.description for cid, c in doc.cases.items() if c.description} if doc is not None else {}
    return known | recorded
