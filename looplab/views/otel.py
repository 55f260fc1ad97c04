"""Finished runs as OpenTelemetry traces, with the GenAI semantic conventions' names.

Each `RunResult` becomes one trace, built with the OpenTelemetry SDK from the records the two
boundaries kept (nothing is instrumented live: the runs have finished when they are exported):

- `invoke_agent {runner}`: the root, one per run (kind INTERNAL: the runner's loop runs in looplab's
  process or a child of it); the run's totals, stop reason, limits and native cap. A delegate's stretch of
  calls (a run with a second agent) is an `invoke_agent {agent}` span inside it, holding that stretch's spans.
  With repeats it also carries the runner's numbers over all its runs with their 95 % intervals
  (`looplab.views.otel_summary`).
- `chat {model}`: one per model call (kind CLIENT: an HTTP call to the model), from its first attempt
  to its answer; a model call that never got an answer (the run ended on it) is one more, with status ERROR.
- `execute_tool {name}`: one per tool call (kind INTERNAL), status ERROR when the call `is_error`.

Timestamps come from the records: every `started_at` is seconds on the run's clock, and
`RunResult.started_at` is when that clock read 0 in wall-clock time. A run recorded without it
(documents written before it was kept) is placed so that it ends at `anchor` (the export's time, or
the results file's modification time).

`write` puts every span of one command into one file, in OTLP/JSON (an `ExportTraceServiceRequest`
in the protobuf JSON mapping, with trace and span ids in hex as the OTLP specification asks, so
collectors and trace viewers read it); `send` posts the same spans to the collector that the standard
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` names, over OTLP/HTTP.
Both need the `otel` extra: `pip install 'looplab[otel]'`.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import itertools
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from looplab.adapters.contract import files
from looplab.adapters.contract.agents import MAIN_AGENT
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import StopReason
from looplab.adapters.contract.result import RunResult
from looplab.adapters.contract.runner import installed_version
from looplab.adapters.contract.trace import Attempt, ModelCall, Step, api_of
from looplab.records.summary import RunnerSummary
from looplab.shared_tools.records import ToolCallRecord
from looplab.views.otel_summary import runner_attributes

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.sdk.trace import ReadableSpan, Tracer
    from opentelemetry.trace import Span

__all__ = ["export", "require"]

#: What a collector gets to answer, retries included, before the export is given up with a warning.
SEND_TIMEOUT_S = 10.0
#: The event a failed attempt at a model call is recorded as, on its `chat` span.
FAILED_ATTEMPT_EVENT = "looplab.model.failed_attempt"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The loggers of the OTLP exporter, whose retries and failures become one warning line instead.
_EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.http"
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")
#: A results document's per-runner summary (`Document.runner_summaries`).
Summary = Iterable[RunnerSummary]


def require() -> None:
    """Import what exporting needs; a missing piece is one line naming the `otel` extra."""
    needed = (
        "opentelemetry.sdk.trace",
        "opentelemetry.exporter.otlp.proto.common.trace_encoder",
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "google.protobuf.json_format",
    )
    for module in needed:
        try:
            missing = importlib.util.find_spec(module) is None
        except ModuleNotFoundError:  # its parent package is missing
            missing = True
        if missing:
            raise LooplabError(f"OpenTelemetry traces need {module!r}: pip install 'looplab[otel]'")


def spans(results: Iterable[RunResult], *, anchor: datetime | None = None, summary: Summary = ()) -> list[ReadableSpan]:
    """Every run's spans, finished (see the module docstring for the tree, the timestamps and what `summary`, the
    results document's, adds)."""
    require()
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    record(results, provider.get_tracer("looplab", installed_version("looplab")), anchor=anchor, summary=summary)
    provider.shutdown()
    return list(memory.get_finished_spans())


def tracer_provider() -> Any:
    """A private `TracerProvider` for looplab's spans: every run sampled, the resource named `looplab`.

    Private, so spans never go to a provider the process set up for something else (a framework's own
    instrumentation); `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` still apply to the resource.
    """
    require()
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    resource = Resource.create()  # what the environment says
    ours = {"service.version": installed_version("looplab")}
    if str(resource.attributes.get("service.name", "unknown_service")).startswith("unknown_service"):
        ours["service.name"] = "looplab"  # unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES named one
    return TracerProvider(sampler=ALWAYS_ON, resource=resource.merge(Resource(ours)), shutdown_on_exit=False)


def record(
    results: Iterable[RunResult], tracer: Tracer, *, anchor: datetime | None = None, summary: Summary = ()
) -> None:
    """Emit each run's spans through `tracer`, one trace per run, with the records' timestamps; with `summary` (the
    results document's), each root span carries its runner's numbers over repeats (`runner_attributes`)."""
    anchor_ns = _ns_of(anchor or datetime.now(UTC))
    by_runner = {s.runner: runner_attributes(s) for s in summary}
    for result in results:
        _Run(_encodable(result), tracer, anchor_ns, by_runner.get(result.runner, {})).emit()


def _encodable(result: RunResult) -> RunResult:
    """The run with each lone surrogate (which JSON text may hold, as `\\ud800`) replaced by `?`: OTLP carries
    strings as UTF-8, which has no encoding for one. The record itself is left as it is."""
    from pydantic import BaseModel

    def clean(value: Any) -> Any:
        if type(value) is str:  # not a str enum (a stop reason): its members are plain ASCII
            return value.encode("utf-8", "replace").decode("utf-8")
        if isinstance(value, BaseModel):
            for name in type(value).model_fields:
                object.__setattr__(value, name, clean(getattr(value, name)))
            return value
        if isinstance(value, dict):
            return {clean(k): clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(clean(v) for v in value)
        return value

    return clean(result.model_copy(deep=True))  # type: ignore[no-any-return]


def write(span_list: Sequence[ReadableSpan], path: Path) -> Path:
    """Write `span_list` to `path` as one OTLP/JSON `ExportTraceServiceRequest` (ids in hex)."""
    require()
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    data = MessageToDict(encode_spans(span_list), use_integers_for_enums=True)
    for holder in _id_holders(data):
        for key in _ID_FIELDS:
            if holder.get(key):
                holder[key] = base64.b64decode(holder[key]).hex()
    return files.write_text(path, json.dumps(data, indent=1) + "\n")  # `adapters.files`' rule; one line if refused


def read(path: Path) -> ExportTraceServiceRequest:
    """An OTLP/JSON file (as `write` makes it: ids in hex) parsed back into an `ExportTraceServiceRequest`."""
    require()
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    data = json.loads(files.read_text(path))
    for holder in _id_holders(data):
        for key in _ID_FIELDS:
            if holder.get(key):  # the protobuf JSON mapping spells bytes in base64
                holder[key] = base64.b64encode(bytes.fromhex(holder[key])).decode("ascii")
    return ParseDict(data, ExportTraceServiceRequest())


def collector_endpoint() -> str | None:
    """The OTLP/HTTP traces URL the standard variables name, or None when neither is set."""
    if url := os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        return url  # the signal's own variable is the whole URL
    if url := os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        return url.rstrip("/") + "/v1/traces"
    return None


def send(span_list: Sequence[ReadableSpan], endpoint: str, timeout_s: float = SEND_TIMEOUT_S) -> str | None:
    """Post `span_list` to `endpoint` over OTLP/HTTP (protobuf); None when it took them, else why not, in one line.

    Never raises: the exporter's retries stop at `timeout_s`, and its log lines are folded into the reason.
    `OTEL_EXPORTER_OTLP_HEADERS` (and the other standard variables the exporter reads) apply.
    """
    require()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    with _captured(_EXPORTER_LOGGER) as said:
        try:
            exporter = OTLPSpanExporter(endpoint=endpoint, timeout=timeout_s)
            try:
                outcome = exporter.export(span_list)
            finally:
                exporter.shutdown()
        except Exception as exc:  # a malformed endpoint, a refused connection (older exporters raise it), ...
            return _one_line(f"{type(exc).__name__}: {exc}")
    if outcome is SpanExportResult.SUCCESS:
        return None
    return _reason(said) or f"no collector took them within {timeout_s:g} s"


@dataclass(frozen=True)
class Exported:
    """What `export` did: the file written, how many spans, and the collector's outcome if one was asked."""

    path: Path
    spans: int
    endpoint: str | None = None
    warning: str | None = None


def export(
    results: Iterable[RunResult],
    path: Path,
    *,
    anchor: datetime | None = None,
    timeout_s: float = SEND_TIMEOUT_S,
    summary: Summary = (),
) -> Exported:
    """Write every run's spans to `path`, then send them to the collector the environment names, if any; with
    `summary` (the results document's), each root span carries its runner's numbers over repeats.

    The file comes first, so a collector that is down or slow costs only the warning in `Exported.warning`.
    """
    span_list = spans(results, anchor=anchor, summary=summary)
    write(span_list, path)
    endpoint = collector_endpoint()
    warning = None
    if endpoint is not None:
        why = send(span_list, endpoint, timeout_s)
        if why is not None:
            warning = f"could not send the traces to {endpoint}: {why} (they are in {path})"
    return Exported(path, len(span_list), endpoint, warning)


class _Run:
    """One run's spans: the clock that places its records, and the attributes every span repeats."""

    def __init__(self, result: RunResult, tracer: Tracer, anchor_ns: int, runner: Mapping[str, Any]) -> None:
        self.result, self.tracer = result, tracer
        #: Its runner's numbers over repeats (`runner_attributes`), for the root span; empty without repeats.
        self.runner = runner
        provider, sep, model = result.model.partition(":")
        # "provider:name" is how looplab labels models; anything else is a model looplab does not name.
        self.provider, self.model = (provider, model) if sep else ("_OTHER", result.model)
        self.end_s = max([result.totals.wall_s, *_ends(result)])
        if result.started_at is not None:
            self.origin_ns = _ns_of(result.started_at)
        else:  # no start recorded: the run ends at the anchor
            self.origin_ns = anchor_ns - round(self.end_s * 1e9)

    def at(self, seconds: float) -> int:
        """Nanoseconds since the epoch at `seconds` on the run's clock."""
        return self.origin_ns + round(seconds * 1e9)

    def emit(self) -> None:
        from opentelemetry import trace
        from opentelemetry.context import Context
        from opentelemetry.trace import Link, SpanKind

        r = self.result
        # An empty context: each run is a trace of its own, whatever span is current in this process.
        root = self.tracer.start_span(
            f"invoke_agent {r.runner}",
            context=Context(),
            kind=SpanKind.INTERNAL,
            attributes=self.run_attributes(),
            start_time=self.at(0.0),
        )
        inside = trace.set_span_in_context(root)
        for agent, group in itertools.groupby(r.trace.steps, key=lambda step: step.model_call.agent):
            steps = list(group)
            # A delegate's stretch of calls is an agent of its own, inside the run's: its chat and tool spans
            # under an `invoke_agent {agent}` span that the root parents.
            child = None if agent in (None, MAIN_AGENT) else self.agent_span(agent, steps, inside)
            parent = inside if child is None else trace.set_span_in_context(child)
            for step in steps:
                chat = self.chat_span(step.model_call.failed_attempts, step.model_call, parent)
                # A tool call runs after the reply that asked for it has arrived, outside the chat span's time, so
                # it is the agent's child (a sibling of that chat span, as the conventions' agent traces show) and
                # links to the chat span that requested it.
                requested_by = [Link(chat.get_span_context())]
                for call in step.tool_calls:
                    self.tool_span(call, parent, requested_by, step=step.index)
            if child is not None:
                child.end(end_time=self.at(max(_step_ends(steps))))
        if r.trace.unanswered:
            self.chat_span(r.trace.unanswered, None, inside)
        for call in r.trace.orphan_tool_calls:
            self.tool_span(call, inside, [], step=None)
        if r.stop_reason is StopReason.ERROR:
            _fail(root, _run_error_type(r), r.stop_detail or "the run failed")
        root.end(end_time=self.at(self.end_s))

    def agent_span(self, agent: str, steps: Sequence[Step], parent: Any) -> Span:
        """The span of a delegate's stretch of model and tool calls, from its first attempt (ended by the caller)."""
        from opentelemetry.trace import SpanKind

        first = steps[0].model_call
        start = min([first.started_at, *(a.started_at for a in first.failed_attempts)])
        attributes = {**self.common("invoke_agent"), "gen_ai.agent.name": agent}
        return self.tracer.start_span(
            f"invoke_agent {agent}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=self.at(start),
        )

    def common(self, operation: str) -> dict[str, Any]:
        return {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model,
        }

    def run_attributes(self) -> dict[str, Any]:
        r, totals = self.result, self.result.totals
        attributes = {
            **self.common("invoke_agent"),
            "gen_ai.agent.name": r.runner,
            "gen_ai.usage.input_tokens": totals.input_tokens,
            "gen_ai.usage.output_tokens": totals.output_tokens,
            "looplab.runner.version": r.runner_version,
            "looplab.stop_reason": str(r.stop_reason),
            "looplab.native_cap.knob": r.native_cap.knob,
            "looplab.tool_transport": r.tool_transport,
            "looplab.model_calls": totals.model_calls,
            "looplab.failed_model_calls": totals.failed_model_calls,
            "looplab.tool_calls": totals.tool_calls,
            "looplab.wall_s": totals.wall_s,
        }
        optional = {
            "looplab.case.id": r.case,
            "looplab.stop_detail": r.stop_detail,
            "looplab.native_cap.value": _attribute_value(r.native_cap.value),
            "looplab.wire_api": next(iter(r.trace.apis), None),
            "looplab.cost_usd": totals.cost_usd,
            "gen_ai.usage.cache_read.input_tokens": totals.cached_input_tokens or None,
        }
        if r.limits is not None:
            optional |= {
                "looplab.max_steps": r.limits.max_steps,
                "looplab.max_seconds": r.limits.max_seconds,
                "looplab.max_cost_usd": r.limits.max_cost_usd,
                "looplab.max_tokens": r.limits.max_tokens,
                "looplab.max_repeats": r.limits.max_repeats,
            }
        return attributes | {k: v for k, v in optional.items() if v is not None} | dict(self.runner)

    def chat_span(self, attempts: Sequence[Attempt], call: ModelCall | None, parent: Any) -> Span:
        """A model call's span, covering its failed attempts and its answer (`call` None: it got none).

        The failed attempts are events on it, not spans of their own: the conventions make a GenAI span
        the logical operation, retries included, so one model call stays one `chat` span (what
        `max_steps` counts), and each event keeps the attempt's time, status, error and latency.
        """
        from opentelemetry.trace import SpanKind

        starts = [a.started_at for a in attempts] + ([call.started_at] if call else [])
        ends = [a.started_at + a.latency_s for a in attempts] + ([call.started_at + call.latency_s] if call else [])
        first = call or attempts[0]
        attributes = {
            **self.common("chat"),
            "looplab.wire_api": api_of(first.endpoint),
            "looplab.failed_attempts": len(attempts),
        }
        if call is not None:
            attributes |= _call_attributes(call)
        else:
            attributes["looplab.step"] = attempts[0].step
        span = self.tracer.start_span(
            f"chat {self.model}",
            context=parent,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=self.at(min(starts)),
        )
        for attempt in attempts:
            span.add_event(FAILED_ATTEMPT_EVENT, _attempt_attributes(attempt), timestamp=self.at(attempt.started_at))
        if call is None:
            last = attempts[-1]
            _fail(span, _attempt_error_type(last), last.error)
        span.end(end_time=self.at(max(ends)))
        return span

    def tool_span(self, call: ToolCallRecord, parent: Any, links: list[Any], step: int | None) -> Span:
        from opentelemetry.trace import SpanKind

        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": json.dumps(call.args, ensure_ascii=False, default=str),
            "looplab.tool.outcome": call.outcome,
            "looplab.tool.result_chars": call.result_chars,
        }
        if call.call_id:
            attributes["gen_ai.tool.call.id"] = call.call_id
        if step is not None:
            attributes["looplab.step"] = step
        span = self.tracer.start_span(
            f"execute_tool {call.name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
            start_time=self.at(call.started_at),
        )
        if call.is_error:
            _fail(span, call.outcome, call.result_preview)
        span.end(end_time=self.at(call.started_at + call.duration_s))
        return span


def _call_attributes(call: ModelCall) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": call.input_tokens,
        "gen_ai.usage.output_tokens": call.output_tokens,
        "http.response.status_code": call.status,
        "looplab.step": call.index,
        "looplab.streamed": call.streamed,
        "looplab.usage_estimated": call.usage_estimated,
        "looplab.request_bytes": call.request_bytes,
        "looplab.response_bytes": call.response_bytes,
        "looplab.tool_calls_requested": list(call.tool_calls_requested),
    }
    if call.finish_reason:
        attributes["gen_ai.response.finish_reasons"] = [call.finish_reason]
    if call.cached_input_tokens:
        attributes["gen_ai.usage.cache_read.input_tokens"] = call.cached_input_tokens
    if call.cache_write_tokens:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = call.cache_write_tokens
    if call.cost_usd is not None:
        attributes["looplab.cost_usd"] = call.cost_usd
    where = urlsplit(call.url)
    if where.hostname:
        attributes["server.address"] = where.hostname
        with contextlib.suppress(ValueError):  # a port that is not a number: no port
            if where.port is not None:
                attributes["server.port"] = where.port
    return attributes


def _attempt_attributes(attempt: Attempt) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "looplab.attempt": attempt.attempt,
        "error.type": _attempt_error_type(attempt),
        "looplab.error": attempt.error,
        "looplab.latency_s": attempt.latency_s,
        "looplab.request_bytes": attempt.request_bytes,
    }
    if attempt.status is not None:
        attributes["http.response.status_code"] = attempt.status
    return attributes


def _attempt_error_type(attempt: Attempt) -> str:
    """The status code; with no response, the exception's name the recorder put first (`ReadTimeout: ...`)."""
    if attempt.status is not None:
        return str(attempt.status)
    name = attempt.error.partition(":")[0].strip()
    return name if name.isidentifier() else "_OTHER"


def _run_error_type(result: RunResult) -> str:
    """The exception the framework raised, when it did; else `_OTHER` (the conventions' fallback)."""
    end = result.native_end
    return end.exception if end is not None and end.exception else "_OTHER"


def _fail(span: Span, error_type: str, description: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description.splitlines()[0] if description else None))


def _step_ends(steps: Iterable[Step]) -> Iterator[float]:
    """When each model and tool call of `steps` ended, on the run's clock."""
    for step in steps:
        yield step.model_call.started_at + step.model_call.latency_s
        for call in step.tool_calls:
            yield call.started_at + call.duration_s


def _ends(result: RunResult) -> Iterator[float]:
    """When each of the run's records ended, on its clock."""
    yield from _step_ends(result.trace.steps)
    for attempt in result.trace.failed_attempts:
        yield attempt.started_at + attempt.latency_s
    for call in result.trace.orphan_tool_calls:
        yield call.started_at + call.duration_s


def _attribute_value(value: Any) -> Any:
    """A value OpenTelemetry can carry: a plain scalar as it is, None as None, anything else as JSON."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    return json.dumps(value, default=str)


def _ns_of(moment: datetime) -> int:
    """Nanoseconds since the epoch, exactly (a naive datetime is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def _id_holders(data: Any) -> Iterator[dict[str, Any]]:
    """Every span and link in an `ExportTraceServiceRequest` as a dict (the objects that carry ids)."""
    for resource_spans in data.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                yield span
                yield from span.get("links", [])


def _reason(said: Sequence[logging.LogRecord]) -> str | None:
    """Why the exporter gave up, from what it logged: the collector's answer or the error it retried on.

    None when it logged neither (it gave up on the timeout before it retried).
    """
    why = None
    for record in said:
        if record.msg.startswith("Transient error") and record.args:
            why = f"{_one_line(str(record.args[0]))} (retried until the timeout)"
        elif "code: %s, reason: %s" in record.msg and len(record.args or ()) >= 2:
            why = f"the collector answered {record.args[0]}: {_one_line(str(record.args[1]))}"
    return why


def _one_line(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@contextlib.contextmanager
def _captured(name: str) -> Iterator[list[logging.LogRecord]]:
    """The records logged under `name` while inside, kept from the console (they become one warning)."""
    logger, said = logging.getLogger(name), []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record)

    handler, propagate = Keep(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield said
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
