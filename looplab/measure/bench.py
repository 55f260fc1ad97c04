"""`looplab bench`: what each framework costs per model turn, against the hand-rolled loop.

Every runner runs one case (default `vip-compound`) against the scripted
model `repeat` times in this process, after one warm-up run each, in
round-robin order so drift spreads evenly. For each timed run:

- the run's wall time is taken around `Runner.run` (the workspace copy is
  made before and is not counted);
- each model turn's window runs from the previous turn's model request (the
  start of `Runner.run` for the first turn) to its own next request (the end
  of `Runner.run` for the last), so setup and teardown count too;
- from each window, the model call's latency as the model boundary recorded it
  (request sent until the last response byte read: the scripted server plus
  loopback) and the durations of the turn's tool calls as the Guard recorded
  them are subtracted. What is left is framework + SDK + adapter + looplab
  time, the *overhead per turn*; its median and p95 are over all turns of all
  timed runs.

Import time and peak memory come from fresh interpreters (`python -m
looplab.measure bench-probe --probe RUNNER`): import time is `registry.load(runner)` after
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

The parts: `bench_timing` times one run (through looplab, and bare), `bench_probe` the fresh interpreters,
`bench_server` the scripted model alone, `bench_tax` the pairs' harness tax, `bench_report` the tables
(`print_tables` for the terminal, `markdown` for the docs).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from datetime import date
from typing import TYPE_CHECKING, Any

from looplab.measure.bench_merge import bench_merge
from looplab.measure.bench_probe import help_time, probe_subprocess
from looplab.measure.bench_server import server_latency
from looplab.measure.bench_stats import median, p95, ratio
from looplab.measure.bench_tax import BASELINE, harness_tax
from looplab.measure.bench_timing import BareSample, Sample, bare_loop, timed_bare, timed_run
from looplab.records.measurements import BenchResult, HarnessTax, RunnerBench, ServerLatency

if TYPE_CHECKING:
    from looplab.adapters.contract.bare import BareRun
    from looplab.adapters.contract.model import Api

__all__ = ["run_bench"]

#: One timed job: ("looplab" or "bare", runner).
Job = tuple[str, str]


def run_bench(
    runners: list[str],
    case: Any,
    *,
    repeat: int = 20,
    import_repeat: int = 3,
    progress: bool = True,
) -> BenchResult:
    """Measure `runners` (the hand-rolled one is always added, as the baseline) on `case`; see the module docstring."""
    from looplab.run import harness
    from looplab.views import terminal

    _refuse_unpaired(case)
    runners = [BASELINE, *(r for r in runners if r != BASELINE)]
    bare = {r: loop for r in runners if (loop := bare_loop(r)) is not None}
    jobs = [(kind, r) for r in runners for kind in ("looplab", "bare") if kind == "looplab" or r in bare]
    total = len(jobs) * (repeat + 1) + len(runners) * import_repeat
    with harness.endpoint(harness.ModelChoice()) as where, _progress(total, progress, terminal.console()) as step:
        server = server_latency(where.scripted_urls["openai"])
        apis = _pair_apis(bare, case, where)
        samples = _timed_rounds(jobs, bare, case, where, repeat, step)
        probes = _fresh_interpreters(runners, case, where, import_repeat, step)
    rows = _with_ratios([_runner_row(runner, samples[("looplab", runner)], probes[runner]) for runner in runners])
    taxes = [harness_tax(r, apis[r], samples[("bare", r)], samples[("looplab", r)]) for r in bare]
    recorded_model = [s.model_s / s.turns for runner in runners for s in samples[("looplab", runner)] if s.turns]
    no_bare = [r for r in runners if r not in bare]
    return _result(case, repeat, import_repeat, rows, taxes, no_bare, server, recorded_model)


def _refuse_unpaired(case: Any) -> None:
    """Refuses a case a bare loop cannot run as looplab does."""
    from looplab.adapters.contract.errors import LooplabError

    if case.model.persona != "careful" or case.faults:
        # A bare loop sends no persona header and its tools carry no faults: the pair would not run the same case.
        raise LooplabError(
            f"bench needs a case its bare loops can run as looplab does (the careful model, no faults); "
            f"{case.id!r} has persona {case.model.persona!r} and {len(case.faults)} fault(s)"
        )


def _pair_apis(bare: dict[str, BareRun], case: Any, where: Any) -> dict[str, Api]:
    """The wire API each pair speaks: the runner's first, which its bare loop speaks too."""
    from looplab.adapters import registry

    return {r: registry.load(r).api_for(where.spec_for(registry.load(r), case.model)) for r in bare}


def _timed_rounds(
    jobs: list[Job], bare: dict[str, BareRun], case: Any, where: Any, repeat: int, step: Callable[[str], None]
) -> dict[Job, list[Any]]:
    """Every job's samples: one warm-up round, then `repeat` timed rounds."""
    samples: dict[Job, list[Any]] = {job: [] for job in jobs}
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
    return samples


def _fresh_interpreters(
    runners: list[str], case: Any, where: Any, import_repeat: int, step: Callable[[str], None]
) -> dict[str, list[dict[str, float]]]:
    """Each runner's fresh-interpreter probes, `import_repeat` rounds."""
    probes: dict[str, list[dict[str, float]]] = {r: [] for r in runners}
    for i in range(import_repeat):
        for runner in runners:
            step(f"fresh interpreter: {runner}")
            # Only the first probe runs the case: peak memory after a run; the rest time the import alone.
            first = i == 0
            probes[runner].append(
                probe_subprocess(runner, case.id if first else None, where.scripted_urls if first else None)
            )
    return probes


def _runner_row(runner: str, runs: list[Sample], probes: list[dict[str, float]]) -> RunnerBench:
    """One runner's row, from its timed looplab runs and its probes."""
    from looplab.adapters import registry

    overheads = [o for s in runs for o in s.turn_overheads_s]
    model_per_turn = [s.model_s / s.turns for s in runs if s.turns]
    stops: dict[str, int] = {}
    for s in runs:
        stops[s.stop_reason] = stops.get(s.stop_reason, 0) + 1
    return RunnerBench(
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
        import_s=round(median([p["import_s"] for p in probes]), 3),
        peak_rss_mb=round(probes[0]["peak_rss_mb"], 1),
    )


def _with_ratios(rows: list[RunnerBench]) -> list[RunnerBench]:
    """`rows` with each one's ratios to the first (the baseline's)."""
    base = rows[0]
    for row in rows:
        row.ratio_overhead_median = ratio(row.overhead_ms_median, base.overhead_ms_median)
        row.ratio_overhead_p95 = ratio(row.overhead_ms_p95, base.overhead_ms_p95)
        row.ratio_import = ratio(row.import_s, base.import_s)
        row.ratio_peak_rss = ratio(row.peak_rss_mb, base.peak_rss_mb)
    return rows


def _result(
    case: Any,
    repeat: int,
    import_repeat: int,
    rows: list[RunnerBench],
    taxes: list[HarnessTax],
    no_bare_loop: list[str],
    server: ServerLatency,
    recorded_model: list[float],
) -> BenchResult:
    """The result, with what it was measured on; `looplab --help` and the merge are timed here, after the runs."""
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
        no_bare_loop=no_bare_loop,
        server=server,
        recorded_model_ms_median=round(median(recorded_model) * 1000, 3),
        help_s_median=round(help_time(), 3),
        merge=bench_merge(),
    )


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


def _swap_pairs(jobs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`jobs` with each (looplab, bare) pair of one runner in the other order."""
    out = list(jobs)
    for i in range(len(out) - 1):
        if out[i][0] == "looplab" and out[i + 1] == ("bare", out[i][1]):
            out[i], out[i + 1] = out[i + 1], out[i]
    return out
