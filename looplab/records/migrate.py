"""Schema 1 results files read as documents: the shapes looplab wrote before the schema was recorded.

A plain list of RunResults (`run --json`), `{"incomplete", "results"}` (an interrupted `run`) or `{"summary",
"cells", "results"}` (`eval --json`) becomes a `Document` of schema `UNVERSIONED`, its cells paired with its results
as the old reader did. Such a file records neither case hashes nor the model a cell was asked for: it reads for
reports, and cannot be merged or resumed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, ValidationError

from looplab.adapters.contract.errors import ResultsError
from looplab.records.document import UNVERSIONED, CaseRecord, CellRecord, Document
from looplab.records.validation import NOT_RESULTS, field_path, first_problem, kind_of, run_at


def from_unversioned(data: Any, source: str) -> Document:
    """A schema 1 file as a `Document`: cells paired with results as the old reader did, no hashes or environments.

    Validated as strictly as schema 2: every run a `RunResult`, every cell a cell, before any is used.
    """
    at: tuple[str, ...] = () if isinstance(data, list) else ("results",)
    raw_results = data if isinstance(data, list) else data["results"]
    raw_cells = None if isinstance(data, list) else data.get("cells")
    if not isinstance(raw_results, list):
        odd: str | None = f"{field_path(at)} is {kind_of(raw_results)}"
    else:
        odd = next(
            (f"{field_path([*at, i])} is {kind_of(r)}" for i, r in enumerate(raw_results) if not isinstance(r, dict)),
            None,
        )
    if odd:
        raise ResultsError(
            f"{source}: {NOT_RESULTS}: expected the list of runs `looplab run --json` writes "
            f"or the object with 'results' `looplab eval --json` writes ({odd}, not a run)"
        )
    if raw_cells is not None and not isinstance(raw_cells, list):
        raise ResultsError(f"{source}: {NOT_RESULTS}: cells: expected a list of cells, found {kind_of(raw_cells)}")
    results = [run_at(raw, (*at, i), f"{source}: {NOT_RESULTS}") for i, raw in enumerate(raw_results)]
    cells: list[_OldCell] = []
    for i, raw in enumerate(raw_cells or []):
        try:
            cells.append(_OldCell.model_validate(raw))
        except ValidationError as exc:
            raise ResultsError(f"{source}: {NOT_RESULTS}: {first_problem(exc, ('cells', i))}") from None
    incomplete = data.get("incomplete") if isinstance(data, dict) else None
    doc = Document(looplab_schema=UNVERSIONED, incomplete=incomplete if isinstance(incomplete, str) else None)
    doc._parsed = []

    def add(runner: str, case: str, repeat: int, index: int | None, passed: bool | None, **rest: Any) -> None:
        result = None if index is None else results[index]
        if result is not None:
            rest["result"] = len(doc.results)
            doc.results.append(raw_results[index])  # type: ignore[index]
            doc._parsed.append(result)  # type: ignore[union-attr]
            rest.setdefault("stop_reason", str(result.stop_reason))
        doc.cases.setdefault(case, CaseRecord(hash=None))
        doc.cells.append(
            CellRecord(
                runner=runner,
                case=case,
                repeat=repeat,
                model=result.model if result else "",
                runner_version=result.runner_version if result else None,
                passed=passed,
                **rest,
            )
        )

    if raw_cells is None:  # a plain list of runs: no checks, repeats counted in order
        seen: Counter[tuple[str, str]] = Counter()
        for i, r in enumerate(results):
            seen[(r.runner, r.case or "?")] += 1
            add(r.runner, r.case or "?", seen[(r.runner, r.case or "?")], i, None)
    else:
        pending: dict[tuple[str, str], list[int]] = {}
        for i, r in enumerate(results):
            pending.setdefault((r.runner, r.case or "?"), []).append(i)
        for cell in cells:
            queue = pending.get((cell.runner, cell.case), [])
            # A cell with a stop reason had a result; results kept the cells' order within (runner, case).
            index = queue.pop(0) if cell.stop_reason is not None and queue else None
            add(cell.runner, cell.case, cell.repeat, index, cell.passed, **cell.rest())
        for (runner, case), rest in pending.items():  # results without a cell (a hand-edited file): keep them
            for i in rest:
                add(runner, case, 0, i, None)
    doc.runners = list(dict.fromkeys(c.runner for c in doc.cells))
    return doc


class _OldCell(BaseModel):
    """A cell as schema 1 `eval --json` wrote it (extra fields ignored)."""

    runner: str
    case: str
    repeat: int = 1
    passed: bool
    stop_reason: str | None = None
    failed_checks: list[str] = []
    error: str | None = None

    def rest(self) -> dict[str, Any]:
        """The fields a `CellRecord` takes as they are."""
        return {"stop_reason": self.stop_reason, "failed_checks": self.failed_checks, "error": self.error}
