"""`looplab bench`: what each framework costs per model turn, against the hand-rolled loop.

Every runner runs one case (default `vip-compound`) against the scripted
model `repeat` times in this process, after one warm-up run each, in
round-robin order so drift spreads evenly. For each timed run:

- the run's wall time is taken around `Adapter.run` (the workspace copy is
  made before and is not counted);
- each model turn's window runs from the previous turn's model request (the
  start of `Adapter.run` for the first turn) to its own next request (the end
  of `Adapter.run` for the last), so setup and teardown count too;
- from each window, the model call's latency as the model boundary recorded it
  (request sent until the last response byte read: the scripted server plus
  loopback) and the durations of the turn's tool calls as the Guard recorded
  them are subtracted. What is left is framework + SDK + adapter + looplab
  time, the *overhead per turn*; its median and p95 are over all turns of all
  timed runs.

Import time and peak memory come from fresh interpreters (`python -m
looplab.measure.bench --probe RUNNER`): import time is `registry.load(runner)` after
looplab's own modules are loaded; peak memory is the process's peak RSS after
one run of the case. The *harness tax* compares, for every runner whose
adapter module has a `bare_run` (`adapters/contract/bare.py`), the same framework loop
written bare (plain SDK client, plain tool functions timed as they run, the
framework's own cap at the case's `max_steps`, no recorder, Guard or
RunSession; the runner's first wire API, the same scripted model) with the
runner through looplab: each bare run goes right beside its looplab twin, and
the tax is the median of the pairs' ratios of the time outside the tool
functions, timed the same way in both (the tools, pytest included, vary by
more than the harness costs; the Guard's checks and its hand-off to a worker
thread around each call are looplab's time; the whole-run ratio is shown
beside it). Beside the ratio, the pairs give what looplab adds a model turn: the median of each pair's
difference of those times over its turns, in ms.

The verdict is against two targets (`looplab.records.measurements`): looplab adds at most `TURN_TARGET_MS` a
turn for a runner whose model requests go to the model server in process, `PROXY_TURN_TARGET_MS` for one whose
requests pass looplab's model proxy (`VIA_MODEL_PROXY`); and the ratio is under `TAX_TARGET` for every runner
whose bare loop is a framework's (the framework-less loop's, `RATIO_NOT_TARGETED`, is reported only: its
denominator is the scripted model alone). Each target has a bootstrap interval over the pairs and is decided
only when the interval clears it, from at least `MIN_VERDICT_PAIRS` pairs. A runner in node has for its bare loop
the same program pointed at the model server directly, with plain tools over MCP (`adapters/runners/_bare_child.py`);
`external`, a team's command, has none, and the table says so.
"""

from __future__ import annotations

import argparse
import functools
import gc
import http.client
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import BaseModel
from rich.console import Console

from looplab.measure.bench_merge import bench_line, bench_merge
from looplab.records.measurements import (
    PROXY_TURN_TARGET_MS,
    TAX_TARGET,
    TURN_TARGET_MS,
    BenchResult,
    HarnessTax,
    RunnerBench,
    ServerLatency,
)

if TYPE_CHECKING:
    from looplab.adapters.contract.bare import BareRun, BareTool
    from looplab.adapters.contract.model import Api
    from looplab.adapters.contract.trace import Trace
    from looplab.shared_tools import Tool

__all__ = [
    "BASELINE",
    "NO_BARE_LOOP",
    "RATIO_NOT_TARGETED",
    "TAX_NOTES",
    "VIA_MODEL_PROXY",
    "BareSample",
    "Sample",
    "bare_loop",
    "footer",
    "help_command",
    "help_time",
    "markdown",
    "median_interval",
    "peak_rss_mb",
    "print_tables",
    "probe",
    "run_bench",
    "runner_rows",
    "server_latency",
    "tax_rows",
    "timed_bare",
    "timed_run",
    "turn_overheads",
    "via_model_proxy",
]

BASELINE = "handrolled"
SERVER_REQUESTS = 200
#: The long request: its size, and how many are timed (after one warm-up).
LONG_REQUEST_CHARS = 200_000
LONG_REQUESTS = 5
HELP_REPEAT = 5
#: What the harness-tax table says for a runner whose adapter has no bare loop (`external`: a team's command).
NO_BARE_LOOP = "no bare loop"
#: Resamples for the bootstrap interval of the tax.
BOOTSTRAP_RESAMPLES = 2000
#: The wire APIs on which an in-process runner has its model requests pass looplab's recording model proxy: its
#: framework builds its own HTTP client from a base URL (LiteLLM, LlamaIndex's Anthropic LLM), so it is pointed at
#: the proxy. A runner whose loop runs in another process (a node program, the Claude Code CLI) always reaches the
#: model through the proxy; every other request goes through a recorded SDK client or transport
#: (`tests/test_bench.py` checks both against the runs).
VIA_MODEL_PROXY: dict[str, frozenset[Api]] = {
    "openai_agents": frozenset({"messages", "gemini"}),
    "smolagents": frozenset({"messages", "gemini"}),
    "llamaindex": frozenset({"messages"}),
}
#: Runners whose bare loop is no framework's: their ratio is reported, not targeted.
RATIO_NOT_TARGETED = frozenset({BASELINE})
#: What a runner's looplab run does that its bare loop does not, and what it costs: said under the tables.
TAX_NOTES: dict[str, str] = {
    "llamaindex": "llamaindex: its looplab run asks every streamed Chat Completions reply for usage "
    "(`stream_options.include_usage`; without it the reply carries no token counts, so the record and a cost "
    "budget would have only estimates), which its bare loop does not; LlamaIndex handles that extra chunk as it "
    "does every other, about 0.35 ms a reply of its added time",
}


def via_model_proxy(runner: str, api: Api) -> bool:
    """Whether `runner`'s model requests on `api` pass looplab's recording model proxy: always for a loop in another
    process, else where `VIA_MODEL_PROXY` says."""
    from looplab.adapters import registry

    return registry.RUNNERS[runner].out_of_process or api in VIA_MODEL_PROXY.get(runner, frozenset())


def median(values: list[float]) -> float:
    """The median, as `looplab eval` computes it (0.0 for no values, so a table never breaks)."""
    from looplab.records.summary import median

    return median(values) or 0.0


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile, as `looplab eval` computes it."""
    from looplab.records.summary import percentile

    return percentile(values, 95) or 0.0


def median_interval(
    values: list[float], confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float] | None:
    """A percentile-bootstrap interval of the median of `values` (None under two values).

    Seeded, so the same measurements give the same interval; the pairs are what is resampled, so the
    interval says how far another run of the same bench could put the median.
    """
    if len(values) < 2:
        return None
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    tail = (1 - confidence) / 2
    return medians[int(tail * resamples)], medians[min(resamples - 1, int((1 - tail) * resamples))]


def _ratio(value: float, base: float) -> float | None:
    return round(value / base, 2) if base > 0 else None


# --- one timed run through looplab ---------------------------------------------------


class Sample(BaseModel):
    """One timed run: wall time, time in tools and in the model, and the per-turn overheads."""

    wall_s: float
    #: Time inside the tool functions themselves: the Guard's checks and its hand-off to a worker thread around
    #: them are looplab's time, as a bare loop's tools have neither.
    tools_s: float
    model_s: float
    turns: int
    turn_overheads_s: list[float]
    stop_reason: str


def timed_run(runner: str, case: Any, where: Any) -> Sample:
    """Run `case` once through `runner`, timing it as the module docstring says."""
    from looplab.adapters import registry
    from looplab.shared_tools import Guard, Workspace

    adapter = registry.load(runner)
    tools = [_timed(t) for t in case.tool_set()]
    spent_before = _WATCH.spent
    spec = where.spec_for(adapter, case.model)
    with Workspace(case.repo_path, overlay=case.overlay_path) as ws:
        origin = [0.0]
        # The run's own clock starts when Adapter.run is called, so turn windows start at 0.
        guard = Guard(
            ws, tools=tools, max_repeats=case.limits.max_repeats, clock=lambda: time.perf_counter() - origin[0]
        )
        gc.collect()  # the previous run's garbage is not this run's overhead
        origin[0] = time.perf_counter()
        result = adapter.run(case.stated_task, guard, case.limits, spec, system_prompt=case.system_prompt)
        end = guard.clock()
    steps = result.trace.steps
    return Sample(
        wall_s=end,
        tools_s=_WATCH.spent - spent_before,
        model_s=sum(s.model_call.latency_s for s in steps),
        turns=len(steps),
        turn_overheads_s=turn_overheads(result.trace, end),
        stop_reason=str(result.stop_reason),
    )


def turn_overheads(trace: Trace, end: float) -> list[float]:
    """Seconds of each model turn spent outside the model call and the turn's tool calls.

    Turn i's window runs from turn i's model request to turn i+1's (from 0,
    the start of the run, for the first; to `end` for the last), so setup and
    teardown are counted; tool calls made before any model call count against
    the first turn.
    """
    steps = trace.steps
    bounds = [0.0] + [s.model_call.started_at for s in steps[1:]] + [end]
    orphans = sum(c.duration_s for c in trace.orphan_tool_calls)
    overheads = []
    for i, step in enumerate(steps):
        inside = step.model_call.latency_s + sum(c.duration_s for c in step.tool_calls) + (orphans if i == 0 else 0.0)
        overheads.append(bounds[i + 1] - bounds[i] - inside)
    return overheads


# --- the same loops written bare -----------------------------------------------------


class BareSample(BaseModel):
    """One run of a bare loop: wall time, time in the tool functions, model turns."""

    wall_s: float
    tools_s: float
    turns: int


def bare_loop(runner: str) -> BareRun | None:
    """`runner`'s bare loop, as it declares it; None for a runner without one (one in node).

    A framework that is not installed fails here, as its looplab run would.
    """
    from looplab.adapters import registry

    return registry.load(runner).bare_loop()


class _Stopwatch:
    """Seconds spent inside the functions it wraps, summed over every thread that calls them (a framework may run
    one turn's tool calls on threads)."""

    def __init__(self) -> None:
        self.spent, self._lock = 0.0, threading.Lock()

    def timed(self, fn: Callable[..., str]) -> Callable[..., str]:
        """`fn`, timed; its signature kept (the Guard reads a tool's own timeout from it)."""

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> str:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with self._lock:
                    self.spent += time.perf_counter() - started

        return call


#: Times the tool functions of every looplab run the bench makes (a run reads what it added).
_WATCH = _Stopwatch()


@functools.lru_cache(maxsize=64)
def _timed(tool: Tool) -> Tool:
    """`tool` with its function timed by `_WATCH`, one copy per tool: a run's shared tools are built once per process,
    so a copy made for every timed run would count work against looplab that a real run does not do."""
    return replace(tool, fn=_WATCH.timed(tool.fn))


def _bare_tools(ws: Any, tools: list[Tool], watch: _Stopwatch) -> list[BareTool]:
    """The tool functions called directly on a workspace, as `BareTool`s, timed; a failure is an error string."""
    from looplab.adapters.contract.bare import BareTool

    def plain(fn: Callable[..., str]) -> Callable[..., str]:
        def call(**kwargs: Any) -> str:
            try:
                return fn(ws, **kwargs)
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"

        return call

    return [BareTool(t.name, t.description, t.parameters, watch.timed(plain(t.fn))) for t in tools]


def timed_bare(runner: str, loop: BareRun, case: Any, where: Any) -> BareSample:
    """One run of `runner`'s bare loop on `case`, in a fresh workspace (its copy not counted), on its twin's model."""
    from looplab.adapters import registry
    from looplab.shared_tools import Workspace, default_tools

    model = where.spec_for(registry.load(runner), case.model).name
    with Workspace(case.repo_path, overlay=case.overlay_path) as ws:
        watch = _Stopwatch()
        tools = _bare_tools(ws, default_tools(allow_writes=case.allow_writes), watch)
        gc.collect()
        started = time.perf_counter()
        turns = loop(
            case.stated_task, tools, where.scripted_urls, model, case.limits.max_steps, system_prompt=case.system_prompt
        )
        return BareSample(wall_s=time.perf_counter() - started, tools_s=watch.spent, turns=turns)


# --- fresh interpreters: import time and peak memory ---------------------------------


def probe(runner: str, case_id: str | None, urls: dict[str, str] | None) -> dict[str, float]:
    """In a fresh interpreter: the time `registry.load(runner)` takes, and peak RSS after one run of the case."""
    import looplab.run.harness  # noqa: F401 - looplab's own modules are the baseline, not the framework's cost
    from looplab.adapters import registry
    from looplab.scenarios.cases import load_cases

    cases = load_cases()
    started = time.perf_counter()
    registry.load(runner)
    import_s = time.perf_counter() - started
    if case_id and urls:
        from looplab.run.harness import Endpoint, ModelChoice, run_one

        run_one(runner, cases[case_id], Endpoint(ModelChoice(), urls))
    return {"import_s": import_s, "peak_rss_mb": peak_rss_mb()}


def peak_rss_mb() -> float:
    """This process's peak resident memory in MiB.

    VmHWM from /proc where there is one: `ru_maxrss` survives `execve`, so a
    child started from a big parent would report the parent's size.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    import resource

    # ru_maxrss is in KiB on Linux, bytes on macOS.
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def _probe_subprocess(runner: str, case_id: str | None, urls: dict[str, str] | None) -> dict[str, float]:
    cmd = [sys.executable, "-m", "looplab.measure.bench", "--probe", runner]
    if case_id and urls:
        cmd += ["--case", case_id, "--urls", json.dumps(urls)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"probe of {runner} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def help_time(repeat: int = HELP_REPEAT) -> float:
    """Median wall time of `looplab --help` in a fresh process (the console script if installed)."""
    cmd = help_command(Path(sys.executable))
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True, timeout=60)
        times.append(time.perf_counter() - started)
    return median(times)


def help_command(python: Path) -> list[str]:
    """`looplab --help` for the interpreter at `python`: its console script, else `python -m looplab` (an
    environment that has looplab on its path only, as a runner environment does)."""
    script = python.with_name("looplab")
    return [str(script), "--help"] if script.exists() else [str(python), "-m", "looplab", "--help"]


# --- the scripted server alone --------------------------------------------------------


class _Client:
    """One keep-alive `http.client` connection: the number is the server's (plus loopback), not an SDK's."""

    def __init__(self, base_url: str, token: str | None = None) -> None:
        self.url = urlsplit(base_url)
        self.conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=60)
        self.headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})

    def round_trip(self, path: str, payload: bytes) -> float:
        started = time.perf_counter()
        self.conn.request("POST", f"{self.url.path}{path}", body=payload, headers=self.headers)
        response = self.conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{self.url.netloc} answered {response.status}")
        return time.perf_counter() - started

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


@contextmanager
def _proxied(openai_base_url: str) -> Iterator[tuple[str, str]]:
    """A run's recording model proxy in front of the scripted server: its base URL and token."""
    from looplab.adapters.boundary.proxy import ModelProxy
    from looplab.adapters.contract.limits import Limits
    from looplab.adapters.contract.model import ModelSpec
    from looplab.adapters.contract.runner import Probe
    from looplab.adapters.session import RunSession
    from looplab.scenarios.cases import load_cases
    from looplab.shared_tools import Guard, Workspace

    spec = ModelSpec("openai", "scripted", base_url=openai_base_url, api_key="scripted")
    limits = Limits(max_steps=10**6, max_seconds=3600)
    with Workspace(load_cases()["vip-compound"].repo_path) as ws:
        with ModelProxy(RunSession(Guard(ws), limits, spec, Probe(knob="bench", value=None))) as proxy:
            yield proxy.openai_base_url, proxy.token


def server_latency(openai_base_url: str, requests: int = SERVER_REQUESTS) -> ServerLatency:
    """Round trips of a first-turn Chat Completions request (system, task, three tools) on one keep-alive connection.

    Then the long request: a first-turn Responses request whose `input` is one string of `LONG_REQUEST_CHARS`
    characters, a run of word characters and then the task (the shape that took the policy minutes when a
    pattern retried the run from each of its positions); the median of `LONG_REQUESTS` after one warm-up.
    Plain `http.client`, so the number is the server's (plus loopback), not an SDK's.
    """
    from looplab.adapters.contract.wire_apis import WIRE_API
    from looplab.scenarios.cases import default_system_prompt, load_cases
    from looplab.shared_tools import default_tools

    (chat_path,), (responses_path,) = WIRE_API["chat"].suffixes, WIRE_API["responses"].suffixes
    body = json.dumps(
        {
            "model": "scripted",
            "messages": [
                {"role": "system", "content": default_system_prompt()},
                {"role": "user", "content": load_cases()["vip-compound"].task},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in default_tools()
            ],
        }
    ).encode()
    task = load_cases()["vip-compound"].task
    long_body = json.dumps({"model": "scripted", "input": "x" * (LONG_REQUEST_CHARS - len(task) - 1) + " " + task})
    # The first ten (and the first long one) warm the connection and the server up.
    with _Client(openai_base_url) as client:
        times = [client.round_trip(chat_path, body) for _ in range(requests + 10)][10:]
        long_times = [client.round_trip(responses_path, long_body.encode()) for _ in range(LONG_REQUESTS + 1)][1:]
    with _proxied(openai_base_url) as (proxy_url, token), _Client(proxy_url, token) as client:
        proxied = [client.round_trip(chat_path, body) for _ in range(requests + 10)][10:]
    return ServerLatency(
        proxy_median_ms=round(median(proxied) * 1000, 3),
        requests=requests,
        median_ms=round(median(times) * 1000, 3),
        p95_ms=round(p95(times) * 1000, 3),
        long_request_chars=LONG_REQUEST_CHARS,
        long_requests=LONG_REQUESTS,
        long_request_ms_median=round(median(long_times) * 1000, 3),
    )


# --- the benchmark --------------------------------------------------------------------


def run_bench(
    runners: list[str],
    case: Any,
    *,
    repeat: int = 20,
    import_repeat: int = 3,
    progress: bool = True,
) -> BenchResult:
    """Measure `runners` (the hand-rolled one is always added, as the baseline) on `case`; see the module docstring."""
    from looplab.adapters import registry
    from looplab.adapters.contract.errors import LooplabError
    from looplab.run import harness
    from looplab.views import render

    if case.model.persona != "careful" or case.faults:
        # A bare loop sends no persona header and its tools carry no faults: the pair would not run the same case.
        raise LooplabError(
            f"bench needs a case its bare loops can run as looplab does (the careful model, no faults); "
            f"{case.id!r} has persona {case.model.persona!r} and {len(case.faults)} fault(s)"
        )
    runners = [BASELINE, *(r for r in runners if r != BASELINE)]
    bare = {r: loop for r in runners if (loop := bare_loop(r)) is not None}
    jobs = [(kind, r) for r in runners for kind in ("looplab", "bare") if kind == "looplab" or r in bare]
    samples: dict[tuple[str, str], list[Any]] = {job: [] for job in jobs}
    probes: dict[str, list[dict[str, float]]] = {r: [] for r in runners}
    total = len(jobs) * (repeat + 1) + len(runners) * import_repeat
    with harness.endpoint(harness.ModelChoice()) as where, _progress(total, progress, render.console()) as step:
        server = server_latency(where.scripted_urls["openai"])
        # The wire API each pair speaks: the runner's first, which its bare loop speaks too.
        apis = {r: registry.load(r).api_for(where.spec_for(registry.load(r), case.model)) for r in bare}
        for rep in range(repeat + 1):  # rep 0 is the warm-up
            # A bare loop runs right beside its looplab twin, first on every other round, so the pair sees the
            # same machine (another process starting up slows both) and neither always goes first.
            order = jobs if rep % 2 else _swap_pairs(jobs)
            for kind, runner in order:
                step(f"{kind} {runner}" + (" (warm-up)" if rep == 0 else f" {rep}/{repeat}"))
                if kind == "looplab":
                    sample: Sample | BareSample = timed_run(runner, case, where)
                else:
                    sample = timed_bare(runner, bare[runner], case, where)
                if rep > 0:
                    samples[(kind, runner)].append(sample)
        for i in range(import_repeat):
            for runner in runners:
                step(f"fresh interpreter: {runner}")
                # Only the first probe runs the case: peak memory after a run; the rest time the import alone.
                first = i == 0
                probes[runner].append(
                    _probe_subprocess(runner, case.id if first else None, where.scripted_urls if first else None)
                )
    rows = []
    recorded_model: list[float] = []
    for runner in runners:
        runs: list[Sample] = samples[("looplab", runner)]
        overheads = [o for s in runs for o in s.turn_overheads_s]
        model_per_turn = [s.model_s / s.turns for s in runs if s.turns]
        recorded_model += model_per_turn
        stops: dict[str, int] = {}
        for s in runs:
            stops[s.stop_reason] = stops.get(s.stop_reason, 0) + 1
        rows.append(
            RunnerBench(
                runner=runner,
                version=registry.load(runner).version(),
                runs=len(runs),
                stop_reasons=stops,
                turns_median=median([s.turns for s in runs]),
                overhead_ms_median=round(median(overheads) * 1000, 3),
                overhead_ms_p95=round(p95(overheads) * 1000, 3),
                first_turn_ms_median=round(median([s.turn_overheads_s[0] for s in runs if s.turns]) * 1000, 3),
                model_ms_median=round(median(model_per_turn) * 1000, 3),
                wall_ms_median=round(median([s.wall_s for s in runs]) * 1000, 2),
                import_s=round(median([p["import_s"] for p in probes[runner]]), 3),
                peak_rss_mb=round(probes[runner][0]["peak_rss_mb"], 1),
            )
        )
    base = rows[0]
    for row in rows:
        row.ratio_overhead_median = _ratio(row.overhead_ms_median, base.overhead_ms_median)
        row.ratio_overhead_p95 = _ratio(row.overhead_ms_p95, base.overhead_ms_p95)
        row.ratio_import = _ratio(row.import_s, base.import_s)
        row.ratio_peak_rss = _ratio(row.peak_rss_mb, base.peak_rss_mb)
    taxes = [_tax(runner, apis[runner], samples[("bare", runner)], samples[("looplab", runner)]) for runner in bare]
    return BenchResult(
        date=date.today().isoformat(),
        case=case.id,
        repeat=repeat,
        import_repeat=import_repeat,
        python=platform.python_version(),
        platform=platform.platform(terse=True),
        cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
        runners=rows,
        harness_tax=taxes,
        no_bare_loop=[r for r in runners if r not in bare],
        server=server,
        recorded_model_ms_median=round(median(recorded_model) * 1000, 3),
        help_s_median=round(help_time(), 3),
        merge=bench_merge(),
    )


def _swap_pairs(jobs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`jobs` with each (looplab, bare) pair of one runner in the other order."""
    out = list(jobs)
    for i in range(len(out) - 1):
        if out[i][0] == "looplab" and out[i + 1] == ("bare", out[i][1]):
            out[i], out[i + 1] = out[i + 1], out[i]
    return out


def _tax(runner: str, api: Api, bare: list[BareSample], looplab: list[Sample]) -> HarnessTax:
    """Medians per run for the table; the tax and the added time a turn are medians over the pairs (same round)."""
    pairs = list(zip(bare, looplab, strict=True))
    taxes = [_inside(lab) / _inside(b) - 1 for b, lab in pairs]
    added_ms = [(_inside(lab) - _inside(b)) / max(lab.turns, 1) * 1000 for b, lab in pairs]
    return HarnessTax(
        runner=runner,
        turns_bare=median([s.turns for s in bare]),
        turns_looplab=median([s.turns for s in looplab]),
        bare_wall_ms=round(median([s.wall_s for s in bare]) * 1000, 2),
        looplab_wall_ms=round(median([s.wall_s for s in looplab]) * 1000, 2),
        tax_wall=round(median([lab.wall_s / b.wall_s - 1 for b, lab in pairs]), 4),
        bare_outside_tools_ms=round(median([s.wall_s - s.tools_s for s in bare]) * 1000, 2),
        looplab_outside_tools_ms=round(median([s.wall_s - s.tools_s for s in looplab]) * 1000, 2),
        tax_outside_tools=round(median(taxes), 4),
        tax_interval=_rounded(median_interval(taxes), 4),
        added_ms_per_turn=round(median(added_ms), 3),
        added_ms_interval=_rounded(median_interval(added_ms), 3),
        pairs=len(pairs),
        api=api,
        via_proxy=via_model_proxy(runner, api),
        ratio_targeted=runner not in RATIO_NOT_TARGETED,
    )


def _rounded(interval: tuple[float, float] | None, digits: int) -> tuple[float, float] | None:
    return None if interval is None else (round(interval[0], digits), round(interval[1], digits))


def _inside(sample: Sample | BareSample) -> float:
    """A run's time outside its tool calls."""
    return sample.wall_s - sample.tools_s


class _progress:
    """A rich progress bar over the benchmark's steps (or nothing), as a context manager yielding `step(label)`."""

    def __init__(self, total: int, enabled: bool, console: Any) -> None:
        self.total, self.enabled, self.console = total, enabled, console

    def __enter__(self) -> Callable[[str], None]:
        if not self.enabled:
            return lambda label: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        self.bar = Progress(*columns, console=self.console, transient=True)
        self.bar.__enter__()
        task = self.bar.add_task("bench", total=self.total)
        return lambda label: self.bar.update(task, advance=1, description=label)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.__exit__(*exc)


# --- output ---------------------------------------------------------------------------


def _x(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio:.2f}×"


def runner_rows(result: BenchResult) -> tuple[list[str], list[list[str]]]:
    """The per-runner table as header and rows of text (shared by the terminal and Markdown)."""
    header = [
        "runner",
        "version",
        "turns",
        "overhead/turn median ms",
        "p95 ms",
        "turn 1 median ms",
        "import s",
        "peak RSS MB",
        "median ×hand",
        "p95 ×hand",
        "import ×hand",
        "RSS ×hand",
    ]
    rows = [
        [
            r.runner,
            r.version,
            f"{r.turns_median:g}",
            f"{r.overhead_ms_median:.2f}",
            f"{r.overhead_ms_p95:.2f}",
            f"{r.first_turn_ms_median:.2f}",
            f"{r.import_s:.3f}",
            f"{r.peak_rss_mb:.0f}",
            _x(r.ratio_overhead_median),
            _x(r.ratio_overhead_p95),
            _x(r.ratio_import),
            _x(r.ratio_peak_rss),
        ]
        for r in result.runners
    ]
    return header, rows


def tax_rows(result: BenchResult) -> tuple[list[str], list[list[str]]]:
    """The harness-tax table as header and rows of text."""
    header = [
        "runner",
        "api",
        "turns bare/looplab",
        "excl. tools ms, bare",
        "excl. tools ms, looplab",
        "added ms/turn",
        "95% interval, ms",
        "target ms/turn",
        "harness tax (excl. tools)",
        "95% interval",
        "tax target",
        "verdict",
        "whole run ms, bare",
        "whole run ms, looplab",
        "whole run ratio",
    ]
    rows = [
        [
            t.runner,
            t.api or "—",
            f"{t.turns_bare:g}/{t.turns_looplab:g}",
            f"{t.bare_outside_tools_ms:.1f}",
            f"{t.looplab_outside_tools_ms:.1f}",
            f"{t.added_ms_per_turn:+.2f}",
            added_interval_text(t),
            turn_target_text(t),
            f"{t.tax_outside_tools:+.1%}",
            tax_interval_text(t),
            tax_target_text(t),
            t.verdict,
            f"{t.bare_wall_ms:.1f}",
            f"{t.looplab_wall_ms:.1f}",
            f"{t.tax_wall:+.1%}",
        ]
        for t in result.harness_tax
    ]
    rows += [[runner, NO_BARE_LOOP, *("—" for _ in header[2:])] for runner in result.no_bare_loop]
    return header, rows


def tax_interval_text(tax: HarnessTax) -> str:
    """`-1.2 % .. +3.4 %`, or a dash without an interval."""
    if tax.tax_interval is None:
        return "—"
    low, high = tax.tax_interval
    return f"{low:+.1%} .. {high:+.1%}"


def added_interval_text(tax: HarnessTax) -> str:
    """`+0.12 .. +0.19` (ms a turn), or a dash without an interval."""
    if tax.added_ms_interval is None:
        return "—"
    low, high = tax.added_ms_interval
    return f"{low:+.2f} .. {high:+.2f}"


def turn_target_text(tax: HarnessTax) -> str:
    """`0.25`, or `0.5 (proxy)` for a runner whose requests pass the model proxy."""
    return f"{tax.turn_target_ms:g}" + (" (proxy)" if tax.via_proxy else "")


def tax_target_text(tax: HarnessTax) -> str:
    """`5%`, or `not targeted` for the framework-less loop."""
    return f"{TAX_TARGET:.0%}" if tax.ratio_targeted else "not targeted"


def footer(result: BenchResult) -> list[str]:
    """The lines under the tables: what a runner's tax includes, the stand-in model's latency, --help time, what the
    numbers were measured on."""
    s = result.server
    return [
        *(TAX_NOTES[t.runner] for t in result.harness_tax if t.runner in TAX_NOTES),
        f"scripted model server: median {s.median_ms:.2f} ms, p95 {s.p95_ms:.2f} ms per request "
        f"({s.requests} first-turn Chat Completions requests, http.client, loopback); "
        f"median model latency per turn as recorded during the runs: {result.recorded_model_ms_median:.2f} ms",
        (
            f"through a run's recording model proxy: median {s.proxy_median_ms:.2f} ms, "
            f"{s.proxy_median_ms - s.median_ms:+.2f} ms per request over the server alone"
            if s.proxy_median_ms is not None
            else "through a run's recording model proxy: not measured"
        ),
        f"scripted model server, a {s.long_request_chars:,}-character request: "
        f"median {s.long_request_ms_median:.1f} ms ({s.long_requests} first-turn Responses requests whose input "
        "is one string: a run of word characters, then the task)",
        f"looplab --help: {result.help_s_median:.3f} s (median of {HELP_REPEAT} fresh processes)",
        *([bench_line(result.merge)] if result.merge else []),
        f"case {result.case}, {result.repeat} timed runs per runner after one warm-up, "
        f"import time median of {result.import_repeat} fresh interpreters; "
        f"{result.date}, Python {result.python}, {result.platform}, {result.cores} cores",
    ]


def print_tables(result: BenchResult, *, out: Console | None = None) -> None:
    """`looplab bench`: overhead per model turn, the harness tax, and what they were measured on."""
    from rich.text import Text

    from looplab.views.render import Col, Value, console, print_table, wrap_text

    out = out or console()
    rows: list[list[Value]] = [
        [
            r.runner,
            r.version,
            f"{r.turns_median:g}",
            f"{r.overhead_ms_median:.2f} {_x(r.ratio_overhead_median)}",
            f"{r.overhead_ms_p95:.1f} {_x(r.ratio_overhead_p95)}",
            f"{r.import_s:.2f} {_x(r.ratio_import)}",
            f"{r.peak_rss_mb:.0f} {_x(r.ratio_peak_rss)}",
        ]
        for r in result.runners
    ]
    cols = (
        Col("runner"),
        Col("version", fold="under"),
        Col("turns", right=True),
        Col("median ms", right=True),
        Col("p95 ms", right=True),
        Col("import s", right=True),
        Col("peak MB", right=True),
    )
    print_table(
        "bench: overhead per model turn, outside the model server and the tools",
        cols,
        rows,
        ["(×) ratio to handrolled, measured in the same run; the p95 is the first turn's setup (clients, agent)"],
        out=out,
    )
    tax: list[list[Value]] = [
        [
            t.runner,
            f"{t.turns_bare:g}/{t.turns_looplab:g}",
            f"{t.bare_outside_tools_ms:.1f} → {t.looplab_outside_tools_ms:.1f}",
            f"{t.added_ms_per_turn:+.2f}",
            added_interval_text(t),
            turn_target_text(t),
            f"{t.tax_outside_tools:+.1%}",
            tax_interval_text(t),
            tax_target_text(t),
            t.verdict,
            f"{t.bare_wall_ms:.0f} → {t.looplab_wall_ms:.0f}",
            f"{t.tax_wall:+.1%}",
        ]
        for t in result.harness_tax
    ]
    tax_cols = (
        Col("runner"),
        Col("turns", right=True),
        Col("excl. tools ms", short="excl. ms", means="excl. tools ms", right=True),
        Col("+ms/turn", right=True),
        Col("95% interval, ms", short="95% ms", means="95% interval of +ms/turn", right=True),
        Col("target ms/turn", short="≤ms", means="target ms/turn", fold="under"),
        Col("tax", right=True),
        Col("95% interval", short="95%", means="95% interval of the tax (bootstrap over the pairs)", right=True),
        Col("tax target", short="tax ≤", means="tax target", fold="under"),
        Col("verdict", prose=True),
        Col("whole run ms", short="run ms", means="whole run ms", right=True),
        Col("ratio", right=True),
    )
    print_table(
        "bench: harness tax, the same loop written bare → through looplab (medians per run)",
        tax_cols,
        tax,
        [
            "excl. tools: each run minus its tool calls (the model server's time stays in both); +ms/turn: what "
            f"looplab adds a model turn, at most {TURN_TARGET_MS:g} ms in process, {PROXY_TURN_TARGET_MS:g} ms through "
            f"the model proxy; the tax is targeted under {TAX_TARGET:.0%} where the bare loop is a framework's; the "
            "whole run includes pytest in run_tests, whose 200-400 ms varies more than the harness costs; a node "
            "runner's bare loop is its program pointed at the model directly, with plain tools",
            *([f"{NO_BARE_LOOP}: {', '.join(result.no_bare_loop)}"] if result.no_bare_loop else []),
        ],
        out=out,
    )
    for line in footer(result):
        for wrapped in wrap_text(Text(line, style="dim"), out.width, out):
            out.print(wrapped)


def markdown(result: BenchResult) -> str:
    """The tables and footer as Markdown, for the README."""

    def table(header: list[str], rows: list[list[str]]) -> str:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)

    return "\n\n".join(
        [table(*runner_rows(result)), table(*tax_rows(result)), "\n".join(f"- {line}" for line in footer(result))]
    )


def _probe_main(argv: list[str] | None = None) -> int:
    """`python -m looplab.measure.bench --probe RUNNER [--case C --urls JSON]`: one fresh-interpreter measurement."""
    parser = argparse.ArgumentParser(prog="python -m looplab.measure.bench")
    parser.add_argument("--probe", required=True, metavar="RUNNER")
    parser.add_argument("--case")
    parser.add_argument("--urls")
    args = parser.parse_args(argv)
    print(json.dumps(probe(args.probe, args.case, json.loads(args.urls) if args.urls else None)))
    return 0


if __name__ == "__main__":
    raise SystemExit(_probe_main())
