"""The bench's fresh interpreters: a runner's import time and peak memory, and `looplab --help`'s time.

    python -m looplab.measure bench-probe --probe RUNNER [--case C --urls JSON]

is one fresh-interpreter measurement, printed as JSON; the bench starts one per runner and repetition.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from looplab.measure.bench_stats import median

#: Fresh `looplab --help` processes whose median is reported.
HELP_REPEAT = 5


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


def probe_subprocess(runner: str, case_id: str | None, urls: dict[str, str] | None) -> dict[str, float]:
    """`probe` in a fresh interpreter (`bench-probe`), its JSON read back."""
    cmd = [sys.executable, "-m", "looplab.measure", "bench-probe", "--probe", runner]
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


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m looplab.measure bench-probe --probe RUNNER [--case C --urls JSON]`: one fresh-interpreter
    measurement."""
    parser = argparse.ArgumentParser(prog="python -m looplab.measure bench-probe")
    parser.add_argument("--probe", required=True, metavar="RUNNER")
    parser.add_argument("--case")
    parser.add_argument("--urls")
    args = parser.parse_args(argv)
    print(json.dumps(probe(args.probe, args.case, json.loads(args.urls) if args.urls else None)))
    return 0
