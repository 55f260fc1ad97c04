"""The results document: the one owner that writes, reads, validates and merges it.

Every command that records runs (`looplab run`, `looplab eval`, `looplab merge`) writes a
`Document` through `write`, and every reader (`looplab report`, `eval --resume`, `merge`, the
real-model notes) goes through `read` or `load`. The file says which shape it has:

- schema 4 (`"looplab_schema": 4`, `SCHEMA`; schema 2 and 3 read as 4: 3 adds the stop reason and tool
  outcome `cancelled`, the `max_tokens` limit and a cell's `stream`, and 4 the summary's intervals over repeats,
  which an older document's summary gets on reading, derived again from its cells): one object holding the
  runners and cases asked for (each case with a content hash of its definition and fixture files), every
  environment that produced a run (Python, platform, the installed framework versions), the
  cells (one runner on one case, one repeat, one model: its checks, and the index of its
  `RunResult` in `results`), the results, and a summary per runner derived from the cells.
- schema 1 (no version in the file): what looplab wrote before, a plain list of RunResults
  (`run --json`), `{"incomplete", "results"}` (an interrupted `run`) or `{"summary", "cells",
  "results"}` (`eval --json`). It still reads, for reports; it cannot be merged or resumed,
  because it records neither case hashes nor the model a cell was asked for.

A cell's identity (`CellKey`) is what was asked for before it ran: runner, case, repeat index,
model, wire API and, when asked, `--stream on|off`. With the matrix's runners it places the cell in a shard
(`shard_of`), and it decides whether `--resume` runs it again. Merging refuses two cells with the same identity
and the same runner version (the same shard merged twice, or overlapping runs): a repeat is
asked for with `--repeat`, not by merging a document twice. The same identity with another
runner version (two versions of one framework) is kept.

Each part lives in a module of its own: the model and its schema versions (`document`), the identity of a cell and
of a case (`identity`), where runs were made (`environment`), what a readable document may hold and how a refusal
names the field (`validation`), schema 1 files (`migrate`), merging and resuming (`merge`). This module builds a
document from outcomes, and writes, reads and loads files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from looplab.adapters.contract import files
from looplab.adapters.contract.errors import ResultsError
from looplab.records.document import (
    READS,
    SCHEMA,
    SCHEMA_KEY,
    UNVERSIONED,
    CaseRecord,
    CellRecord,
    Document,
    summarize,
)
from looplab.records.environment import current_environment
from looplab.records.identity import case_hash, short_hash
from looplab.records.merge import check_mergeable, merge
from looplab.records.migrate import from_unversioned
from looplab.records.validation import (
    INVALID,
    NOT_RESULTS,
    field_path,
    first_problem,
    odd_place,
    parse_json,
    shown,
    validate,
)

if TYPE_CHECKING:
    from looplab.records.outcome import RunOutcome
    from looplab.scenarios.cases import Case

__all__ = ["build", "load", "merge_files", "read", "read_for_resume", "write"]


# --- writing ---------------------------------------------------------------------------------------


def build(
    outcomes: Iterable[RunOutcome],
    *,
    model: str = "scripted",
    api: str | None = None,
    stream: bool | None = None,
    runners: Sequence[str] | None = None,
    cases: Iterable[Case] | None = None,
    incomplete: str | None = None,
) -> Document:
    """The document for `outcomes`, all run here with `model` (as asked: `scripted` or `provider:name`), `api` and
    `stream` (None: each runner's own).

    `runners` and `cases` are the matrix asked for (a shard may hold no cell of some); they default to
    the ones the outcomes name, the cases looked up in the suite.
    """
    from looplab.records.summary import cells as cells_of

    outcomes = list(outcomes)
    env = current_environment()
    if cases is None:
        from looplab.scenarios.cases import load_cases

        suite = load_cases(every=True)
        cases = [suite[c] for c in dict.fromkeys(o.case for o in outcomes) if c in suite]
    records = {c.id: CaseRecord(hash=case_hash(c), description=c.description) for c in cases}
    for o in outcomes:  # a case outside the suite (a test's own) has no definition to hash
        records.setdefault(o.case, CaseRecord(hash=None))
    doc = Document(
        incomplete=incomplete,
        runners=list(dict.fromkeys([*(runners or []), *(o.runner for o in outcomes)])),
        environments={},  # those the cells ran in, below
        cases=records,
    )
    for outcome, cell in zip(outcomes, cells_of(outcomes), strict=True):
        where = outcome.environment or env  # a lane in a runner environment says where it ran
        doc.environments.setdefault(where.id, where)
        index = None
        if outcome.result is not None:
            index = len(doc.results)
            doc.results.append(outcome.result.model_dump(mode="json"))
        doc.cells.append(
            CellRecord(
                **cell.model_dump(),
                model=model,
                api=api,
                stream=stream,
                runner_version=outcome.result.runner_version if outcome.result else None,
                environment=where.id,
                result=index,
            )
        )
    doc.summary = summarize(doc)
    return doc


def to_json(doc: Document) -> str:
    """The document as the file holds it (schema version first)."""
    data = doc.model_dump(mode="json")
    return json.dumps({SCHEMA_KEY: data.pop(SCHEMA_KEY), **data}, indent=2) + "\n"


def write(doc: Document, path: Path) -> Path:
    """Write `doc` to `path` by `adapters.files`' rule: atomically (a reader, or an interrupt mid-write, never sees
    half a file), a symlink replaced, anything but a regular file refused, the umask or the old file's mode kept."""
    return files.write_text(path, to_json(doc))


# --- reading ---------------------------------------------------------------------------------------


def read(path: Path) -> Document:
    """A results file of any readable schema, validated; every problem is one `ResultsError` line naming it."""
    try:
        text = files.read_bytes(path).decode("utf-8")  # a regular file only, bounded: never a FIFO that blocks
    except files.FileRefused as exc:  # missing, a folder, a FIFO or device, too large, unreadable
        raise ResultsError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{path}: {NOT_RESULTS}: not JSON ({exc})") from None
    return load(parse_json(text, str(path)), source=str(path))


def load(data: Any, *, source: str = "results") -> Document:
    """A document from parsed JSON (or a `Document`), validated; schema 1 shapes are converted.

    Every problem is one `ResultsError` line naming `source` and the field, before any of it is used.
    """
    if isinstance(data, Document):
        return data
    if (odd := odd_place(data)) is not None:
        raise ResultsError(f"{source}: {NOT_RESULTS}: {field_path(odd[0])}: {odd[1]}")
    if isinstance(data, dict) and SCHEMA_KEY in data:
        version = data[SCHEMA_KEY]
        if type(version) is not int or version not in READS:  # not True, 2.0 or "2": the writer writes the int
            raise ResultsError(
                f"{source}: results schema {shown(version)}: this looplab reads schema {SCHEMA} "
                f"(and {', '.join(map(str, READS[:-1]))}, and unversioned files, as schema {UNVERSIONED})"
            )
        try:
            doc = Document.model_validate({**data, SCHEMA_KEY: SCHEMA})
        except ValidationError as exc:
            raise ResultsError(f"{source}: {INVALID}: {first_problem(exc)}") from None
        validate(doc, source=source)
        if version < SCHEMA:  # its summary has none of what came since (the intervals): derived again
            doc.summary = summarize(doc)
        return doc
    if isinstance(data, list) or (isinstance(data, dict) and "results" in data):
        return from_unversioned(data, source)
    raise ResultsError(
        f"{source}: {NOT_RESULTS}: expected a document with {SCHEMA_KEY!r}, the list of runs an older "
        "`looplab run --json` wrote, or the object with 'results' an older `looplab eval --json` wrote"
    )


# --- merging and resuming files --------------------------------------------------------------------


def merge_files(paths: Sequence[Path]) -> Document:
    """`merge` over files, each read and validated first."""
    return merge([(str(p), read(p)) for p in paths])


def read_for_resume(path: Path, cases: Iterable[Case]) -> Document:
    """The document `--resume PATH` continues (an empty one if PATH does not exist yet).

    Refused before anything runs: a schema 1 file, or a case whose definition or fixture changed
    since PATH was written (its old runs and the new ones would not be the same case).
    """
    if not path.exists():
        return Document()
    doc = read(path)
    check_mergeable(str(path), doc)
    for case in cases:
        recorded = doc.cases.get(case.id)
        if recorded is not None and recorded.hash != (now := case_hash(case)):
            raise ResultsError(
                f"{path}: case {case.id!r} changed since it was written (content hash {short_hash(recorded.hash)}, "
                f"now {short_hash(now)}): its runs cannot be resumed; start a new results file"
            )
    return doc
