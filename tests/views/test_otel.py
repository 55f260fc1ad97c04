"""Runs as OpenTelemetry GenAI traces: the span tree, its attributes and times, the OTLP/JSON file, a collector."""

from __future__ import annotations

import base64
import json
import re
import socket
import tempfile
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from starlette.types import ASGIApp

from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.result import NativeCap, RunResult, Totals
from looplab.adapters.contract.trace import Attempt, ModelCall, Step, Trace
from looplab.cli import main
from looplab.scenarios.scripted.faults import HttpFaults
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools.records import ToolCallRecord
from looplab.views import otel
from tests.runs import run_runner

#: What every span of an operation carries (the conventions' required ones, and looplab's own).
REQUIRED = {
    "invoke_agent": {
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.agent.name",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "looplab.stop_reason",
        "looplab.max_steps",
        "looplab.native_cap.knob",
        "looplab.native_cap.value",
        "looplab.runner.version",
        "looplab.wire_api",
    },
    "chat": {
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.response.finish_reasons",
    },
    "execute_tool": {"gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.id"},
}


def recorded(results: list[RunResult], anchor: datetime | None = None) -> list:
    """The finished spans of `results`, as the SDK's in-memory exporter holds them."""
    memory = InMemorySpanExporter()
    provider = otel.tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    otel.record(results, provider.get_tracer("test"), anchor=anchor)
    provider.shutdown()
    return list(memory.get_finished_spans())


def operation(span) -> str:
    return span.attributes["gen_ai.operation.name"]


@pytest.fixture(scope="module")
def retried_run() -> RunResult:
    """The investigation by the hand-rolled loop, its first model request answered 500 and retried."""

    def wrap(app: ASGIApp) -> ASGIApp:
        return HttpFaults(app, [500])

    with ScriptedModelServer(wrap=wrap) as server:
        result = run_runner("handrolled", server, Limits(max_seconds=60))
    assert result.stop_reason == StopReason.FINAL_ANSWER and result.totals.failed_model_calls == 1
    return result


def test_a_run_is_one_trace_an_agent_span_over_its_chat_and_tool_spans(retried_run: RunResult) -> None:
    spans = recorded([retried_run])
    [root] = [s for s in spans if s.parent is None]
    chats = sorted((s for s in spans if operation(s) == "chat"), key=lambda s: s.attributes["looplab.step"])
    tools = [s for s in spans if operation(s) == "execute_tool"]
    assert root.name == "invoke_agent handrolled" and root.kind is SpanKind.INTERNAL
    assert [s.name for s in chats] == ["chat scripted"] * retried_run.totals.model_calls
    assert all(s.kind is SpanKind.CLIENT for s in chats)
    assert sorted(s.name for s in tools) == sorted(f"execute_tool {c.name}" for c in retried_run.trace.tool_calls)
    assert len(spans) == 1 + len(chats) + len(tools)
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    assert all(s.parent.span_id == root.context.span_id for s in spans if s is not root)
    # each tool span links to the chat span whose reply asked for it
    chat_of_step = {s.attributes["looplab.step"]: s.context.span_id for s in chats}
    for tool in tools:
        [link] = tool.links
        assert link.context.span_id == chat_of_step[tool.attributes["looplab.step"]]


def test_the_spans_carry_the_conventions_names_and_the_runs_numbers(retried_run: RunResult) -> None:
    spans = recorded([retried_run])
    for span in spans:
        assert REQUIRED[operation(span)] <= set(span.attributes), span.name
    [root] = [s for s in spans if s.parent is None]
    r = retried_run
    assert (
        dict(root.attributes).items()
        >= {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": "scripted",
            "gen_ai.agent.name": "handrolled",
            "gen_ai.usage.input_tokens": r.totals.input_tokens,
            "gen_ai.usage.output_tokens": r.totals.output_tokens,
            "looplab.stop_reason": "final_answer",
            "looplab.max_steps": 12,
            "looplab.native_cap.knob": r.native_cap.knob,
            "looplab.native_cap.value": 12,
            "looplab.runner.version": r.runner_version,
            "looplab.wire_api": "messages",
        }.items()
    )
    by_step = {s.attributes["looplab.step"]: s for s in spans if operation(s) == "chat"}
    for step in r.trace.steps:
        call, span = step.model_call, by_step[step.index]
        assert span.attributes["gen_ai.usage.input_tokens"] == call.input_tokens
        assert span.attributes["gen_ai.response.finish_reasons"] == (call.finish_reason,)
    tool_ids = {s.attributes["gen_ai.tool.call.id"] for s in spans if operation(s) == "execute_tool"}
    assert tool_ids == {c.call_id for c in r.trace.tool_calls}
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)  # it answered; a retry is no failure


def test_a_failed_attempt_is_an_event_inside_its_chat_span_at_the_records_time(retried_run: RunResult) -> None:
    spans = recorded([retried_run])
    [root] = [s for s in spans if s.parent is None]
    first = next(s for s in spans if s.attributes.get("looplab.step") == 1 and operation(s) == "chat")
    [event] = first.events
    [attempt] = retried_run.trace.steps[0].model_call.failed_attempts
    origin = otel._ns_of(retried_run.started_at)
    assert root.start_time == origin
    assert event.name == otel.FAILED_ATTEMPT_EVENT and event.attributes["http.response.status_code"] == 500
    assert first.start_time == event.timestamp == origin + round(attempt.started_at * 1e9)
    call = retried_run.trace.steps[0].model_call
    assert first.end_time == origin + round((call.started_at + call.latency_s) * 1e9)
    assert first.attributes["looplab.failed_attempts"] == 1


def test_a_lone_surrogate_in_a_record_is_exported_as_a_replacement_and_the_record_is_left_alone(
    retried_run: RunResult, tmp_path: Path
) -> None:
    # JSON text may hold `\\ud800`, which a results document read back then carries; UTF-8 (OTLP) has no encoding.
    odd = retried_run.model_copy(deep=True)
    odd.trace.tool_calls[0].name = "read\ud800file"
    otel.export([odd], tmp_path / "spans.json")
    names = {
        s["name"]
        for r in json.loads((tmp_path / "spans.json").read_text())["resourceSpans"]
        for scope in r["scopeSpans"]
        for s in scope["spans"]
    }
    assert "execute_tool read?file" in names and odd.trace.tool_calls[0].name == "read\ud800file"


def test_a_failed_run_and_its_unanswered_model_call_have_status_error() -> None:
    def wrap(app: ASGIApp) -> ASGIApp:
        return HttpFaults(app, then=500)

    with ScriptedModelServer(wrap=wrap) as server:
        result = run_runner("handrolled", server, Limits(max_seconds=60), retries=0)
    assert result.stop_reason == StopReason.ERROR
    spans = recorded([result])
    [root] = [s for s in spans if s.parent is None]
    [chat] = [s for s in spans if operation(s) == "chat"]
    assert root.status.status_code is StatusCode.ERROR and "answered 500" in root.status.description
    assert chat.status.status_code is StatusCode.ERROR and chat.attributes["error.type"] == "500"
    assert len(chat.events) == len(result.trace.unanswered) == 1


def test_run_otel_writes_one_otlp_json_file_that_parses_back(tmp_path: Path, monkeypatch, capsys) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    path, results = tmp_path / "traces" / "otel.json", tmp_path / "results.json"
    argv = [
        "run",
        "--runner",
        "handrolled",
        "--case",
        "vip-compound",
        "--quiet",
        "--otel",
        str(path),
        "--json",
        str(results),
    ]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    assert f"OpenTelemetry: {path}" in "".join(capsys.readouterr().out.split("\n"))  # the console wraps long lines
    [record] = json.loads(results.read_text())["results"]
    request = otel.read(path)
    [resource_spans] = request.resource_spans
    spans = [s for scope in resource_spans.scope_spans for s in scope.spans]
    assert len(spans) == 1 + record["totals"]["model_calls"] + record["totals"]["tool_calls"]
    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
    assert service["service.name"] == "looplab"
    for span in spans:
        keys = {a.key for a in span.attributes}
        assert REQUIRED[span.name.split()[0]] <= keys, span.name
        assert len(span.trace_id) == 16 and len(span.span_id) == 8
    # OTLP/JSON spells ids in hex where the protobuf JSON mapping has base64: swapped back, json_format parses it
    text = path.read_text()
    raw = json.loads(text)
    for span in raw["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        assert re.fullmatch("[0-9a-f]{32}", span["traceId"]) and re.fullmatch("[0-9a-f]{16}", span["spanId"])
    hex_id = re.compile(r'"(traceId|spanId|parentSpanId)": "([0-9a-f]+)"')
    text = hex_id.sub(lambda m: f'"{m[1]}": "{base64.b64encode(bytes.fromhex(m[2])).decode()}"', text)
    assert json_format.Parse(text, ExportTraceServiceRequest()) == request


def test_eval_otel_writes_every_run_of_the_matrix(tmp_path: Path, monkeypatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    path, results = tmp_path / "otel.json", tmp_path / "results.json"
    argv = ["eval", "--runner", "handrolled", "--case", "vip-compound", "--repeat", "2", "--jobs", "1"]
    assert main([*argv, "--otel", str(path), "--json", str(results)]) == 0
    spans = [s for rs in otel.read(path).resource_spans for ss in rs.scope_spans for s in ss.spans]
    roots = [s for s in spans if not s.parent_span_id]
    assert [s.name for s in roots] == ["invoke_agent handrolled"] * 2 and len({s.trace_id for s in roots}) == 2
    cases = {a.value.string_value for s in roots for a in s.attributes if a.key == "looplab.case.id"}
    assert cases == {"vip-compound"}
    totals = [r["totals"] for r in json.loads(results.read_text())["results"]]
    assert len(spans) == sum(1 + t["model_calls"] + t["tool_calls"] for t in totals)


class _Collector(BaseHTTPRequestHandler):
    """A loopback OTLP/HTTP collector: keeps each POST to /v1/traces, answers with the server's `status`."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.received.append((self.path, self.headers.get("Content-Type"), body))
        self.send_response(self.server.status if self.path == "/v1/traces" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def collector(request) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    server.received, server.status = [], getattr(request, "param", 200)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_collector_named_by_the_standard_variable_gets_the_same_spans(
    tmp_path: Path, monkeypatch, capsys, collector: ThreadingHTTPServer
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{collector.server_port}")
    path = tmp_path / "otel.json"
    assert main(["run", "--runner", "handrolled", "--quiet", "--otel", str(path), "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "sent to http://127.0.0.1" in captured.out and "warning" not in captured.err
    [(where, content_type, body)] = collector.received
    assert (where, content_type) == ("/v1/traces", "application/x-protobuf")
    sent = ExportTraceServiceRequest.FromString(body)
    names = sorted(s.name for rs in sent.resource_spans for ss in rs.scope_spans for s in ss.spans)
    written = otel.read(path)
    assert names == sorted(s.name for rs in written.resource_spans for ss in rs.scope_spans for s in ss.spans)
    assert "invoke_agent handrolled" in names


@pytest.mark.parametrize("collector", [404], indirect=True)
def test_a_collector_that_refuses_is_a_one_line_warning_and_the_file_is_kept(
    tmp_path: Path, monkeypatch, capsys, collector: ThreadingHTTPServer, retried_run: RunResult
) -> None:
    endpoint = f"http://127.0.0.1:{collector.server_port}/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
    results = tmp_path / "results.json"
    results.write_text(json.dumps([retried_run.model_dump(mode="json")]), encoding="utf-8")
    path = tmp_path / "otel.json"
    assert main(["otel", str(results), str(path)]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"looplab: warning: could not send the traces to {endpoint}")
    assert "answered 404" in err and collector.received
    totals = retried_run.totals
    assert len(otel.read(path).resource_spans[0].scope_spans[0].spans) == 1 + totals.model_calls + totals.tool_calls


def test_a_collector_that_is_not_there_costs_a_bounded_wait_and_a_warning(
    tmp_path: Path, monkeypatch, retried_run: RunResult
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}/")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    done = otel.export([retried_run], tmp_path / "otel.json", timeout_s=0.5)
    assert done.endpoint == f"http://127.0.0.1:{port}/v1/traces"
    assert done.warning is not None and "\n" not in done.warning
    # the exporter gives up before its first retry (1 s), or (before 1.28) raises the refused connection
    assert "no collector took them within 0.5 s" in done.warning or "Connection" in done.warning
    assert otel.read(done.path).resource_spans


def test_without_the_extra_otel_is_one_line_naming_it_before_anything_runs(tmp_path: Path, monkeypatch, capsys) -> None:
    real = otel.importlib.util.find_spec

    def find_spec(name: str, *args: object):
        return None if name.startswith("opentelemetry.exporter") else real(name, *args)

    monkeypatch.setattr(otel.importlib.util, "find_spec", find_spec)
    argv = ["eval", "--runner", "handrolled", "--otel", str(tmp_path / "o.json"), "--json", str(tmp_path / "r.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.rstrip().endswith("pip install 'looplab[otel]'")
    assert not (tmp_path / "r.json").exists()


# --- generated traces ---------------------------------------------------------------------------------

_durations = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)


@st.composite
def run_results(draw: st.DrawFn) -> RunResult:
    """A run with any shape of trace: retries, tool errors, an unanswered call, tools before any call."""
    t = draw(st.floats(min_value=0.0, max_value=1.0))
    orphans = []
    for i in range(draw(st.integers(0, 2))):
        orphans.append(_tool(f"orphan_{i}", t, draw(_durations), draw(st.booleans()), draw(st.booleans())))
        t += orphans[-1].duration_s
    steps = []
    for index in range(1, draw(st.integers(0, 5)) + 1):
        attempts = []
        for number in range(1, draw(st.integers(0, 2)) + 1):
            attempts.append(_attempt(index, number, t, draw(_durations), draw(st.sampled_from([None, 429, 500]))))
            t += attempts[-1].latency_s + draw(_durations)
        latency = draw(_durations)
        call = _call(index, t, latency, draw(st.sampled_from([None, "stop", "tool_use"])), attempts)
        t += latency
        tools = []
        for i in range(draw(st.integers(0, 3))):
            start = t + draw(_durations)  # tools of one reply may overlap: each starts after the reply
            tools.append(_tool(f"tool_{i}", start, draw(_durations), draw(st.booleans()), draw(st.booleans())))
        t = max([t, *(c.started_at + c.duration_s for c in tools)])
        steps.append(Step(index=index, model_call=call, tool_calls=tools))
    unanswered = []
    for number in range(1, draw(st.integers(0, 2)) + 1):
        unanswered.append(_attempt(len(steps) + 1, number, t, draw(_durations), draw(st.sampled_from([None, 503]))))
        t += unanswered[-1].latency_s
    started = draw(st.none() | st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1)))
    stop = draw(st.sampled_from(list(StopReason)))
    trace = Trace(steps=steps, orphan_tool_calls=orphans, unanswered=unanswered)
    return RunResult(
        runner=draw(st.sampled_from(["handrolled", "langgraph", "external"])),
        runner_version="1.0",
        case=draw(st.none() | st.just("vip-compound")),
        model=draw(st.sampled_from(["anthropic:scripted", "openai:gpt-4.1", "local-model"])),
        stop_reason=stop,
        stop_detail=None if stop is StopReason.FINAL_ANSWER else "why",
        answer="done" if stop is StopReason.FINAL_ANSWER else None,
        native_cap=NativeCap(knob="recursion_limit", value=draw(st.sampled_from([None, 25, "25", {"a": 1}]))),
        limits=Limits(),
        started_at=started and started.replace(tzinfo=UTC),
        totals=Totals(
            model_calls=len(steps),
            tool_calls=len(trace.tool_calls),
            input_tokens=10 * len(steps),
            output_tokens=len(steps),
            cost_usd=None,
            wall_s=draw(st.floats(min_value=0.0, max_value=2 * t + 1)),
        ),
        trace=trace,
    )


def _tool(name: str, start: float, duration: float, is_error: bool, with_id: bool) -> ToolCallRecord:
    return ToolCallRecord(
        name=name,
        args={"path": "x.py"},
        call_id=f"call_{name}_{start:.3f}" if with_id else None,
        outcome="error" if is_error else "ok",
        is_error=is_error,
        result="r",
        result_preview="r",
        result_chars=1,
        started_at=start,
        duration_s=duration,
    )


def _attempt(step: int, number: int, start: float, latency: float, status: int | None) -> Attempt:
    error = "ReadTimeout: timed out" if status is None else f"HTTP {status}"
    return Attempt(
        step=step,
        attempt=number,
        endpoint="messages",
        status=status,
        error=error,
        request_bytes=1,
        response_bytes=0,
        started_at=start,
        latency_s=latency,
    )


def _call(index: int, start: float, latency: float, finish: str | None, attempts: list[Attempt]) -> ModelCall:
    return ModelCall(
        index=index,
        endpoint="chat.completions",
        url="http://127.0.0.1:8765/v1/chat/completions",
        status=200,
        streamed=False,
        request_bytes=1,
        response_bytes=1,
        input_tokens=10,
        output_tokens=1,
        finish_reason=finish,
        tool_calls_requested=[],
        started_at=start,
        latency_s=latency,
        cost_usd=None,
        failed_attempts=attempts,
    )


#: What a generated record may lack, so its span cannot have: a call id, a finish reason, an answer (a model call
#: that never got one has no usage), a model call at all (no wire API), a native cap's value (None: unset).
UNKNOWABLE = {
    "gen_ai.tool.call.id",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "looplab.native_cap.value",
    "looplab.wire_api",
}


@settings(deadline=None)
@given(st.lists(run_results(), min_size=1, max_size=3))
def test_generated_runs_make_one_tree_each_with_a_span_per_record_inside_its_parent(runs: list[RunResult]) -> None:
    anchor = datetime(2030, 6, 1, tzinfo=UTC)
    spans = recorded(runs, anchor=anchor)
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == len(runs) and len({r.context.trace_id for r in roots}) == len(runs)
    for run, root in zip(runs, sorted(roots, key=lambda s: spans.index(s)), strict=True):
        mine = [s for s in spans if s.context.trace_id == root.context.trace_id and s is not root]
        chats = [s for s in mine if operation(s) == "chat"]
        tools = [s for s in mine if operation(s) == "execute_tool"]
        assert root.name == f"invoke_agent {run.runner}" and len(mine) == len(chats) + len(tools)
        assert len(chats) == len(run.trace.steps) + (1 if run.trace.unanswered else 0)
        assert len(tools) == len(run.trace.tool_calls)
        assert sum(len(s.events) for s in chats) == len(run.trace.failed_attempts)
        assert all(s.parent.span_id == root.context.span_id for s in mine)
        assert all(root.start_time <= s.start_time <= s.end_time <= root.end_time for s in mine)
        assert all(s.start_time <= e.timestamp <= s.end_time for s in chats for e in s.events)
        errors = [s for s in tools if s.status.status_code is StatusCode.ERROR]
        assert len(errors) == sum(c.is_error for c in run.trace.tool_calls)
        assert (root.status.status_code is StatusCode.ERROR) == (run.stop_reason is StopReason.ERROR)
        answered = [s for s in chats if s.status.status_code is not StatusCode.ERROR]
        assert len(answered) == len(run.trace.steps) and len(chats) - len(answered) == bool(run.trace.unanswered)
        assert all({"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} <= set(s.attributes) for s in answered)
        assert {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} <= set(root.attributes)
        if run.started_at is not None:
            assert root.start_time == otel._ns_of(run.started_at)
        else:  # no start recorded: the run ends at the anchor
            assert root.end_time == otel._ns_of(anchor)
        for span in [root, *mine]:
            assert span.name.startswith(operation(span) + " ")
            assert REQUIRED[operation(span)] - UNKNOWABLE <= set(span.attributes)


@settings(deadline=None)
@given(st.lists(run_results(), min_size=1, max_size=3))
def test_the_otlp_json_file_holds_exactly_the_spans_recorded(runs: list[RunResult]) -> None:
    spans = otel.spans(runs)
    with tempfile.TemporaryDirectory() as folder:
        request = otel.read(otel.write(spans, Path(folder) / "otel.json"))
    written = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    key = sorted((s.context.span_id, s.name, s.start_time, s.end_time) for s in spans)
    assert key == sorted(
        (int.from_bytes(s.span_id, "big"), s.name, s.start_time_unix_nano, s.end_time_unix_nano) for s in written
    )
    parents = {int.from_bytes(s.span_id, "big"): int.from_bytes(s.parent_span_id, "big") for s in written}
    assert parents == {s.context.span_id: s.parent.span_id if s.parent else 0 for s in spans}


def test_a_run_recorded_without_a_start_ends_at_the_anchor(retried_run: RunResult) -> None:
    anchor = datetime(2030, 1, 1, tzinfo=UTC)
    old = retried_run.model_copy(update={"started_at": None})
    [root] = [s for s in recorded([old], anchor=anchor) if s.parent is None]
    assert root.end_time == otel._ns_of(anchor)
    assert root.end_time - root.start_time >= round(old.totals.wall_s * 1e9)
