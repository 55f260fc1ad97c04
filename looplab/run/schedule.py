"""Where the matrix's cells run: on threads in this process, or spread over worker processes with threads.

A run against a real model spends nearly all its time waiting on HTTP, so several cells may be in
flight in one process (`concurrency`); `jobs` worker processes (one per core by default) carry them
when the framework's own work needs more than one core. Each worker is a *lane*: a process with a
few threads that take cells from one shared queue, so a lane that finishes early takes more, and a
lane that dies loses only the cells it had started (recorded as errors), never the others.

Every wait here has a bound: a cell's own (`run_one` gives up on a run `grace_s` after its
`max_seconds`), and the parent polls its lanes once a second for one that died.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from looplab.adapters.boundary import pacing
from looplab.records.outcome import RunOutcome
from looplab.run.harness import Endpoint, run_one
from looplab.run.interrupt import signals_held, worker_signals
from looplab.scenarios.cases import Case

__all__ = ["LANE_START_S", "POLL_S", "Plan", "run_here", "run_in_lanes", "split"]

Plan = Sequence[tuple[str, Case]]
#: How often the parent looks for a lane that died while it waits for outcomes.
POLL_S = 1.0
#: A lane's start: a new interpreter importing looplab and a framework (seconds on a slow machine).
LANE_START_S = 60.0


def split(concurrency: int, lanes: int) -> list[int]:
    """`concurrency` threads over `lanes` processes, as evenly as they go (the first lanes take the rest)."""
    lanes = max(1, min(lanes, concurrency))
    return [concurrency // lanes + (i < concurrency % lanes) for i in range(lanes)]


def run_here(
    plan: Plan, where: Endpoint, concurrency: int, on_done: Callable[[int, RunOutcome], None], options: dict[str, Any]
) -> None:
    """Every cell in this process, up to `concurrency` at a time, in plan order; `on_done(i, outcome)` as each ends."""
    if concurrency <= 1:
        for i, (runner, case) in enumerate(plan):
            on_done(i, run_one(runner, case, where, **options))
        return
    lock = threading.Lock()  # on_done is the caller's code: one call at a time, as without threads

    def cell(i: int) -> None:
        runner, case = plan[i]
        outcome = run_one(runner, case, where, **options)
        with lock:
            on_done(i, outcome)

    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="looplab-cell")
    try:
        for future in [pool.submit(cell, i) for i in range(len(plan))]:
            future.result()
    except BaseException:  # Ctrl-C: the cells not started yet are dropped rather than waited for
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _lane(tasks: Any, results: Any, threads: int, where: Endpoint, options: dict[str, Any], shared: Any) -> None:
    """A worker process: `threads` threads taking `(i, runner, case)` from `tasks` until a None."""
    worker_signals()
    pacing.install(pacing.Pacer(where.choice.rpm, shared))
    pid = os.getpid()

    def work() -> None:
        while (item := tasks.get()) is not None:
            i, runner, case = item
            results.put((i, pid, None))  # started: if this process dies now, the parent knows which cell was lost
            outcome = run_one(runner, case, where, **options)
            try:
                payload = pickle.dumps(outcome)
            except Exception as exc:  # an outcome that cannot travel back is that cell's error, not a lost cell
                error = f"outcome could not be sent back: {type(exc).__name__}: {exc}"
                payload = pickle.dumps(RunOutcome(runner, case.id, error=error))
            results.put((i, pid, payload))

    workers = [threading.Thread(target=work, name=f"looplab-lane-{n}") for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def run_in_lanes(
    plan: Plan,
    where: Endpoint,
    jobs: int,
    concurrency: int,
    on_done: Callable[[int, RunOutcome], None],
    options: dict[str, Any],
) -> None:
    """Every cell over `jobs` worker processes with `concurrency` threads between them; `on_done(i, outcome)` here."""
    # spawn, not fork: this process runs the model server's thread, and a forked child would inherit its locks.
    context = multiprocessing.get_context("spawn")
    tasks, results = context.Queue(), context.Queue()
    shared = context.Value("d", 0.0)  # the pacer's schedule, one for every lane
    shape = split(concurrency, min(jobs, len(plan)))
    for i, (runner, case) in enumerate(plan):
        tasks.put((i, runner, case))
    for _ in range(sum(shape)):
        tasks.put(None)
    with signals_held():  # lanes are born with the signals blocked, until they ignore Ctrl-C themselves
        lanes = [
            context.Process(target=_lane, args=(tasks, results, n, where, options, shared), daemon=True) for n in shape
        ]
        for lane in lanes:
            lane.start()
    started: dict[int, int] = {}  # cell -> the pid of the lane running it
    left = set(range(len(plan)))
    # Every cell reports within its own bound, so a longer silence means the lanes are wedged
    # (a lane killed while it held the task queue's lock leaves the others waiting on it forever).
    quiet_limit = max(c.limits.max_seconds for _, c in plan) + options.get("grace_s", 30.0) + LANE_START_S
    last_news = time.monotonic()
    try:
        while left:
            try:
                i, pid, payload = results.get(timeout=POLL_S)
            except queue.Empty:
                _lost(plan, left, started, lanes, on_done)
                if left and time.monotonic() - last_news > quiet_limit:
                    for lane in lanes:
                        lane.kill()
                    for i in sorted(left):
                        error = f"worker process failed: no worker reported for {quiet_limit:g} s"
                        on_done(i, RunOutcome(plan[i][0], plan[i][1].id, error=error))
                    left.clear()
                continue
            last_news = time.monotonic()
            if payload is None:
                started[i] = pid
            elif i in left:
                left.discard(i)
                on_done(i, pickle.loads(payload))
    finally:  # on Ctrl-C the lanes are left to interrupt.clean_up (it ends them, their tests and workspaces)
        tasks.cancel_join_thread()
    for lane in lanes:
        lane.join(timeout=10)


def _lost(
    plan: Plan,
    left: set[int],
    started: dict[int, int],
    lanes: list[Any],
    on_done: Callable[[int, RunOutcome], None],
) -> None:
    """Cells whose lane died: the ones it had started are errors; when every lane is gone, so is every cell left."""
    dead = {lane.pid: lane.exitcode for lane in lanes if not lane.is_alive() and lane.exitcode != 0}
    everyone_gone = all(not lane.is_alive() for lane in lanes)
    for i in sorted(left):
        pid = started.get(i)
        if pid in dead or everyone_gone:
            runner, case = plan[i]
            why = f"exit code {dead[pid]}" if pid in dead else "no worker process left to run it"
            left.discard(i)
            on_done(i, RunOutcome(runner, case.id, error=f"worker process failed: {why}"))
