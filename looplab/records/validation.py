"""What a readable results document may hold, and how a refusal names what it does not.

Every bound is checked before any of a document is used: the nesting of arrays and objects (`MAX_DEPTH`), numbers
(finite, within `INT_RANGE`), the times on a run's clock (`MAX_SECONDS`, `STARTED_RANGE`), and the references
between cells, results, cases and environments (`validate`). A refusal is one `ResultsError` line naming the source
and the field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from looplab.adapters.contract.errors import ResultsError
from looplab.records.document import Document, parse_result
from looplab.records.summary import RunnerSummary

if TYPE_CHECKING:
    from looplab.adapters.contract.result import RunResult
    from looplab.adapters.contract.trace import Attempt
    from looplab.shared_tools.records import ToolCallRecord


#: How a refusal says the file is not a results document at all.
NOT_RESULTS = "not a looplab results file"
#: How a refusal says the file is a results document whose content is wrong.
INVALID = "not a valid looplab results document"
#: The deepest nesting of arrays and objects a results document may hold (the document itself is level 1).
#: Looplab writes about ten levels, a tool call's arguments below them; the bound keeps every reader and writer
#: of a document (json, pydantic's serializer, which stops near 255 levels, deep copies, the report) inside its own.
MAX_DEPTH = 200
#: What a refusal says of data nested deeper than `MAX_DEPTH`.
TOO_DEEP = f"arrays and objects nested more than {MAX_DEPTH} deep"
#: The integers a document's counts, sizes and indices may hold: what a 64-bit counter holds, so their sums in
#: reports and the float charts stay far from overflowing.
INT_RANGE = range(-(2**63), 2**63)
#: How much of a value or a path quoted from a document an error message shows.
SHOWN_CHARS = 60
#: The longest a time on a run's clock may be (when a call started, how long it took, the run's wall time):
#: about 31 years. With `STARTED_RANGE`, every instant a run records falls where OpenTelemetry's
#: nanoseconds since 1970 (64 bits, to 2554) can hold it.
MAX_SECONDS = 1e9
#: When a run may have started (`RunResult.started_at`), in UTC.
STARTED_RANGE = (datetime(1970, 1, 1, tzinfo=UTC), datetime(2200, 1, 1, tzinfo=UTC))


def parse_json(text: str | bytes, source: str) -> Any:
    """`text` as JSON, or one `ResultsError` line naming `source`: not JSON, or nested deeper than `MAX_DEPTH`."""
    try:
        return json.loads(text)
    except RecursionError:  # json's parser recurses once a level: thousands of levels exhaust the stack
        raise _too_deep(source, _deep_path_in_text(text)) from None
    except ValueError as exc:  # not JSON, not UTF-8, or an integer longer than Python converts
        raise ResultsError(f"{source}: {NOT_RESULTS}: not JSON ({exc})") from None


def field_path(path: Sequence[Any]) -> str:
    """A field's path as one short line: `results[0].trace.steps[2]`; an odd key quoted, a long path cut."""
    out = ""
    for part in path[:12]:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and re.fullmatch(r"[A-Za-z_][\w-]{0,40}", part, re.ASCII):
            out += f".{part}" if out else part
        else:
            out += f"[{shown(part)}]"
    return (out + ("…" if len(path) > 12 else "")) or "the document"


def shown(value: Any) -> str:
    """A value quoted from a document, cut to `SHOWN_CHARS` (its depth is already bounded)."""
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


def first_problem(exc: ValidationError, at: Sequence[str | int] = ()) -> str:
    """The first error of a validation as `field: what is wrong`, the field's path starting at `at`."""
    first = exc.errors(include_url=False, include_input=False)[0]
    return f"{field_path([*at, *first['loc']])}: {first['msg']}"


def kind_of(value: Any) -> str:
    """What a JSON value is, in words: `a string`, `an object`."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _too_deep(source: str, path: Sequence[str | int]) -> ResultsError:
    return ResultsError(f"{source}: {NOT_RESULTS}: {field_path(path)}: {TOO_DEEP}")


def odd_place(data: Any) -> tuple[list[str | int], str] | None:
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


def run_at(raw: Any, at: Sequence[str | int], refusal: str) -> RunResult:
    """The run at `at` in a document, parsed and checked; else a `ResultsError` of `refusal` and the field."""
    try:
        run = parse_result(raw)
    except ValidationError as exc:
        raise ResultsError(f"{refusal}: {first_problem(exc, at)}") from None
    if (odd := _off_the_clock(run)) is not None:
        raise ResultsError(f"{refusal}: {field_path([*at, *odd[0]])}: {odd[1]}")
    return run


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


def validate(doc: Document, *, source: str = "results") -> None:
    """Check what the field types cannot: every result parses, every reference resolves and matches its cell."""

    def bad(field: str, why: str) -> ResultsError:
        return ResultsError(f"{source}: {INVALID}: {field}: {why}")

    parsed = [run_at(raw, ("results", i), f"{source}: {INVALID}") for i, raw in enumerate(doc.results)]
    used: set[int] = set()
    for i, cell in enumerate(doc.cells):
        where = f"cells[{i}]"
        if cell.case not in doc.cases:
            raise bad(f"{where}.case", f"{shown(cell.case)} is not in 'cases'")
        if cell.environment is not None and cell.environment not in doc.environments:
            raise bad(f"{where}.environment", f"{shown(cell.environment)} is not in 'environments'")
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
                f"results[{cell.result}] is {shown(run.runner)} on {shown(run.case)}, "
                f"the cell {shown(cell.runner)} on {shown(cell.case)}",
            )
    if len(used) != len(doc.results):
        first = min(set(range(len(doc.results))) - used)
        raise bad(f"results[{first}]", f"{len(doc.results) - len(used)} result(s) belong to no cell")
    for env_id, env in doc.environments.items():
        if env.id != env_id:
            raise bad(field_path(["environments", env_id]), f"the id is not the hash of its content ({env.id})")
    for k, entry in enumerate(doc.summary):  # what the views read of it, read as they read it
        try:
            RunnerSummary.model_validate(entry)
        except ValidationError as exc:
            raise ResultsError(f"{source}: {INVALID}: {first_problem(exc, ('summary', k))}") from None
    doc._parsed = parsed
