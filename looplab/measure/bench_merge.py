"""How long merging a sharded full matrix takes: `python -m looplab.measure bench-merge [--shards N]`."""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from looplab.adapters import registry
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.result import RunResult
from looplab.records.identity import shard_of
from looplab.records.measurements import MergeBench
from looplab.records.merge import without
from looplab.records.outcome import RunOutcome
from looplab.records.results import build, merge_files, write
from looplab.run import harness
from looplab.scenarios.cases import load_cases


def bench_merge(shards: int = 10, sample: RunResult | None = None, repeat: int = 3) -> MergeBench:
    """Merge `shards` shard documents of the full matrix (every default runner x every case); the best of `repeat`.

    The cells' results are copies of one real run (`sample`, else `handrolled` on `vip-compound` against
    the scripted model, run here), so the documents have the sizes a real eval writes.
    """
    cases = list(load_cases().values())
    runners = [name for name, info in registry.RUNNERS.items() if info.by_default]
    if sample is None:
        with harness.endpoint(harness.ModelChoice()) as where:
            outcome = harness.run_one("handrolled", load_cases()["vip-compound"], where)
        if outcome.result is None:
            raise LooplabError(f"the sample run for the merge benchmark failed: {outcome.error}")
        sample = outcome.result
    outcomes = [
        RunOutcome(r, c.id, sample.model_copy(update={"runner": r, "case": c.id})) for c in cases for r in runners
    ]
    full = build(outcomes, runners=runners, cases=cases)
    best = float("inf")
    with tempfile.TemporaryDirectory(prefix="looplab-merge-bench-") as tmp:
        paths = []
        for i in range(1, shards + 1):
            part = without(full, {c.key for c in full.cells if shard_of(c.key, shards, runners) != i})
            paths.append(write(part, Path(tmp) / f"shard-{i}.json"))
        for _ in range(repeat):
            started = time.perf_counter()
            write(merge_files(paths), Path(tmp) / "all.json")
            best = min(best, time.perf_counter() - started)
    return MergeBench(shards=shards, cells=len(full.cells), runners=len(runners), cases=len(cases), seconds=best)


def bench_line(bench: MergeBench) -> str:
    """The benchmark as one line for the terminal."""
    return (
        f"results merge: {bench.shards} shard documents of the full matrix ({bench.runners} runners x "
        f"{bench.cases} cases, {bench.cells} cells) read, validated, merged and written in {bench.seconds:.3f} s "
        "(best of 3)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m looplab.measure bench-merge [--shards N]`: the merge benchmark alone."""
    parser = argparse.ArgumentParser(prog="python -m looplab.measure bench-merge")
    parser.add_argument("--shards", type=int, default=10)
    args = parser.parse_args(argv)
    print(bench_line(bench_merge(args.shards)))
    return 0
