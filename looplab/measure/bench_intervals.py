"""What the statistics over repeats add to a report of the full matrix:
`python -m looplab.measure bench-intervals [--repeat K ...]`.

For each number of repeats, the full matrix (every default runner on every case of the suite, K times) as a results
document whose runs are copies of one real run with their tokens, wall time and verdict varied (seeded), then the
best of 3 timings of what the intervals cost: the per-runner summary with its intervals against the same summary
without them, and the runners compared pair by pair (`records.comparison`, as the differences rows read them).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from looplab.adapters import registry
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.result import RunResult
from looplab.records import summary
from looplab.records.comparison import compare_runners
from looplab.records.document import Document
from looplab.records.outcome import RunOutcome
from looplab.records.results import build
from looplab.run import harness
from looplab.scenarios.cases import CheckResult, load_cases


@dataclass(frozen=True)
class IntervalsBench:
    """The statistics' cost over one full matrix of `repeats` repeats."""

    runners: int
    cases: int
    repeats: int
    #: The per-runner summary without its intervals, and with them (seconds, best of 3).
    summary_s: float
    summary_with_intervals_s: float
    #: Every pair of runners compared on every metric (seconds, best of 3).
    comparisons_s: float
    comparisons: int

    @property
    def added_s(self) -> float:
        """What the statistics add: the intervals' share of the summary, and the comparisons."""
        return max(0.0, self.summary_with_intervals_s - self.summary_s) + self.comparisons_s


def _sample() -> RunResult:
    with harness.endpoint(harness.ModelChoice()) as where:
        outcome = harness.run_one("handrolled", load_cases()["vip-compound"], where)
    if outcome.result is None:
        raise LooplabError(f"the sample run for the intervals benchmark failed: {outcome.error}")
    return outcome.result


def full_matrix(repeats: int, sample: RunResult, seed: int = 0) -> tuple[Document, list[RunOutcome]]:
    """The full matrix `repeats` times over, each run a copy of `sample` with its numbers and verdict varied."""
    luck = random.Random(seed)
    runners = [name for name, info in registry.RUNNERS.items() if info.by_default]
    cases = list(load_cases().values())
    outcomes = []
    for k in range(1, repeats + 1):
        for case in cases:
            for runner in runners:
                totals = sample.totals.model_copy(
                    update={
                        "input_tokens": luck.randint(2_000, 9_000),
                        "model_calls": luck.randint(3, 12),
                        "wall_s": luck.uniform(0.5, 5.0),
                    }
                )
                result = sample.model_copy(update={"runner": runner, "case": case.id, "totals": totals})
                missed = CheckResult(name="answer names the bug", passed=False, detail="")
                failed = [] if luck.random() < 0.7 else [missed]
                outcomes.append(RunOutcome(runner, case.id, result, failed, repeat=k))
    return build(outcomes, runners=runners, cases=cases), outcomes


def _best(work: Callable[[], object], times: int = 3) -> float:
    best = float("inf")
    for _ in range(times):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def bench_intervals(repeats: int, sample: RunResult | None = None) -> IntervalsBench:
    """The statistics' cost over the full matrix run `repeats` times."""
    doc, outcomes = full_matrix(repeats, sample or _sample())
    # The same outcomes read as one repeat each: the summary then computes no interval.
    once = [RunOutcome(o.runner, f"{o.case}#{o.repeat}", o.result, o.checks, repeat=1) for o in outcomes]
    comparisons = compare_runners(doc)
    return IntervalsBench(
        runners=len(doc.runners),
        cases=len(doc.cases),
        repeats=repeats,
        summary_s=_best(lambda: summary.summarize(once)),
        summary_with_intervals_s=_best(lambda: summary.summarize(outcomes)),
        comparisons_s=_best(lambda: compare_runners(doc)),
        comparisons=len(comparisons),
    )


def bench_line(bench: IntervalsBench) -> str:
    """The benchmark as one line for the terminal."""
    runs = bench.runners * bench.cases * bench.repeats
    return (
        f"intervals over the full matrix ({bench.runners} runners x {bench.cases} cases x {bench.repeats} repeats, "
        f"{runs} runs): summary {bench.summary_s * 1000:.1f} ms without intervals, "
        f"{bench.summary_with_intervals_s * 1000:.1f} ms with; {bench.comparisons} paired comparisons "
        f"{bench.comparisons_s * 1000:.1f} ms; the statistics add {bench.added_s * 1000:.1f} ms (best of 3)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m looplab.measure bench-intervals [--repeat K ...]`: one line per number of repeats."""
    parser = argparse.ArgumentParser(prog="python -m looplab.measure bench-intervals")
    parser.add_argument("--repeat", type=int, action="append", metavar="K", help="repeats (default: 2, 5 and 20)")
    args = parser.parse_args(argv)
    sample = _sample()
    for repeats in args.repeat or [2, 5, 20]:
        print(bench_line(bench_intervals(repeats, sample)))
    return 0
