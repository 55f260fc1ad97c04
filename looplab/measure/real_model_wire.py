"""The wire log beside a real-model run: each request's shape and the server's full error body, matched with the
requests the model boundary recorded (`looplab.measure.local_llm`'s `WireRecorder` writes it).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from looplab.adapters.contract import files
from looplab.adapters.contract.result import RunResult
from looplab.adapters.contract.trace import Attempt, ModelCall
from looplab.adapters.contract.wire_apis import WIRE_API
from looplab.measure.real_model_runs import plural, quote

#: One record of `looplab.measure.local_llm.WireRecorder`'s log (seq, path, status, request_bytes, shape, error).
WireRecord = dict[str, Any]
#: An answered call or an attempt that got no answer, with the wire record of the same request.
Exchange = tuple[ModelCall | Attempt, WireRecord]


def read_wire(path: Path) -> list[WireRecord]:
    """The wire log's records, oldest first; none if there is no log."""
    if not path.exists():
        return []
    return [json.loads(line) for line in files.read_text(path).splitlines() if line.strip()]


def attempts_in_order(result: RunResult) -> list[ModelCall | Attempt]:
    """Every HTTP attempt of a run as it was sent: each step's failed attempts, then its answer; then the unanswered."""
    out: list[ModelCall | Attempt] = []
    for step in result.trace.steps:
        out += [*step.model_call.failed_attempts, step.model_call]
    return out + list(result.trace.unanswered)


def align(results: Sequence[RunResult], wire: Sequence[WireRecord]) -> dict[int, list[Exchange]]:
    """Each run's requests matched with the wire records of the same requests, keyed by `id(result)`.

    The eval runs one cell at a time, so the wire log holds the runs' requests in
    the results' order; a run's requests are the next records whose statuses and
    byte counts are the ones the model boundary recorded. A run whose requests
    cannot be found that way (an attempt that got no response, a hung run still
    sending) is left out rather than guessed.
    """
    chat = [w for w in wire if str(w.get("path", "")).endswith(WIRE_API["chat"].suffixes)]
    out: dict[int, list[Exchange]] = {}
    cursor = 0
    for result in results:
        want = attempts_in_order(result)
        if not want:
            out[id(result)] = []
            continue
        for start in range(cursor, len(chat) - len(want) + 1):
            window = chat[start : start + len(want)]
            pairs = list(zip(want, window, strict=True))
            if all(w["status"] == a.status and w["request_bytes"] == a.request_bytes for a, w in pairs):
                out[id(result)] = pairs
                cursor = start + len(want)
                break
    return out


def shape_text(shape: dict[str, Any]) -> str:
    """A request's shape in one line: its messages, how many tools, tool_choice."""
    if not shape.get("json", True):
        return "not a JSON object"
    messages = " ".join(shape.get("messages") or [])
    choice = shape.get("tool_choice")
    choice_text = "tool_choice absent" if choice == "absent" else f"tool_choice {json.dumps(choice)}"
    return f"messages `{messages}`; {plural(shape.get('tools', 0), 'tool')}; {choice_text}"


def server_message(body: str | None) -> str:
    """The message of an error body (`{"error": {"message": ...}}`, `{"detail": ...}`), or the body itself."""
    try:
        data = json.loads(body or "")
    except ValueError:
        return body or ""
    error = data.get("error", data) if isinstance(data, dict) else data
    for key in ("message", "detail"):
        if isinstance(error, dict) and isinstance(error.get(key), str):
            return str(error[key])
    return body or ""


def validation_errors(message: str) -> list[dict[str, Any]]:
    """The pydantic errors a FastAPI server lists one per line (`{'type': ..., 'loc': (...), 'msg': ...}`)."""
    found = []
    for line in message.splitlines():
        line = line.strip()
        if not line.startswith("{'type'"):
            continue
        try:
            error = ast.literal_eval(line)  # literals only: a repr the server wrote, never code
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(error, dict) and isinstance(error.get("loc"), tuple):
            found.append(error)
    return found


def decisive(message: str, shape: dict[str, Any]) -> list[str]:
    """The validation errors that matter: for a message that fit no member of the union, its own role's member.

    A message with role `assistant` fails every member of the request's message
    union; only the errors of the assistant member say what was wrong with it.
    Each comes with the message's shape as sent (`assistant:null+tool_calls(1)`).
    """
    errors = validation_errors(message)
    roles: dict[int, str] = {}
    for e in errors:
        loc = e["loc"]
        if len(loc) >= 3 and loc[1] == "messages" and isinstance(loc[2], int) and loc[-1] == "role":
            if e.get("type") == "literal_error" and isinstance(e.get("input"), str):
                roles[loc[2]] = e["input"]
    shapes = shape.get("messages") or []
    lines = []
    for e in errors:
        loc = e["loc"]
        where = ".".join(str(p) for p in loc[1:])
        if len(loc) >= 5 and loc[1] == "messages" and isinstance(loc[2], int):
            index, member, field = loc[2], str(loc[3]), ".".join(str(p) for p in loc[4:])
            role = roles.get(index)
            if role is None or role.lower() not in member.lower():
                continue  # another role's member: noise of the union
            sent = f" (sent as `{shapes[index]}`)" if index < len(shapes) else ""
            where = f"messages[{index}] ({role}) {field}"
            lines.append(f"{where}: {e.get('msg')}, got {quote(repr(e.get('input')), 60)}{sent}")
        elif not roles:
            lines.append(f"{where}: {e.get('msg')}")
    return lines


def wire_lines(exchanges: Sequence[Exchange]) -> list[str]:
    """One line per run of identical requests (a retry repeats its request): status, bytes, shape, and
    what an error body said about it."""
    groups: list[tuple[int, int, WireRecord]] = []  # first request number, last, the record
    for number, (_, record) in enumerate(exchanges, 1):
        key = (record["status"], record["request_bytes"], json.dumps(record["shape"], sort_keys=True))
        if groups:
            first, _, last = groups[-1]
            if key == (last["status"], last["request_bytes"], json.dumps(last["shape"], sort_keys=True)):
                groups[-1] = (first, number, last)
                continue
        groups.append((number, number, record))
    lines = []
    for first, last, record in groups:
        times = last - first + 1
        which = f"request {first}" if times == 1 else f"requests {first}–{last} (one request sent {times}×)"
        line = f"{which}: HTTP {record['status']}, {record['request_bytes']:,} B, {shape_text(record['shape'])}"
        lines.append(line)
    return lines


def explanations(aligned: dict[int, list[Exchange]]) -> dict[int, str]:
    """For each failed attempt with a wire record (by `id(attempt)`): what its full error body said.

    The decisive validation errors when the body lists them (see `decisive`), else the server's message.
    """
    out: dict[int, str] = {}
    for exchanges in aligned.values():
        for sent, record in exchanges:
            if isinstance(sent, Attempt) and record.get("error"):
                message = server_message(record["error"])
                found = decisive(message, record.get("shape") or {})
                out[id(sent)] = ("; ".join(found) + f" (from {quote(message, 40)})") if found else quote(message)
    return out
