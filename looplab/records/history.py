"""Kept measurements: what looplab measured of each framework version, one small JSON file per version.

`history/<runner>/<version>.json` holds one runner's caps measurement (its section of `docs/iteration-caps.json`)
and how it did on each case of the suite against the scripted model, for the framework version it ran on. A
version measured once can then be compared with any other without installing it again: `changes_between` names
what moved from one kept version to the next (a default, what a knob counts, what happens at the cap, the tools of
the last call, the size of a request, a case's outcome), and `record` says which measurements are new versions
whose behaviour moved from the version kept before them, the news a scheduled comparison reports.

Files are written with sorted keys and a trailing newline, so a version measured again unchanged rewrites nothing.

A kept version is PEP 440 text (`check_version`): a version read from a document that is not is refused in one
line naming the document and the field, and a kept file holding one is refused where it is read. The measurements
come from runs of unpinned framework releases and the site publishes them; views escape every other string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, Field, ValidationError, field_validator

from looplab.adapters.contract import files
from looplab.adapters.contract.errors import LooplabError
from looplab.records.caps_changes import Change, changes
from looplab.records.document import CellRecord, Document
from looplab.records.measurements import CapsDoc, RunnerReport

__all__ = ["HISTORY", "Recorded", "VersionRecord", "changes_between", "read", "record", "records_from", "runners_of"]

#: The kept data's folder, at the repository's root.
HISTORY = Path("history")
#: The version of a kept file's layout.
SCHEMA = 1
#: The model whose runs are kept: the offline scripted one, the same for every version, so a case's outcome moves
#: only when the framework's behaviour does.
KEPT_MODEL = "scripted"
#: A request's size moves by a few bytes with nothing changed (an id's length, a number's digits); less than this
#: fraction is not a change.
REQUEST_SIZE_TOLERANCE = 0.05
#: What a runner's caps section holds that is looplab's own, not the framework's: left out of the comparison.
LOOPLAB_FIELDS = ("version", "code", "code_language")


class HistoryError(LooplabError):
    """A kept file that cannot be read, or measurements that cannot be kept."""


#: A package's name before its version (PEP 508's form of a name): `anthropic 2.17.0`, `litellm 1.80.0`.
_PACKAGE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
#: The characters a PEP 440 version is written with (`packaging` alone would also take surrounding whitespace).
_VERSION_CHARACTERS = re.compile(r"[A-Za-z0-9.+!_-]+")


def _is_pep_440(text: str) -> bool:
    if not _VERSION_CHARACTERS.fullmatch(text):
        return False
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def check_version(text: str) -> str:
    """`text` if it is a version looplab keeps: a PEP 440 version, after the name of its package where the runner's
    version names one (`anthropic 2.17.0`), and after ` + ` each package it ran with (`1.2.0 + litellm 1.80.0`);
    else a one-line ValueError."""
    for part in text.split(" + "):
        *package, version = part.split(" ")
        if len(package) > 1 or not all(map(_PACKAGE.fullmatch, package)) or not _is_pep_440(version):
            shown = repr(text[:80]) + ("..." if len(text) > 80 else "")
            raise ValueError(f"{shown} is not a PEP 440 version (after its package's name, if any)")
    return text


class CaseOutcome(BaseModel):
    """How a runner did on one case against the scripted model (the first repeat's numbers)."""

    runs: int
    passed: int
    stop_reason: str | None = None
    failed_checks: list[str] = []
    error: str | None = None
    model_calls: int | None = None
    tool_calls: int | None = None
    #: Bytes of the first request (system prompt, tool schemas, task) and of the largest one (the context at its
    #: longest).
    first_request_bytes: int | None = None
    largest_request_bytes: int | None = None
    #: What thread timing decides in this case on this runner (its declaration's `delegation_races`; None:
    #: nothing). Its outcome is kept to read, not compared: a release is not drift because a race went the other way.
    race: str | None = None


class VersionRecord(BaseModel):
    """What looplab measured of one runner on one version of its framework."""

    looplab_history: int = SCHEMA
    #: The folder its file is kept in, so a plain name (no path, no leading dot).
    runner: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
    distribution: str
    version: str
    measured_on: date
    #: The looplab version that measured it: a difference between two versions measured by two looplabs may be
    #: looplab's.
    looplab: str
    caps: RunnerReport | None = None
    cases: dict[str, CaseOutcome] = {}
    #: The runner's behaviour scorecard cells that were measured (row key -> text), read off the caps and cases.
    scorecard: dict[str, str] = {}

    @field_validator("version")
    @classmethod
    def _version(cls, version: str) -> str:
        return check_version(version)

    @field_validator("looplab")
    @classmethod
    def _looplab(cls, looplab: str) -> str:
        if not _is_pep_440(looplab):
            raise ValueError(f"{looplab[:80]!r} is not a PEP 440 version")
        return looplab

    def sort_key(self) -> tuple[int, Any, date]:
        """Framework versions in release order where they parse, else in the order they were measured."""
        try:
            return (0, Version((self.version.split() or [""])[-1]), self.measured_on)
        except InvalidVersion:
            return (1, self.measured_on, self.measured_on)


def file_name(version: str) -> str:
    """The kept file of a version: its text with anything but letters, digits, `.`, `_`, `+`, `-` made `-`."""
    return (re.sub(r"[^A-Za-z0-9._+-]+", "-", version).strip("-.") or "unnamed") + ".json"


def read(folder: Path = HISTORY) -> dict[str, list[VersionRecord]]:
    """Every kept version, by runner, each runner's in release order; an unreadable file is a one-line error."""
    kept: dict[str, list[VersionRecord]] = {}
    for path in sorted(folder.glob("*/*.json")):
        try:
            one = VersionRecord.model_validate_json(files.read_text(path))
        except (OSError, ValidationError) as exc:
            first = str(exc).splitlines()[0] if isinstance(exc, OSError) else _problem(exc)
            raise HistoryError(f"{path}: not a kept measurement: {first}") from None
        if one.runner != path.parent.name or file_name(one.version) != path.name:
            raise HistoryError(f"{path}: holds {one.runner} {one.version}, which belongs in {_path_of(one, folder)}")
        kept.setdefault(one.runner, []).append(one)
    return {runner: sorted(versions, key=VersionRecord.sort_key) for runner, versions in sorted(kept.items())}


def _problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return f"{'.'.join(str(p) for p in error['loc']) or 'the file'}: {error['msg']}"


def _path_of(one: VersionRecord, folder: Path) -> Path:
    return folder / one.runner / file_name(one.version)


def records_from(
    caps: CapsDoc | None,
    document: Document | None,
    *,
    measured_on: date,
    looplab: str,
    scorecards: Mapping[str, Mapping[str, str]] | None = None,
    races: Mapping[tuple[str, str], str] | None = None,
    caps_name: str = "the caps measurement",
    results_name: str = "the results document",
) -> list[VersionRecord]:
    """One record per runner measured in `caps` or run in `document` (its scripted-model cells on the runner's
    own wire API and stream), at the version each ran on, with the runner's cells of `scorecards` (by runner) and
    what timing decides in its cases (`races`, by runner and case: `CaseOutcome.race`).

    A runner whose eval ran another version than its caps measurement (a release between the two jobs) gets a
    record for each. A version that is not PEP 440 (`check_version`) is a one-line error naming the document (as
    `caps_name` and `results_name` call them) and the field, raised before any record is made.
    """
    _check_versions(caps, document, caps_name, results_name)
    made: dict[tuple[str, str], VersionRecord] = {}
    distribution = {r.runner: r.distribution for r in caps.runners} if caps else {}

    def one_of(runner: str, version: str) -> VersionRecord:
        if (runner, version) not in made:
            try:
                made[runner, version] = VersionRecord(
                    runner=runner,
                    distribution=distribution.get(runner, ""),
                    version=version,
                    measured_on=measured_on,
                    looplab=looplab,
                )
            except ValidationError:
                raise HistoryError(f"a runner named {runner!r} cannot be kept: its name is its folder's") from None
        return made[runner, version]

    for report in caps.runners if caps else ():
        one_of(report.runner, report.version).caps = report
    for (runner, version, case), cells in _kept_cells(document).items():
        one = one_of(runner, version)
        one.cases[case] = _outcome(document, cells)  # type: ignore[arg-type]  # cells come from a document
        one.cases[case].race = (races or {}).get((runner, case))
    for one in made.values():
        one.scorecard = dict((scorecards or {}).get(one.runner, {}))
    return sorted(made.values(), key=lambda r: (r.runner, r.sort_key()))


def _check_versions(caps: CapsDoc | None, document: Document | None, caps_name: str, results_name: str) -> None:
    """Every version a record would be kept at is PEP 440; else a one-line error naming the document and field."""
    named = [(f"{caps_name}: runners[{i}].version", r.version) for i, r in enumerate(caps.runners if caps else ())]
    named += [
        (f"{results_name}: cells[{i}].runner_version", c.runner_version or "")
        for i, c in enumerate(document.cells if document else ())
        if _kept(c)
    ]
    for where, version in named:
        try:
            check_version(version)
        except ValueError as exc:
            raise HistoryError(f"{where}: {exc}") from None


def _kept(cell: CellRecord) -> bool:
    """A cell whose run is kept: the scripted model on the runner's own wire API and stream, its version known."""
    return cell.model == KEPT_MODEL and cell.api is None and cell.stream is None and bool(cell.runner_version)


def _kept_cells(document: Document | None) -> dict[tuple[str, str, str], list[CellRecord]]:
    by_cell: dict[tuple[str, str, str], list[CellRecord]] = {}
    for cell in document.cells if document else ():
        if not _kept(cell):
            continue
        # A pinned version's cells are labelled `langgraph@1.0.0`; the version it ran is the cell's runner_version.
        by_cell.setdefault((cell.runner.partition("@")[0], cell.runner_version, cell.case), []).append(cell)
    return {key: sorted(cells, key=lambda c: c.repeat) for key, cells in sorted(by_cell.items())}


def _outcome(document: Document, cells: list[CellRecord]) -> CaseOutcome:
    first = cells[0]
    outcome = CaseOutcome(
        runs=len(cells),
        passed=sum(bool(c.passed) for c in cells),
        stop_reason=first.stop_reason,
        failed_checks=first.failed_checks,
        error=first.error.splitlines()[0][:200] if first.error else None,
    )
    run = document.result_of(first)
    if run is not None:
        sizes = [s.model_call.request_bytes for s in run.trace.steps]
        outcome.model_calls = run.totals.model_calls
        outcome.tool_calls = run.totals.tool_calls
        outcome.first_request_bytes = sizes[0] if sizes else None
        outcome.largest_request_bytes = max(sizes, default=None)
    return outcome


def case_changes(runner: str, before: dict[str, CaseOutcome], after: dict[str, CaseOutcome]) -> list[Change]:
    """How each case kept in both moved: its outcome, its counts, and its request sizes beyond the tolerance.

    A case kept on one side only is not a change of the framework's (the suite grew or shrank) and is left out, and
    so is one whose outcome either side leaves to timing (`CaseOutcome.race`).
    """
    found: list[Change] = []
    for case in sorted(before.keys() & after.keys()):
        was, now = before[case], after[case]
        if was.race or now.race:
            continue
        for name in ("passed", "stop_reason", "failed_checks", "error", "model_calls", "tool_calls"):
            old, new = getattr(was, name), getattr(now, name)
            if name == "passed":
                old, new = f"{was.passed}/{was.runs}", f"{now.passed}/{now.runs}"
            if old != new:
                found.append(Change(runner, f"case {case}", None, name, old, new))
        for name in ("first_request_bytes", "largest_request_bytes"):
            old, new = getattr(was, name), getattr(now, name)
            if _moved(old, new):
                found.append(Change(runner, f"case {case}", None, name, old, new))
    return found


def _moved(old: int | None, new: int | None) -> bool:
    if old is None or new is None:
        return old != new
    return abs(new - old) > REQUEST_SIZE_TOLERANCE * max(old, 1)


def changes_between(before: VersionRecord, after: VersionRecord) -> list[Change]:
    """What moved from one kept version of a runner to another: its caps (looplab's own fields left out), its cases
    and its scorecard cells. A part one side did not measure compares as nothing changed."""
    found = []
    if before.caps is not None and after.caps is not None:
        found += changes(before.caps, after.caps, ignore=LOOPLAB_FIELDS)
    found += case_changes(after.runner, before.cases, after.cases)
    for key in sorted(before.scorecard.keys() & after.scorecard.keys()):
        if before.scorecard[key] != after.scorecard[key]:
            found.append(Change(after.runner, "scorecard", None, key, before.scorecard[key], after.scorecard[key]))
    return found


@dataclass(frozen=True)
class Recorded:
    """What `record` did with one measurement: its file, whether it was new, and how it moved from the version
    kept before it (the newest older one)."""

    record: VersionRecord
    path: Path
    status: Literal["new version", "measured again", "unchanged"]
    previous: VersionRecord | None = None
    moved: tuple[Change, ...] = field(default=())

    @property
    def news(self) -> bool:
        """A new framework version whose measured behaviour moved from the version before it."""
        return self.status == "new version" and bool(self.moved)


def record(measured: Sequence[VersionRecord], folder: Path = HISTORY) -> list[Recorded]:
    """Keep each measurement in its version's file (the kept one of that version replaced) and say how each moved.

    A version kept already is measured again: its file takes the new measurement, and `moved` is against the old one
    (a looplab change, or a flaky framework). A new version is compared with the newest kept version older than it.
    A measurement lacking a part the kept one has (caps, or cases) keeps that part from the kept file: a run of
    only the eval does not drop the caps.
    """
    kept = read(folder) if folder.exists() else {}
    done: list[Recorded] = []
    for one in measured:
        versions = kept.get(one.runner, [])
        same = next((v for v in versions if v.version == one.version), None)
        if same is not None:
            one = _filled(one, same)
            status = "unchanged" if _same_measurement(same, one) else "measured again"
            moved = changes_between(same, one)
            previous = same
        else:
            older = [v for v in versions if v.sort_key() < one.sort_key()]
            previous = older[-1] if older else None
            status, moved = "new version", changes_between(previous, one) if previous else []
        path = _path_of(one, folder)
        if status != "unchanged":
            path.parent.mkdir(parents=True, exist_ok=True)
            files.write_text(path, to_json(one))
        kept[one.runner] = sorted([v for v in versions if v.version != one.version] + [one], key=VersionRecord.sort_key)
        done.append(Recorded(one, path, status, previous, tuple(moved)))
    return done


def _filled(one: VersionRecord, kept: VersionRecord) -> VersionRecord:
    return one.model_copy(
        update={
            "caps": one.caps or kept.caps,
            "cases": {**kept.cases, **one.cases},
            "scorecard": {**kept.scorecard, **one.scorecard},
        }
    )


def _same_measurement(a: VersionRecord, b: VersionRecord) -> bool:
    # The date and the measuring looplab alone moving is not worth a commit.
    return a.model_dump(exclude={"measured_on", "looplab"}) == b.model_dump(exclude={"measured_on", "looplab"})


def to_json(one: VersionRecord) -> str:
    """A kept file's text: small, sorted, stable, so two versions diff line by line."""
    return json.dumps(one.model_dump(mode="json"), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def runners_of(kept: dict[str, list[VersionRecord]], runners: Iterable[str]) -> dict[str, list[VersionRecord]]:
    """The kept versions of the named runners; an unknown name is a one-line error listing what is kept."""
    wanted = list(runners)
    if missing := [r for r in wanted if r not in kept]:
        raise HistoryError(f"nothing kept for {', '.join(missing)}; kept: {', '.join(kept) or 'nothing'}")
    return {r: kept[r] for r in wanted} if wanted else kept
