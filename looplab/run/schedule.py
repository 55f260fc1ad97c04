"""Where the matrix's cells run: on threads in this process, or spread over worker processes with threads.

A run against a real model spends nearly all its time waiting on HTTP, so several cells may be in
flight in one process (`concurrency`); `jobs` worker processes (one per core by default) carry them
when the framework's own work needs more than one core. Each worker is a *lane*: a process with a
few threads, handed a cell by the parent whenever one is free, so a lane that finishes early takes more, and a
lane that dies loses only the cells it had started (recorded as errors), never the others.

Every wait here has a bound: a cell's own (`run_one` gives up on a run `grace_s` after its
`max_seconds`), and the parent polls its lanes once a second for one that died.
"""

from __future__ import annotations

import collections
import multiprocessing
import multiprocessing.connection
import pickle
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

from looplab.adapters.boundary import pacing
from looplab.adapters.contract.cancel import Cancellation
from looplab.records.outcome import RunOutcome
from looplab.run.harness import Endpoint, run_one
from looplab.run.interrupt import signals_held, worker_signals
from looplab.scenarios.cases import Case

__all__ = ["LANE_START_S", "POLL_S", "CancelOf", "Plan", "run_here", "run_in_lanes", "split"]

Plan = Sequence[tuple[str, Case]]
#: How often the parent looks for a lane that died while it waits for outcomes.
POLL_S = 1.0
#: A lane's start: a new interpreter importing looplab and a framework (seconds on a slow machine).
LANE_START_S = 60.0


def split(concurrency: int, lanes: int) -> list[int]:
    """`concurrency` threads over `lanes` processes, as evenly as they go (the first lanes take the rest)."""
    lanes = max(1, min(lanes, concurrency))
    return [concurrency // lanes + (i < concurrency % lanes) for i in range(lanes)]


#: Each cell's cancel switch, by its index in the plan (None: the cell cannot be cancelled).
CancelOf = Callable[[int], Cancellation | None]


def run_here(
    plan: Plan,
    where: Endpoint,
    concurrency: int,
    on_done: Callable[[int, RunOutcome], None],
    options: dict[str, Any],
    cancel_of: CancelOf | None = None,
) -> None:
    """Every cell in this process, up to `concurrency` at a time, in plan order; `on_done(i, outcome)` as each ends.

    `cancel_of(i)`: the switch that cancels cell `i` (see `looplab.run.handle.Cancels`)."""
    if concurrency <= 1:
        for i, (runner, case) in enumerate(plan):
            on_done(i, run_one(runner, case, where, cancel=cancel_of and cancel_of(i), **options))
        return
    lock = threading.Lock()  # on_done is the caller's code: one call at a time, as without threads

    def cell(i: int) -> None:
        runner, case = plan[i]
        outcome = run_one(runner, case, where, cancel=cancel_of and cancel_of(i), **options)
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


def _lane(conn: Connection, threads: int, where: Endpoint, options: dict[str, Any], shared: Any) -> None:
    """A worker process: `threads` threads running the cells the parent sends on `conn` until a None each.

    What comes is a cell `(i, runner, case, cancelled)` (`cancelled`: the detail of a cell cancelled before it was
    handed out), a `("cancel", i, detail)` for a cell it holds, or a None; a thread of its own reads them.
    """
    worker_signals()
    pacing.install(pacing.Pacer(where.choice.rpm, shared))
    cells: queue.Queue[tuple[int, str, Case, Cancellation] | None] = queue.Queue()
    switches: dict[int, Cancellation] = {}

    def read() -> None:
        while True:
            try:
                item = conn.recv()
            except (EOFError, OSError):  # the parent is gone
                for _ in range(threads):
                    cells.put(None)
                return
            if item is None:
                cells.put(None)
            elif item[0] == "cancel":
                switches.setdefault(item[1], Cancellation()).cancel(item[2])
            else:
                i, runner, case, cancelled = item
                switch = switches.setdefault(i, Cancellation())
                if cancelled is not None:
                    switch.cancel(cancelled)
                cells.put((i, runner, case, switch))

    sending = threading.Lock()

    def work() -> None:
        while (item := cells.get()) is not None:
            i, runner, case, switch = item
            outcome = run_one(runner, case, where, cancel=switch, **options)
            try:
                payload = pickle.dumps((i, outcome))
            except Exception as exc:  # an outcome that cannot travel back is that cell's error, not a lost cell
                error = f"outcome could not be sent back: {type(exc).__name__}: {exc}"
                payload = pickle.dumps((i, RunOutcome(runner, case.id, error=error)))
            with sending:
                conn.send_bytes(payload)

    threading.Thread(target=read, name="looplab-lane-reader", daemon=True).start()
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
    cancel_of: CancelOf | None = None,
) -> None:
    """Every cell over `jobs` worker processes with `concurrency` threads between them; `on_done(i, outcome)` here.
    A cell cancelled (`cancel_of(i)`) while a lane holds it is cancelled there; one not yet handed out starts so.

    Each lane has a pipe of its own, and this process hands it a cell whenever one of its threads is free: no lock
    or queue is shared between lanes, so a lane killed mid-message breaks only its own pipe, and the cells it had
    are exactly the ones lost.
    """
    # spawn, not fork: this process runs the model server's thread, and a forked child would inherit its locks.
    context = multiprocessing.get_context("spawn")
    shared = context.Value("d", 0.0)  # the pacer's schedule, one for every lane
    shape = split(concurrency, min(jobs, len(plan)))
    lanes: list[_LaneEnd] = []
    with signals_held():  # lanes are born with the signals blocked, until they ignore Ctrl-C themselves
        for threads in shape:
            mine, theirs = context.Pipe()
            process = context.Process(target=_lane, args=(theirs, threads, where, options, shared), daemon=True)
            process.start()
            theirs.close()  # this process keeps no copy of the lane's end: the lane's death reads as an end of file
            lanes.append(_LaneEnd(process, mine, threads))
    waiting = collections.deque(range(len(plan)))
    # Every cell reports within its own bound, so a longer silence means the lanes are wedged.
    quiet_limit = max(c.limits.max_seconds for _, c in plan) + options.get("grace_s", 30.0) + LANE_START_S
    last_news = time.monotonic()

    def lost(i: int, why: str) -> None:
        on_done(i, RunOutcome(plan[i][0], plan[i][1].id, error=f"worker process failed: {why}"))

    handing = threading.Lock()  # a cancel (on the canceller's thread) finds the cell where hand-outs put it

    def switch_of(i: int) -> Cancellation | None:
        return cancel_of(i) if cancel_of is not None else None

    def tell_the_lane(i: int, detail: str) -> None:
        with handing:
            for lane in lanes:
                if i in lane.in_hand:
                    lane.send(("cancel", i, detail))

    forget = [s.listen(lambda detail, i=i: tell_the_lane(i, detail)) for i in range(len(plan)) if (s := switch_of(i))]
    try:
        for lane in lanes:
            with handing:
                lane.hand_out(plan, waiting, switch_of)
        while live := [lane for lane in lanes if lane.alive]:
            ready = multiprocessing.connection.wait([lane.conn for lane in live], timeout=POLL_S)
            for lane in (lane for lane in live if lane.conn in ready):
                try:
                    i, outcome = pickle.loads(lane.conn.recv_bytes())
                except (EOFError, OSError):  # the lane died: its cells in hand are lost, the others go elsewhere
                    for i in lane.close():
                        lost(i, f"exit code {lane.process.exitcode}")
                    continue
                last_news = time.monotonic()
                lane.in_hand.discard(i)
                on_done(i, outcome)
                with handing:
                    lane.hand_out(plan, waiting, switch_of)
            if not ready and time.monotonic() - last_news > quiet_limit:
                for lane in live:
                    for i in lane.close(kill=True):
                        lost(i, f"no worker reported for {quiet_limit:g} s")
        while waiting:
            lost(waiting.popleft(), "no worker process left to run it")
    finally:  # on Ctrl-C the lanes are left to interrupt.clean_up (it ends them, their tests and workspaces)
        for stop_listening in forget:
            stop_listening()
        for lane in lanes:
            lane.conn.close()
    for lane in lanes:
        lane.process.join(timeout=10)


class _LaneEnd:
    """This process's end of a lane: its process, its pipe, and the cells it holds."""

    def __init__(self, process: Any, conn: Connection, threads: int) -> None:
        self.process, self.conn, self.threads = process, conn, threads
        self.in_hand: set[int] = set()
        self.alive = True

    def hand_out(self, plan: Plan, waiting: collections.deque[int], switch_of: CancelOf) -> None:
        """Cells for the lane's free threads (each with how it was cancelled, if it was before it went); with none
        left to hand out, a None to each thread (the lane then ends)."""
        while waiting and len(self.in_hand) < self.threads:
            i = waiting.popleft()
            switch = switch_of(i)
            if not self.send((i, *plan[i], switch.detail if switch is not None and switch.cancelled else None)):
                waiting.appendleft(i)  # the lane is gone (the next read of its pipe says so): the cell goes elsewhere
                return
            self.in_hand.add(i)
        if not waiting and not self.in_hand:
            for _ in range(self.threads):
                self.send(None)

    def send(self, item: object) -> bool:
        """Send `item` to the lane; False if it is gone."""
        try:
            self.conn.send(item)
        except OSError:
            return False
        return True

    def close(self, kill: bool = False) -> list[int]:
        """Stop reading the lane (killing it first if asked); the cells it held, in plan order."""
        if kill:
            self.process.kill()
        self.process.join(timeout=POLL_S)
        self.alive = False
        held, self.in_hand = sorted(self.in_hand), set()
        return held
