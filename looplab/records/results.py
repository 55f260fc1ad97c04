"""The results document: the one owner that writes, reads, validates and merges it.

Every command that records runs (`looplab run`, `looplab eval`, `looplab merge`) writes a
`Document` through `write`, and every reader (`looplab report`, `eval --resume`, `merge`, the
real-model notes) goes through `read` or `load`. The file says which shape it has:

- schema 3 (`"looplab_schema": 3`, this module's `SCHEMA`; schema 2 reads as 3, which only adds the stop
  reason and tool outcome `cancelled`, the `max_tokens` limit, and a cell's `stream`): one object holding the
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
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from looplab.adapters.contract import files
from looplab.adapters.contract.errors import MergeRefused, ResultsError
from looplab.adapters.contract.result import RunResult

if TYPE_CHECKING:
    from looplab.adapters.contract.trace import Attempt
    from looplab.records.outcome import RunOutcome
    from looplab.scenarios.cases import Case
    from looplab.shared_tools.records import ToolCallRecord

__all__ = [
    "CaseRecord",
    "CellKey",
    "CellRecord",
    "Document",
    "Environment",
    "INT_RANGE",
    "INVALID",
    "MAX_DEPTH",
    "MAX_SECONDS",
    "NOT_RESULTS",
    "READS",
    "SCHEMA",
    "SCHEMA_KEY",
    "SHOWN_CHARS",
    "STARTED_RANGE",
    "TOO_DEEP",
    "UNVERSIONED",
    "build",
    "case_descriptions",
    "case_hash",
    "current_environment",
    "finished",
    "load",
    "merge",
    "merge_files",
    "parse_json",
    "parse_result",
    "read",
    "read_for_resume",
    "shard_of",
    "summarize",
    "to_json",
    "validate",
    "without",
    "write",
]

#: The shape this looplab writes. Bump it when a field changes meaning or a reader would need a new one.
#: 3: the stop reason and tool outcome `cancelled`, and `limits.max_tokens` (values a schema 2 reader refuses).
SCHEMA = 3
#: The versioned shapes this looplab reads: a schema 2 document is a schema 3 one that holds none of what 3 adds.
READS = (2, 3)
#: Unversioned files: the shapes looplab wrote before the schema was recorded.
UNVERSIONED = 1
SCHEMA_KEY = "looplab_schema"
NOT_RESULTS = "not a looplab results file"
INVALID = "not a valid looplab results document"


class CellKey(NamedTuple):
    """A cell's identity, known before it runs: what shards and `--resume` go by."""

    runner: str
    case: str
    repeat: int
    model: str
    api: str | None
    #: `--stream on|off` as asked (None: each runner's own); part of the identity only when asked, so a cell
    #: run without it keeps the identity it had before streaming was a choice.
    stream: bool | None = None

    def canonical(self) -> str:
        """The identity as one stable string (JSON, no spaces): the same on every machine and Python."""
        return json.dumps(
            [self.runner, self.case, self.repeat, self.model, self.api, *_asked(self.stream)], separators=(",", ":")
        )


def _asked(stream: bool | None) -> list[bool]:
    """The stream choice as part of an identity: nothing when none was made."""
    return [] if stream is None else [stream]


def _stream_label(stream: bool | None) -> str:
    return "" if stream is None else f" (--stream {'on' if stream else 'off'})"


def shard_of(key: CellKey, shards: int, runners: Sequence[str] = ()) -> int:
    """The shard (1..shards) a cell belongs to, from identities alone: every machine computes the same one.

    A case's cells cost about the same whatever the runner, and cases differ by seconds (a test run
    that is killed, a slow one), so a case's cells are dealt out over the shards in turn: the matrix's
    `runners` ranked by the sha256 of each one's cell identity, dealt from a shard that the hash of
    the case (with its repeat, model and API) picks. Each shard then gets its share of every case,
    within one cell, which a hash of each cell alone leaves to chance. Cases and repeats added do not
    move the others; the runners asked for are part of the deal, so every shard is run with the same
    ones (the same command line but `--shard`).
    """
    group = list(dict.fromkeys([*runners, key.runner]))
    ranked = sorted(group, key=lambda runner: _digest(key._replace(runner=runner).canonical()))
    offset = _digest(json.dumps([key.case, key.repeat, key.model, key.api, *_asked(key.stream)], separators=(",", ":")))
    return (ranked.index(key.runner) + offset) % shards + 1


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


class Environment(BaseModel):
    """Where runs were made: the interpreter, the platform and the versions of what looplab runs on."""

    model_config = ConfigDict(frozen=True)

    python: str
    implementation: str
    platform: str
    looplab: str
    #: Installed distribution -> version, for every distribution looplab's core and runner extras name.
    packages: dict[str, str]

    @property
    def id(self) -> str:
        """A short content hash: equal environments from two documents collapse into one when merged."""
        return hashlib.sha256(self.model_dump_json().encode("utf-8")).hexdigest()[:16]


def _requirement_names() -> list[str]:
    """Distributions looplab's core and runner extras require (not the dev extra: it runs no run).

    The runners' own modules are mapped to their distributions too: an install's metadata can be
    older than the runner table, and a framework's version must not go missing for that.
    """
    from looplab.adapters import registry

    names = []
    by_module = metadata.packages_distributions()
    for info in registry.RUNNERS.values():
        for module in info.requires:
            names += [d.lower() for d in by_module.get(module.split(".")[0], [])]
    try:
        requires = metadata.requires("looplab") or []
    except metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
        requires = []
    for req in requires:
        if 'extra == "dev"' in req:
            continue
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req)
        if match and match.group(0).lower() != "looplab":
            names.append(match.group(0).lower())
    return sorted(set(names))


@cache
def current_environment() -> Environment:
    """This process's environment (cached: it does not change while looplab runs)."""
    packages = {}
    for name in _requirement_names():
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:  # an extra not installed here: its runners did not run here
            continue
    try:
        own = metadata.version("looplab")
    except metadata.PackageNotFoundError:
        own = "unknown"
    return Environment(
        python=platform.python_version(),
        implementation=platform.python_implementation(),
        platform=platform.platform(terse=True),
        looplab=own,
        packages=packages,
    )


def case_hash(case: Case) -> str:
    """sha256 of the case's definition, its suite's own tools and defaults, and every file of its repo and overlay,
    as a run sees them."""
    from looplab.shared_tools.workspace import SKIPPED_DIRS

    h = hashlib.sha256()
    h.update(json.dumps(case.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode("utf-8"))
    if case.suite is not None and case.suite.fingerprint:
        h.update(f"\0suite\0{case.suite.fingerprint}".encode())
    for label, root in (("repo", case.repo_path), ("overlay", case.overlay_path)):
        if root is None:
            continue
        files = sorted(
            p for p in root.rglob("*") if p.is_file() and not SKIPPED_DIRS.intersection(p.relative_to(root).parts)
        )
        for path in files:
            # The relative path and the length frame each file, so moving bytes between files changes the hash.
            data = path.read_bytes()
            h.update(f"\0{label}\0{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
            h.update(data)
    return "sha256:" + h.hexdigest()


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
    """A results document (see the module docstring); `results` stay JSON, parsed on demand by `run_results`."""

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

        suite = load_cases()
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
        )
        for c in doc.cells
    ]
    return [s.model_dump() for s in summarize_outcomes(outcomes)]


def to_json(doc: Document) -> str:
    """The document as the file holds it (schema version first)."""
    data = doc.model_dump(mode="json")
    return json.dumps({SCHEMA_KEY: data.pop(SCHEMA_KEY), **data}, indent=2) + "\n"


def write(doc: Document, path: Path) -> Path:
    """Write `doc` to `path` by `adapters.files`' rule: atomically (a reader, or an interrupt mid-write, never sees
    half a file), a symlink replaced, anything but a regular file refused, the umask or the old file's mode kept."""
    return files.write_text(path, to_json(doc))


# --- reading and validating ------------------------------------------------------------------------


def read(path: Path) -> Document:
    """A results file of any readable schema, validated; every problem is one `ResultsError` line naming it."""
    try:
        text = files.read_bytes(path).decode("utf-8")  # a regular file only, bounded: never a FIFO that blocks
    except files.FileRefused as exc:  # missing, a folder, a FIFO or device, too large, unreadable
        raise ResultsError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{path}: {NOT_RESULTS}: not JSON ({exc})") from None
    return load(parse_json(text, str(path)), source=str(path))


#: The deepest nesting of arrays and objects a results document may hold (the document itself is level 1).
#: Looplab writes about ten levels, a tool call's arguments below them; the bound keeps every reader and writer
#: of a document (json, pydantic's serializer, which stops near 255 levels, deep copies, the report) inside its own.
MAX_DEPTH = 200
TOO_DEEP = f"arrays and objects nested more than {MAX_DEPTH} deep"
#: The integers a document's counts, sizes and indices may hold: what a 64-bit counter holds, so their sums in
#: reports and the float charts stay far from overflowing.
INT_RANGE = range(-(2**63), 2**63)
#: How much of a value or a path quoted from a document an error message shows.
SHOWN_CHARS = 60


def parse_json(text: str | bytes, source: str) -> Any:
    """`text` as JSON, or one `ResultsError` line naming `source`: not JSON, or nested deeper than `MAX_DEPTH`."""
    try:
        return json.loads(text)
    except RecursionError:  # json's parser recurses once a level: thousands of levels exhaust the stack
        raise _too_deep(source, _deep_path_in_text(text)) from None
    except ValueError as exc:  # not JSON, not UTF-8, or an integer longer than Python converts
        raise ResultsError(f"{source}: {NOT_RESULTS}: not JSON ({exc})") from None


def load(data: Any, *, source: str = "results") -> Document:
    """A document from parsed JSON (or a `Document`), validated; schema 1 shapes are converted.

    Every problem is one `ResultsError` line naming `source` and the field, before any of it is used.
    """
    if isinstance(data, Document):
        return data
    if (odd := _odd_place(data)) is not None:
        raise ResultsError(f"{source}: {NOT_RESULTS}: {_field(odd[0])}: {odd[1]}")
    if isinstance(data, dict) and SCHEMA_KEY in data:
        version = data[SCHEMA_KEY]
        if type(version) is not int or version not in READS:  # not True, 2.0 or "2": the writer writes the int
            raise ResultsError(
                f"{source}: results schema {_shown(version)}: this looplab reads schema {SCHEMA} "
                f"(and {', '.join(map(str, READS[:-1]))}, and unversioned files, as schema {UNVERSIONED})"
            )
        try:
            doc = Document.model_validate({**data, SCHEMA_KEY: SCHEMA})
        except ValidationError as exc:
            raise ResultsError(f"{source}: {INVALID}: {_problem(exc)}") from None
        validate(doc, source=source)
        return doc
    if isinstance(data, list) or (isinstance(data, dict) and "results" in data):
        return _from_unversioned(data, source)
    raise ResultsError(
        f"{source}: {NOT_RESULTS}: expected a document with {SCHEMA_KEY!r}, the list of runs an older "
        "`looplab run --json` wrote, or the object with 'results' an older `looplab eval --json` wrote"
    )


def _field(path: Sequence[Any]) -> str:
    """A field's path as one short line: `results[0].trace.steps[2]`; an odd key quoted, a long path cut."""
    out = ""
    for part in path[:12]:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and re.fullmatch(r"[A-Za-z_][\w-]{0,40}", part, re.ASCII):
            out += f".{part}" if out else part
        else:
            out += f"[{_shown(part)}]"
    return (out + ("…" if len(path) > 12 else "")) or "the document"


def _shown(value: Any) -> str:
    """A value quoted from a document, cut to `SHOWN_CHARS` (its depth is already bounded)."""
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


def _problem(exc: ValidationError, at: Sequence[str | int] = ()) -> str:
    """The first error of a validation as `field: what is wrong`, the field's path starting at `at`."""
    first = exc.errors(include_url=False, include_input=False)[0]
    return f"{_field([*at, *first['loc']])}: {first['msg']}"


def _too_deep(source: str, path: Sequence[str | int]) -> ResultsError:
    return ResultsError(f"{source}: {NOT_RESULTS}: {_field(path)}: {TOO_DEEP}")


def _odd_place(data: Any) -> tuple[list[str | int], str] | None:
    """The path to the first thing in parsed JSON no reader should meet, and what it is; or None.

    That is an array or object nested deeper than `MAX_DEPTH`, or a number that is not finite (NaN,
    Infinity) or an integer outside `INT_RANGE`, except under an `args` key (a tool call's arguments,
    as the model sent them). A walk with its own stack: the data may be nested as deep as json's parser went.
    """
    stack: list[tuple[Any, tuple[str | int, ...], bool]] = [(data, (), True)]
    while stack:
        value, path, numbers_checked = stack.pop()
        if len(path) >= MAX_DEPTH:
            return list(path), TOO_DEEP
        if isinstance(value, dict):
            items: Iterable[tuple[str | int, Any]] = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            continue
        for key, item in items:
            kind = type(item)
            if kind is dict or kind is list:
                stack.append((item, (*path, key), numbers_checked and key != "args"))
            elif not numbers_checked:
                continue
            elif kind is float and not math.isfinite(item):
                return [*path, key], f"{item} is not a finite number"
            elif kind is int and item not in INT_RANGE:
                return [*path, key], "the integer is outside the 64-bit range"
    return None


#: A JSON string (escapes included) or one of the characters that open, close or separate arrays and objects.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]')


def _deep_path_in_text(text: str | bytes) -> list[str | int]:
    """The path to the first array or object nested deeper than `MAX_DEPTH` in JSON text `json` could not read."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    open_: list[list[Any]] = []  # per open array or object: its bracket and the index or key now being read
    key_next = False
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            if len(open_) >= MAX_DEPTH:
                return [place for _, place in open_]
            open_.append([token, 0 if token == "[" else None])
            key_next = token == "{"
        elif token in "]}":
            if open_:
                open_.pop()
            key_next = False
        elif token == ",":
            if open_ and open_[-1][0] == "[":
                open_[-1][1] += 1
            key_next = bool(open_) and open_[-1][0] == "{"
        elif key_next:  # a string where an object's key goes
            try:
                open_[-1][1] = json.loads(token)
            except ValueError:
                open_[-1][1] = token
            key_next = False
    return [place for _, place in open_]  # the parser gave up nearer the top than the bound: say where it was


def validate(doc: Document, *, source: str = "results") -> None:
    """Check what the field types cannot: every result parses, every reference resolves and matches its cell."""

    def bad(field: str, why: str) -> ResultsError:
        return ResultsError(f"{source}: {INVALID}: {field}: {why}")

    parsed = [_run_at(raw, ("results", i), f"{source}: {INVALID}") for i, raw in enumerate(doc.results)]
    used: set[int] = set()
    for i, cell in enumerate(doc.cells):
        where = f"cells[{i}]"
        if cell.case not in doc.cases:
            raise bad(f"{where}.case", f"{_shown(cell.case)} is not in 'cases'")
        if cell.environment is not None and cell.environment not in doc.environments:
            raise bad(f"{where}.environment", f"{_shown(cell.environment)} is not in 'environments'")
        if cell.result is None:
            continue
        if not 0 <= cell.result < len(doc.results):
            raise bad(f"{where}.result", f"{cell.result} is out of range: the document holds {len(doc.results)}")
        if cell.result in used:
            raise bad(f"{where}.result", f"results[{cell.result}] is another cell's")
        used.add(cell.result)
        run = parsed[cell.result]
        if (run.runner, run.case) != (cell.runner, cell.case):
            raise bad(
                f"{where}.result",
                f"results[{cell.result}] is {_shown(run.runner)} on {_shown(run.case)}, "
                f"the cell {_shown(cell.runner)} on {_shown(cell.case)}",
            )
    if len(used) != len(doc.results):
        first = min(set(range(len(doc.results))) - used)
        raise bad(f"results[{first}]", f"{len(doc.results) - len(used)} result(s) belong to no cell")
    for env_id, env in doc.environments.items():
        if env.id != env_id:
            raise bad(_field(["environments", env_id]), f"the id is not the hash of its content ({env.id})")
    doc._parsed = parsed


def _from_unversioned(data: Any, source: str) -> Document:
    """A schema 1 file as a `Document`: cells paired with results as the old reader did, no hashes or environments.

    Validated as strictly as schema 2: every run a `RunResult`, every cell a cell, before any is used.
    """
    at: tuple[str, ...] = () if isinstance(data, list) else ("results",)
    raw_results = data if isinstance(data, list) else data["results"]
    raw_cells = None if isinstance(data, list) else data.get("cells")
    if not isinstance(raw_results, list):
        odd: str | None = f"{_field(at)} is {_kind(raw_results)}"
    else:
        odd = next(
            (f"{_field([*at, i])} is {_kind(r)}" for i, r in enumerate(raw_results) if not isinstance(r, dict)), None
        )
    if odd:
        raise ResultsError(
            f"{source}: {NOT_RESULTS}: expected the list of runs `looplab run --json` writes "
            f"or the object with 'results' `looplab eval --json` writes ({odd}, not a run)"
        )
    if raw_cells is not None and not isinstance(raw_cells, list):
        raise ResultsError(f"{source}: {NOT_RESULTS}: cells: expected a list of cells, found {_kind(raw_cells)}")
    results = [_run_at(raw, (*at, i), f"{source}: {NOT_RESULTS}") for i, raw in enumerate(raw_results)]
    cells: list[_OldCell] = []
    for i, raw in enumerate(raw_cells or []):
        try:
            cells.append(_OldCell.model_validate(raw))
        except ValidationError as exc:
            raise ResultsError(f"{source}: {NOT_RESULTS}: {_problem(exc, ('cells', i))}") from None
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


def _run_at(raw: Any, at: Sequence[str | int], refusal: str) -> RunResult:
    """The run at `at` in a document, parsed and checked; else a `ResultsError` of `refusal` and the field."""
    try:
        run = parse_result(raw)
    except ValidationError as exc:
        raise ResultsError(f"{refusal}: {_problem(exc, at)}") from None
    if (odd := _off_the_clock(run)) is not None:
        raise ResultsError(f"{refusal}: {_field([*at, *odd[0]])}: {odd[1]}")
    return run


#: The longest a time on a run's clock may be (when a call started, how long it took, the run's wall time):
#: about 31 years. With `STARTED_RANGE`, every instant a run records falls where OpenTelemetry's
#: nanoseconds since 1970 (64 bits, to 2554) can hold it.
MAX_SECONDS = 1e9
#: When a run may have started (`RunResult.started_at`), in UTC.
STARTED_RANGE = (datetime(1970, 1, 1, tzinfo=UTC), datetime(2200, 1, 1, tzinfo=UTC))


def _off_the_clock(run: RunResult) -> tuple[list[str | int], str] | None:
    """The first time `run` records outside its clock (below 0 s, above `MAX_SECONDS`, or a start outside
    `STARTED_RANGE`), as (path, why); or None."""
    times: list[tuple[list[str | int], float]] = [(["totals", "wall_s"], run.totals.wall_s)]

    def calls(at: list[str | int], records: Sequence[ToolCallRecord]) -> None:
        for k, call in enumerate(records):
            times.extend([([*at, k, "started_at"], call.started_at), ([*at, k, "duration_s"], call.duration_s)])

    def attempts(at: list[str | int], records: Sequence[Attempt]) -> None:
        for k, attempt in enumerate(records):
            times.extend([([*at, k, "started_at"], attempt.started_at), ([*at, k, "latency_s"], attempt.latency_s)])

    for i, step in enumerate(run.trace.steps):
        at: list[str | int] = ["trace", "steps", i]
        model_call = step.model_call
        times.append(([*at, "model_call", "started_at"], model_call.started_at))
        times.append(([*at, "model_call", "latency_s"], model_call.latency_s))
        attempts([*at, "model_call", "failed_attempts"], model_call.failed_attempts)
        calls([*at, "tool_calls"], step.tool_calls)
    calls(["trace", "orphan_tool_calls"], run.trace.orphan_tool_calls)
    attempts(["trace", "unanswered"], run.trace.unanswered)
    for path, seconds in times:
        if not 0 <= seconds <= MAX_SECONDS:
            return path, f"{seconds:g} s is not a time on a run's clock (0 to {MAX_SECONDS:g} s)"
    started = run.started_at
    if started is not None and not STARTED_RANGE[0] <= started.replace(tzinfo=started.tzinfo or UTC) < STARTED_RANGE[1]:
        return ["started_at"], f"{started.isoformat()} is not when a run can have started (1970 to 2200)"
    return None


def _kind(value: Any) -> str:
    """What a JSON value is, in words: `a string`, `an object`."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


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


# --- merging and resuming --------------------------------------------------------------------------


def _mergeable(name: str, doc: Document) -> None:
    if doc.looplab_schema != SCHEMA:
        raise MergeRefused(
            f"{name}: results schema {doc.looplab_schema} (unversioned, from an older looplab): it records no case "
            f"hashes or models, so it cannot be merged or resumed; run it again with this looplab (schema {SCHEMA})"
        )


def merge(named: Sequence[tuple[str, Document]]) -> Document:
    """One document holding every cell, result, environment and case of `named` (`(file name, document)` pairs).

    Refused with one line naming the file: a document of another schema, a case id whose content hash
    differs from an earlier document's, a cell whose identity and runner version an earlier one already has.
    The cells come out in matrix order (model, api, repeat, case, runner), as one unsharded eval writes them.
    """
    out = Document()
    case_from: dict[str, str] = {}
    cell_from: dict[tuple[CellKey, str | None], str] = {}
    notes: list[str] = []
    placed: list[tuple[CellRecord, dict[str, Any], RunResult | None]] = []
    for name, doc in named:
        _mergeable(name, doc)
        for case_id, record in doc.cases.items():
            known = out.cases.setdefault(case_id, record)
            if known.hash != record.hash:
                raise MergeRefused(
                    f"{name}: case {case_id!r} is not the one in {case_from[case_id]} (content hash "
                    f"{_short(record.hash)}, there {_short(known.hash)}): they ran different versions of the case"
                )
            case_from.setdefault(case_id, name)
        out.environments.update(doc.environments)  # the id is the content's hash: equal ids, equal environments
        out.runners.extend(r for r in doc.runners if r not in out.runners)
        if doc.incomplete:
            notes.append(f"{name}: {doc.incomplete}")
        parsed = doc.run_results()
        for cell in doc.cells:
            twin = (cell.key, cell.runner_version)
            if twin in cell_from:
                raise MergeRefused(
                    f"{name}: cell {cell.runner} on {cell.case}, repeat {cell.repeat}, model {cell.model}"
                    f"{f' ({cell.api})' if cell.api else ''}{_stream_label(cell.stream)}, "
                    f"runner version {cell.runner_version or 'unknown'} "
                    f"is also in {cell_from[twin]}: merge each document once"
                )
            cell_from[twin] = name
            raw = doc.results[cell.result] if cell.result is not None else {}
            placed.append((cell, raw, parsed[cell.result] if cell.result is not None else None))
    runner_at = {r: i for i, r in enumerate(out.runners)}
    case_at = {c: i for i, c in enumerate(out.cases)}
    placed.sort(
        key=lambda p: (
            p[0].model,
            p[0].api or "",
            _asked(p[0].stream),
            p[0].repeat,
            case_at[p[0].case],
            runner_at.get(p[0].runner, len(runner_at)),
        )
    )
    out._parsed = []
    for cell, raw, result in placed:
        index = None
        if result is not None:
            index = len(out.results)
            out.results.append(raw)
            out._parsed.append(result)
        out.cells.append(cell.model_copy(update={"result": index}))
    out.runners.extend(r for r in dict.fromkeys(c.runner for c in out.cells) if r not in out.runners)
    out.incomplete = "; ".join(notes) or None
    out.summary = summarize(out)
    return out


def _short(digest: str | None) -> str:
    return "none" if digest is None else digest.removeprefix("sha256:")[:12]


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
    _mergeable(str(path), doc)
    for case in cases:
        recorded = doc.cases.get(case.id)
        if recorded is not None and recorded.hash != (now := case_hash(case)):
            raise ResultsError(
                f"{path}: case {case.id!r} changed since it was written (content hash {_short(recorded.hash)}, "
                f"now {_short(now)}): its runs cannot be resumed; start a new results file"
            )
    return doc


def finished(doc: Document) -> set[CellKey]:
    """Identities of the cells `--resume` skips: those with a result (a cell that errored runs again)."""
    return {c.key for c in doc.cells if c.result is not None}


def without(doc: Document, keys: set[CellKey]) -> Document:
    """`doc` less the cells whose identity is in `keys` (and their results), for `--resume` to replace them."""
    out = doc.model_copy(update={"cells": [], "results": []}, deep=True)
    out._parsed = []
    parsed = doc.run_results()
    for cell in doc.cells:
        if cell.key in keys:
            continue
        index = None
        if cell.result is not None:
            index = len(out.results)
            out.results.append(doc.results[cell.result])
            out._parsed.append(parsed[cell.result])
        out.cells.append(cell.model_copy(update={"result": index}))
    out.summary = summarize(out)
    return out


def case_descriptions(doc: Document | None = None) -> dict[str, str]:
    """Each case's one-line description: as `doc` recorded it, else from looplab's own suite (an older document
    has none); none when neither has it (a document needs no suite)."""
    try:
        from looplab.scenarios.cases import load_cases

        known = {cid: c.description for cid, c in load_cases().items()}
    except Exception:
        known = {}
    recorded = {cid: c.description for cid, c in doc.cases.items() if c.description} if doc is not None else {}
    return known | recorded
