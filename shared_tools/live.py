"""What a process must end before it exits: open workspaces, test process groups and runner processes still running."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Live", "WAIT_SLICE_S"]

#: The longest a run's wait (a model exchange's read, a tool, a runner process) goes before it looks again at
#: whether the run was cancelled: what makes a cancelled run stop within a second.
WAIT_SLICE_S = 0.2
#: Seconds a reaper leading a process group may take, once hung up, to kill what its command started and exit
#: (its kill rounds are bounded at 0.2 s); then the group is killed whole.
LEADER_WAIT_S = 0.5
#: Where a confined process group is led by a reaper (`shared_tools/reaper.py`), which SIGHUP tells to end.
_REAPED = sys.platform.startswith("linux")

T = TypeVar("T")


class Live(Generic[T]):
    """A thread-safe set of things still open or running, and how to end one.

    `end_all(for_good=True)` ends every one and, from then on, ends anything added at once: a
    process that is exiting (Ctrl-C, SIGTERM) must not leave behind what a still-running thread
    starts after the cleanup. `settle`, when given, waits for one thing to be gone after it was
    told to end: `end_all` tells every one first and then settles each, so ending many takes about
    as long as ending one.
    """

    def __init__(self, end: Callable[[T], None], settle: Callable[[T], None] | None = None) -> None:
        self._end = end
        self._settle = settle
        self._items: set[T] = set()
        self._lock = threading.Lock()
        self._ending = False

    def add(self, item: T) -> bool:
        """Track `item`; False (and `item` ended) if the process is already ending."""
        with self._lock:
            if not self._ending:
                self._items.add(item)
                return True
        self._finish([item])
        return False

    def discard(self, item: T) -> None:
        with self._lock:
            self._items.discard(item)

    def end_all(self, *, for_good: bool = False) -> int:
        """End everything tracked (`for_good`: and everything added later); how many there were."""
        with self._lock:
            items, self._items = set(self._items), set()
            self._ending = self._ending or for_good
        self._finish(items)
        return len(items)

    def _finish(self, items: set[T] | list[T]) -> None:
        for item in items:
            self._end(item)
        if self._settle is not None:
            for item in items:
                self._settle(item)


def kill_process_group(pgid: int) -> None:
    """SIGKILL every process of the group `pgid` (gone already, or not ours: nothing to do)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def hang_up(pgid: int) -> None:
    """Tell the group `pgid` to end at once: SIGHUP to its leader, a reaper that SIGKILLs everything its command
    started, in whatever session, and exits (where no reaper leads it: SIGKILL to the group).

    The first half of ending a confined process (`Live(hang_up, end_group)`): told first, every group ends at once.
    """
    if not _REAPED:
        kill_process_group(pgid)
        return
    try:
        os.kill(pgid, signal.SIGHUP)
    except (ProcessLookupError, PermissionError):
        pass


def end_group(pgid: int) -> None:
    """Once the leader of group `pgid` has ended (or `LEADER_WAIT_S` has passed), SIGKILL what is left in the group."""
    ends = time.monotonic() + LEADER_WAIT_S
    while _REAPED and not _ended(pgid) and time.monotonic() < ends:
        time.sleep(0.005)
    kill_process_group(pgid)


def _ended(pid: int) -> bool:
    """Whether `pid` has exited (reaped, or a zombie until its parent reaps it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rpartition(b")")[2].split()[:1]
    except OSError:
        return True
    return state in ([b"Z"], [b"X"])
