"""What a process must end before it exits: open workspaces, test process groups and runner processes still running."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["WAIT_SLICE_S", "Live", "kill_process_group"]

#: The longest a run's wait (a model exchange's read, a tool, a runner process) goes before it looks again at
#: whether the run was cancelled: what makes a cancelled run stop within a second.
WAIT_SLICE_S = 0.2

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
