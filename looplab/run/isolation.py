"""Cells in runner environments: each environment's cells in a lane process of its own interpreter.

`looplab eval --isolate` plans the matrix as usual, then hands each runner's cells to a lane
(`python -m looplab.run.lane`) started with that runner's environment (`looplab.run.environments`): the
`Isolated` scheduler (`looplab.run.schedule.Scheduler`). The scripted model stays in this process; lanes
reach it over loopback, as the worker processes of `--jobs` do. Up to `jobs` lanes run at once. Every wait
has a bound: a lane silent for longer than any of its cells may take is killed, and its unfinished cells
become errors that name the end of its stderr; a lane that dies loses only its own cells.
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO

from looplab.adapters.boundary.processes import kill_group
from looplab.adapters.contract.errors import LooplabError
from looplab.records.outcome import RunOutcome
from looplab.run.environments import RunnerEnv, runner_of
from looplab.run.harness import Endpoint
from looplab.run.lane import decode_outcome, encode_cancel, encode_job
from looplab.run.options import RunOptions
from looplab.run.schedule import LANE_START_S, POLL_S, CancelOf, OnDone, Plan, quiet_limit
from looplab.scenarios.cases import Case

__all__ = ["Isolated"]

#: Lines of a dead lane's stderr kept in its cells' errors.
STDERR_LINES = 3


class Isolated:
    """The cells in their runners' environments (`env_of(label)`), `jobs` lanes at a time, `concurrency` threads
    between them."""

    def __init__(self, env_of: Callable[[str], RunnerEnv], jobs: int = 1, concurrency: int = 1) -> None:
        self.env_of, self.jobs, self.concurrency = env_of, jobs, concurrency

    def run(
        self, plan: Plan, where: Endpoint, options: RunOptions, on_done: OnDone, cancel_of: CancelOf | None = None
    ) -> None:
        """See `looplab.run.schedule.Scheduler.run`; `plan` holds runner labels (`run_isolated`)."""
        run_isolated(plan, where, self.env_of, self.jobs, self.concurrency, on_done, options, cancel_of)


def run_isolated(
    plan: Sequence[tuple[str, Case]],
    where: Endpoint,
    env_of: Callable[[str], RunnerEnv],
    jobs: int,
    concurrency: int,
    on_done: OnDone,
    options: RunOptions,
    cancel_of: CancelOf | None = None,
) -> None:
    """Every cell in its runner's environment; `plan` holds runner labels, `env_of(label)` their environments.
    A cell cancelled (`cancel_of(i)`) is cancelled in its lane, before or while it runs; every cell runs with
    `options`.

    `on_done(i, outcome)` is called here, one at a time, as each cell ends; an outcome's `runner`
    is the cell's label (`langgraph@1.0.0` for a pinned version), and so is its result's.
    """
    groups: dict[str, list[int]] = {}
    for i, (label, _) in enumerate(plan):
        groups.setdefault(label, []).append(i)
    lock = threading.Lock()

    def report(i: int, outcome: RunOutcome) -> None:
        label = plan[i][0]
        outcome.runner = label
        if outcome.result is not None:
            outcome.result.runner = label
        with lock:
            on_done(i, outcome)

    per_lane = max(1, concurrency // max(1, min(jobs, len(groups))))  # the threads of each lane
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(groups))), thread_name_prefix="looplab-env") as pool:
        futures = []
        for label, cells in groups.items():
            try:
                env = env_of(label)
            except LooplabError as exc:  # its environment could not be made: its cells fail, the others run
                _fail({i: plan[i][1] for i in cells}, runner_of(label)[0], report, str(exc))
                continue
            lane_cells = [(i, plan[i][1]) for i in cells]
            futures.append(pool.submit(_lane, env, lane_cells, where, per_lane, report, options, cancel_of))
        for future in futures:
            future.result()


def _lane(
    env: RunnerEnv,
    cells: list[tuple[int, Case]],
    where: Endpoint,
    threads: int,
    report: OnDone,
    options: RunOptions,
    cancel_of: CancelOf | None = None,
) -> None:
    """One lane: start it, feed it its cells (and their cancels, a line each), relay its outcomes; its unfinished
    cells are errors if it dies."""
    runner = env.spec.runner
    job = encode_job(where, [(i, runner, case) for i, case in cells], threads, options)
    left = {i: case for i, case in cells}
    # This module's start bound: a lane of another interpreter may be given its own.
    silent_for = quiet_limit((c for _, c in cells), options, LANE_START_S)
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            [str(env.python), "-m", "looplab.run.lane"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env.child_env(),
            text=True,
            start_new_session=True,  # its own process group, so it and its children can be killed as one
        )
        writing = threading.Lock()

        def tell(line: str) -> None:
            with writing, contextlib.suppress(OSError, ValueError):  # a lane that died (or ended): nothing to tell
                assert proc.stdin is not None
                proc.stdin.write(line)
                proc.stdin.flush()

        switches = [(i, s) for i, _ in cells if cancel_of is not None and (s := cancel_of(i)) is not None]
        forget: list[Callable[[], None]] = []
        try:
            assert proc.stdin is not None and proc.stdout is not None
            tell(job)  # a lane that died at once: its stderr says why, below
            for i, switch in switches:
                forget.append(switch.listen(lambda detail, i=i: tell(encode_cancel(i, detail))))
            lines: queue.Queue[str | None] = queue.Queue()
            threading.Thread(target=_read, args=(proc.stdout, lines), daemon=True).start()
            last_news = time.monotonic()
            while left:
                try:
                    line = lines.get(timeout=POLL_S)
                except queue.Empty:
                    if time.monotonic() - last_news > silent_for:
                        kill_group(proc)
                        _fail(left, runner, report, f"the {env.spec.label} lane was silent for {silent_for:g} s")
                    continue
                if line is None:  # its stdout closed: it ended, with or without every outcome
                    break
                last_news = time.monotonic()
                try:
                    event = json.loads(line)
                except ValueError:  # not one of its events (they are whole lines of JSON)
                    continue
                if (i := event.get("i")) in left:
                    left.pop(i)
                    report(i, decode_outcome(event["outcome"]))
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # its output ended but it did not: it has nothing more to give
                kill_group(proc)
                code = proc.returncode
        except BaseException:
            kill_group(proc)
            raise
        finally:
            for stop_listening in forget:
                stop_listening()
            with writing, contextlib.suppress(OSError):
                proc.stdin.close()  # type: ignore[union-attr]
        if left:
            stderr.seek(0)
            tail = " | ".join(stderr.read().decode("utf-8", "replace").strip().splitlines()[-STDERR_LINES:])
            _fail(left, runner, report, f"the {env.spec.label} lane ended (exit code {code}): {tail or 'no output'}")


def _read(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    """The lane's event lines, then None when its stdout closes."""
    for line in stream:
        if line.startswith("{"):
            lines.put(line)
    lines.put(None)


def _fail(left: dict[int, Case], runner: str, report: OnDone, why: str) -> None:
    for i, case in sorted(left.items()):
        report(i, RunOutcome(runner, case.id, error=why))
    left.clear()
