"""`looplab bench --concurrency 1,32`: the whole matrix against a model that takes a second a reply.

Against a real model a run spends nearly all its time waiting on HTTP. This serves the scripted
model behind `SlowReplies` (every reply starts `reply_s` late, as a real model's does) and runs the
full runner x case matrix through `matrix.run_matrix` at each concurrency asked for, with the
default worker processes (one per core), printing the wall time and the speedup over the first.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pydantic import BaseModel

from looplab.run import matrix
from looplab.run.harness import Endpoint, ModelChoice
from looplab.scenarios.cases import Case
from looplab.scenarios.scripted.faults import SlowReplies
from looplab.scenarios.scripted.server import ScriptedModelServer

__all__ = ["measure", "table"]

#: Seconds each reply of the slow model waits before it starts.
REPLY_S = 1.0


class ConcurrencyRow(BaseModel):
    """The matrix at one concurrency."""

    concurrency: int
    jobs: int
    cells: int
    passed: int
    model_calls: int
    wall_s: float
    speedup: float | None = None


def measure(
    runners: Sequence[str], cases: Sequence[Case], levels: Sequence[int], *, jobs: int, reply_s: float = REPLY_S
) -> list[ConcurrencyRow]:
    """The matrix once per concurrency level, against one slow scripted model."""
    rows: list[ConcurrencyRow] = []
    with ScriptedModelServer(wrap=lambda app: SlowReplies(app, reply_s)) as server:
        where = Endpoint(ModelChoice(), server.base_urls)
        for level in levels:
            started = time.perf_counter()
            outcomes = matrix.run_matrix(runners, cases, where, jobs=jobs, concurrency=level)
            wall = time.perf_counter() - started
            done = [o.result for o in outcomes if o.result is not None]
            rows.append(
                ConcurrencyRow(
                    concurrency=level,
                    jobs=min(jobs, level),
                    cells=len(outcomes),
                    passed=sum(o.passed for o in outcomes),
                    model_calls=sum(r.totals.model_calls for r in done),
                    wall_s=round(wall, 2),
                    speedup=round(rows[0].wall_s / wall, 1) if rows else 1.0,
                )
            )
    return rows


def table(rows: Sequence[ConcurrencyRow], reply_s: float = REPLY_S) -> list[str]:
    """The rows as Markdown (it reads the same in a terminal)."""
    lines = [
        f"matrix against a model that takes {reply_s:g} s a reply",
        "",
        "| concurrency | worker processes | cells | passed | model calls | wall s | speedup |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.concurrency} | {r.jobs} | {r.cells} | {r.passed} | {r.model_calls} | {r.wall_s:.1f} | {r.speedup}× |"
        )
    return lines
