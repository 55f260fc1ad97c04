"""Where the matrix's cells run: one interface (`Scheduler`), here on threads or over worker processes.

A run against a real model spends nearly all its time waiting on HTTP, so several cells may be in
flight in one process (`concurrency`); `jobs` worker processes (one per core by default) carry them
when the framework's own work needs more than one core. Each worker is a *lane*: a process with a
few threads, handed a cell by the parent whenever one is free, so a lane that finishes early takes more, and a
lane that dies loses only the cells it had started (recorded as errors), never the others. A process's threads
take their cells from one `CellQueue`, here, in a worker process and in a runner environment's lane alike
(`looplab.run.isolation` is the third place: lanes of other interpreters).

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
from collections.abc import Callable, Iterable, Sequence
from multiprocessing.connection import Connection
from typing import Any, Protocol

from looplab.adapters.boundary import pacing
from looplab.adapters.contract.cancel import Cancellation
from looplab.records.outcome import RunOutcome
from looplab.run.harness import Endpoint, run_one
from looplab.run.interrupt import signals_held, worker_signals
from looplab.run.options import RunOptions
from looplab.scenarios.cases import Case

__all__ = ["Here"]

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
#: Called with a cell's index in the plan and its outcome, as the cell ends.
OnDone = Callable[[int, RunOutcome], None]


class Scheduler(Protocol):
    """Where a plan's cells run: this process's threads (`Here`), worker processes (`Lanes`), or lanes of runner
    environments (`looplab.run.isolation.Isolated`)."""

    def run(
        self, plan: Plan, where: Endpoint, options: RunOptions, on_done: OnDone, cancel_of: CancelOf | None = None
    ) -> None:
        """Every cell of `plan` with `options`; `on_done(i, outcome)` in this process, one call at a time, as each
        ends, and `cancel_of(i)` the switch that cancels cell `i` before or while it runs. Returns once every cell
        has reported; an interrupt ends the wait at once, and what reported stays reported."""
        ...


def quiet_limit(cases: Iterable[Case], options: RunOptions, start_s: float = LANE_START_S) -> float:
    """How long a lane may be silent: each of its cells reports within its own bound, once the lane started."""
    return max(c.limits.max_seconds for c in cases) + options.grace_s + start_s


class CellQueue:
    """Cells waiting for a thread of this process: the first of `threads` threads free takes the next, in the
    order they were put, and runs it (`run_one`); `on_done(i, outcome)` is called one at a time, as without
    threads. `close` says no more cells come; `serve` works them until then."""

    def __init__(self, where: Endpoint, options: RunOptions, on_done: OnDone, threads: int = 1) -> None:
        self.where, self.options, self.on_done = where, options, on_done
        self.threads = max(1, threads)
        self._cells: queue.Queue[tuple[int, str, Case, Cancellation | None] | None] = queue.Queue()
        self._reporting = threading.Lock()  # on_done is the caller's code
        self._failed: BaseException | None = None

    def put(self, i: int, runner: str, case: Case, cancel: Cancellation | None = None) -> None:
        """Cell `i` (its index in the plan), cancelled by `cancel` when that is set."""
        self._cells.put((i, runner, case, cancel))

    def close(self) -> None:
        """No more cells: each thread ends once the queue is empty."""
        for _ in range(self.threads):
            self._cells.put(None)

    def serve(self) -> None:
        """Run the cells until the queue is closed and empty: on this thread when there is one, else on threads of
        their own while this one waits. An interrupt, or an error out of `on_done`, drops the cells not started yet
        rather than wait for them; the error is raised here."""
        if self.threads == 1:
            self._work()
            return
        workers = [threading.Thread(target=self._guarded, name=f"looplab-cell-{n}") for n in range(self.threads)]
        for worker in workers:
            worker.start()
        try:
            for worker in workers:
                worker.join()
        except BaseException:
            self._drop()
            raise
        if self._failed is not None:
            raise self._failed

    def _guarded(self) -> None:
        try:
            self._work()
        except BaseException as exc:  # the first error ends the queue; `serve` raises it
            with self._reporting:
                self._failed = self._failed or exc
            self._drop()

    def _drop(self) -> None:
        while True:
            try:
                self._cells.get_nowait()
            except queue.Empty:
                break
        self.close()

    def _work(self) -> None:
        while (cell := self._cells.get()) is not None:
            i, runner, case, cancel = cell
            # By name: the form every caller of `run_one` uses, so a stand-in for it sees the same options.
            outcome = run_one(runner, case, self.where, self.options, cancel=cancel)
            with self._reporting:
                self.on_done(i, outcome)


class Here:
    """The cells on `concurrency` threads of this process (the calling thread alone when it is 1), in plan order."""

    def __init__(self, concurrency: int = 1) -> None:
        self.concurrency = concurrency

    def run(
        self, plan: Plan, where: Endpoint, options: RunOptions, on_done: OnDone, cancel_of: CancelOf | None = None
    ) -> None:
        """See `Scheduler.run`."""
        cells = CellQueue(where, options, on_done, min(self.concurrency, len(plan)))
        for i, (runner, case) in enumerate(plan):
            cells.put(i, runner, case, cancel_of(i) if cancel_of is not None else None)
        cells.close()
        cells.serve()


def _lane(conn: Connection, threads: int, where: Endpoint, options: RunOptions, shared: Any) -> None:
    """A worker process: `threads` threads running the cells the parent sends on `conn` until a None each.

    What comes is a cell `(i, runner, case, cancelled)` (`cancelled`: the detail of a cell cancelled before it was
    handed out), a `("cancel", i, detail)` for a cell it holds, or a None; a thread of its own reads them.
    """
    worker_signals()
    pacing.install(pacing.Pacer(where.choice.rpm, shared))
    switches: dict[int, Cancellation] = {}

    def send(i: int, outcome: RunOutcome) -> None:  # one at a time: the queue calls it so
        try:
            payload = pickle.dumps((i, outcome))
        except Exception as exc:  # an outcome that cannot travel back is that cell's error, not a lost cell
            error = f"outcome could not be sent back: {type(exc).__name__}: {exc}"
            payload = pickle.dumps((i, RunOutcome(outcome.runner, outcome.case, error=error)))
        conn.send_bytes(payload)

    cells = CellQueue(where, options, send, threads)

    def read() -> None:
        while True:
            try:
                item = conn.recv()
            except (EOFError, OSError):  # the parent is gone
                cells.close()
                return
            if item is None:  # the lane holds no cell and none will come
                cells.close()
                return
            elif item[0] == "cancel":
                switches.setdefault(item[1], Cancellation()).cancel(item[2])
            else:
                i, runner, case, cancelled = item
                switch = switches.setdefault(i, Cancellation())
                if cancelled is not None:
                    switch.cancel(cancelled)
                cells.put(i, runner, case, switch)

    threading.Thread(target=read, name="looplab-lane-reader", daemon=True).start()
    cells.serve()


class Lanes:
    """The cells over `jobs` worker processes with `concurrency` threads between them (`split`).

    Each lane has a pipe of its own, and this process hands it a cell whenever one of its threads is free: no lock
    or queue is shared between lanes, so a lane killed mid-message breaks only its own pipe, and the cells it had
    are exactly the ones lost. A cell cancelled while a lane holds it is cancelled there; one not yet handed out
    starts so.
    """

    def __init__(self, jobs: int, concurrency: int) -> None:
        self.jobs, self.concurrency = jobs, concurrency

    def run(
        self, plan: Plan, where: Endpoint, options: RunOptions, on_done: OnDone, cancel_of: CancelOf | None = None
    ) -> None:
        """See `Scheduler.run`."""
        # spawn, not fork: this process runs the model server's thread, and a forked child would inherit its locks.
        context = multiprocessing.get_context("spawn")
        shared = context.Value("d", 0.0)  # the pacer's schedule, one for every lane
        shape = split(self.concurrency, min(self.jobs, len(plan)))
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
        silent_for = quiet_limit((c for _, c in plan), options)
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

        forget = [
            s.listen(lambda detail, i=i: tell_the_lane(i, detail)) for i in range(len(plan)) if (s := switch_of(i))
        ]
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
                if not ready and time.monotonic() - last_news > silent_for:
                    for lane in live:
                        for i in lane.close(kill=True):
                            lost(i, f"no worker reported for {silent_for:g} s")
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
