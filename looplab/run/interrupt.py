"""Ctrl-C and SIGTERM: a command stops at once, keeps what finished, and leaves nothing behind.

Inside `keep_finished`, SIGINT and SIGTERM raise `Interrupted` in the main
thread (where looplab waits on its runs). The command then kills every test
process group and runner process still running (with whatever a runner
process started), removes every workspace and runner scratch folder still
open, ends its worker processes, writes the results that finished (marked incomplete),
prints one line and exits with 128 + the signal's number. It exits at once,
without waiting for the runs still going: their framework threads cannot be
stopped from outside, and what they would add is not a finished result.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from looplab.adapters.boundary.processes import keep_keys_from_children, live_children, live_folders
from looplab.adapters.contract.errors import Interrupted
from looplab.shared_tools import Workspace
from looplab.shared_tools.tools import live_tests

__all__ = ["keep_finished"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _raise(signum: int, frame: FrameType | None) -> None:
    for sig in SIGNALS:  # a second Ctrl-C must not cut the cleanup short
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


def _end_local() -> tuple[int, int, int]:
    """End this process's test process groups and runner processes, remove its folders; how many of each."""
    groups = live_tests.end_all(for_good=True)
    runners = live_children.end_all(for_good=True)
    live_folders.end_all(for_good=True)  # after the runner processes that wrote in them have gone
    return groups, runners, Workspace.close_all(for_good=True)


def clean_up() -> str:
    """Kill every test process group, runner process and worker process, remove every workspace and
    runner folder; say what was done."""
    workers = multiprocessing.active_children()
    for child in workers:
        child.terminate()  # a worker's own SIGTERM handler cleans up after itself (see `worker_signals`)
    groups, runners, removed = _end_local()
    for child in workers:
        child.join(timeout=1.0)
        if child.is_alive():
            child.kill()
    if workers:  # what a normal exit runs: the pool's semaphores unlinked (else the resource tracker warns)
        multiprocessing.util._exit_function()  # type: ignore[attr-defined]
    parts = [f"{removed} workspace{'s' * (removed != 1)} removed"]
    if groups:
        parts.append(f"{groups} test process group{'s' * (groups != 1)} killed")
    if runners:
        parts.append(f"{runners} runner process{'es' * (runners != 1)} ended")
    if workers:
        parts.append(f"{len(workers)} worker process{'es' * (len(workers) != 1)} ended")
    return ", ".join(parts)


@contextmanager
def keep_finished(save: Callable[[Interrupted], str | None]) -> Iterator[None]:
    """Run the block; on SIGINT or SIGTERM, clean up, `save` what finished, print one line and exit.

    `save` writes the finished results (marked incomplete) and returns where they went, or None.
    Exits the process with 128 + the signal's number; nothing after the block runs. A process holding
    a provider key is made unreadable to its children first (`keep_keys_from_children`).
    """
    keep_keys_from_children()
    previous = {sig: signal.signal(sig, _raise) for sig in SIGNALS}
    try:
        yield
    except Interrupted as stop:
        done = clean_up()
        try:
            where = save(stop)
        except Exception as exc:  # the line below still says what happened
            where = f"not written ({type(exc).__name__}: {exc})"
        kept = f"; finished results: {where}" if where else ""
        print(f"looplab: interrupted by {stop.name}; {done}{kept}", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        # At once: a framework's own threads (an HTTP pool, a trace exporter) must not hold the exit.
        os._exit(stop.exit_code)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends; processes started inside inherit the block.

    A worker started with Ctrl-C blocked cannot die of it (with a traceback) before `worker_signals`
    has set it to be ignored; a signal meant for this process is handled when the block ends.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def worker_signals() -> None:
    """In a worker process of the matrix: ignore Ctrl-C (the parent decides), end cleanly on SIGTERM, and keep
    a provider key from the children it starts."""

    def end(signum: int, frame: FrameType | None) -> None:
        _end_local()
        os._exit(128 + signum)

    keep_keys_from_children()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, end)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
