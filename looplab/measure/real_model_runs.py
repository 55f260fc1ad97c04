"""What one run sent to a real model and what came back, in sentences: the lines of `docs/real-model-notes.md`
about a run (`looplab.measure.real_model_notes` puts the page together).

Each sentence is built from the run's record: the requests and failed attempts the model boundary saw, the tool
calls the Guard saw, the stop reason and detail, the framework's own ending.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence

from looplab.adapters.contract.limits import StopReason
from looplab.adapters.contract.result import RunResult
from looplab.adapters.contract.trace import Attempt
from looplab.shared_tools.records import ToolCallRecord

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
