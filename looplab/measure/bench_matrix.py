"""`looplab bench --isolation` and `--shards N`: what runner environments and shards cost and give, end to end.

Both time the `looplab` command itself in fresh processes, as a user runs it, so interpreter start,
imports and the scripted model's start are inside the numbers.

- isolation: per runner, `looplab eval --runner R --case vip-compound --jobs 1` with and without
  `--isolate`, its environment already cached (created first if it was not, and that time reported
  apart): the difference is what a cached runner environment adds to an isolated eval.
- shards: the whole matrix in one process (`--jobs 1`), then as N shards (`--shard I/N --jobs 1`)
  in N processes at once followed by `looplab merge`; the speedup is the first over the second.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from looplab.run import environments

__all__ = ["isolation", "isolation_table", "shard_table", "shards"]

#: Seconds any one timed command may take.
COMMAND_TIMEOUT_S = 1800.0
#: Timed runs per runner and mode; the median is reported.
ISOLATION_REPEAT = 3


class IsolationRow(BaseModel):
    """One runner: its environment's creation (if it happened now) and what isolation adds to a one-cell eval."""

    runner: str
    created_s: float | None
    in_process_s: float
    isolated_s: float

    @property
    def added_s(self) -> float:
        return round(self.isolated_s - self.in_process_s, 2)


class ShardRow(BaseModel):
    """The whole matrix in one process and in shards."""

    shards: int
    one_process_s: float
    sharded_s: float
    merge_s: float
    cells: int

    @property
    def speedup(self) -> float:
        return round(self.one_process_s / (self.sharded_s + self.merge_s), 2)


def _looplab() -> list[str]:
    script = Path(sys.executable).with_name("looplab")
    return [str(script)] if script.exists() else [sys.executable, "-m", "looplab.cli"]


def _timed(args: Sequence[str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run([*_looplab(), *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if proc.returncode not in (0, 1):  # 1: a check failed, still a measured run
        raise RuntimeError(f"looplab {' '.join(args)} failed: {proc.stderr.strip()[-300:]}")
    return time.perf_counter() - started


def isolation(runners: Sequence[str], repeat: int = ISOLATION_REPEAT) -> list[IsolationRow]:
    """Per runner: the median one-cell eval in process and isolated, with the environment cached."""
    rows = []
    for runner in runners:
        env = environments.ensure(environments.spec_for(runner))
        base = ["eval", "--runner", runner, "--case", "vip-compound", "--jobs", "1"]
        _timed([*base, "--isolate"])  # warm: the interpreter's and the file system's caches, as in use
        here = sorted(_timed(base) for _ in range(repeat))[repeat // 2]
        isolated = sorted(_timed([*base, "--isolate"]) for _ in range(repeat))[repeat // 2]
        rows.append(IsolationRow(runner=runner, created_s=env.created_s, in_process_s=here, isolated_s=isolated))
    return rows


def shards(count: int, runners: Sequence[str] = ()) -> ShardRow:
    """The full matrix once in one process, then in `count` shard processes at once and merged."""
    chosen = [arg for runner in runners for arg in ("--runner", runner)]
    with tempfile.TemporaryDirectory(prefix="looplab-bench-") as tmp:
        whole = Path(tmp) / "whole.json"
        one = _timed(["eval", *chosen, "--jobs", "1", "--json", str(whole)])
        parts = [Path(tmp) / f"shard-{i}.json" for i in range(1, count + 1)]
        started = time.perf_counter()
        procs = [
            subprocess.Popen(
                [*_looplab(), "eval", *chosen, "--jobs", "1", "--shard", f"{i}/{count}", "--json", str(part)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=os.environ.copy(),
            )
            for i, part in enumerate(parts, start=1)
        ]
        for proc in procs:
            proc.wait(timeout=COMMAND_TIMEOUT_S)
        sharded = time.perf_counter() - started
        merge = _timed(["merge", *map(str, parts), "-o", str(Path(tmp) / "merged.json")])
        from looplab.records import results

        cells = len(results.read(Path(tmp) / "merged.json").cells)
    return ShardRow(
        shards=count, one_process_s=round(one, 2), sharded_s=round(sharded, 2), merge_s=round(merge, 2), cells=cells
    )


def isolation_table(rows: Sequence[IsolationRow]) -> list[str]:
    """The rows as Markdown (it reads the same in a terminal)."""
    lines = [
        "one-cell eval (vip-compound) per runner, median of fresh `looplab eval` processes",
        "",
        "| runner | environment created now s | in process s | isolated s | added s |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        created = "cached" if r.created_s is None else f"{r.created_s:.1f}"
        lines.append(f"| {r.runner} | {created} | {r.in_process_s:.2f} | {r.isolated_s:.2f} | {r.added_s:+.2f} |")
    return lines


def shard_table(row: ShardRow) -> list[str]:
    return [
        f"the whole matrix ({row.cells} cells): one process {row.one_process_s:.1f} s; "
        f"{row.shards} shard processes at once {row.sharded_s:.1f} s + merge {row.merge_s:.2f} s "
        f"= {row.speedup}x faster"
    ]
