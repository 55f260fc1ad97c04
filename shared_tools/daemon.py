"""Daemon worker threads, started as needed and reused.

For work a caller may stop waiting for (a tool past the run's deadline, a model reply to a
request that was cancelled): a daemon thread does not keep the process alive at exit, where
the standard library's thread pools join theirs, and a reused one costs a queue hand-off
rather than a thread start.
"""

from __future__ import annotations

import contextvars
import functools
import queue
import threading
from collections.abc import Callable

__all__ = ["DaemonPool"]


class DaemonPool:
    """Runs each submitted job on a free daemon thread, starting one when none is free."""

    def __init__(self, name: str = "looplab-worker") -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0  # workers free to take a job not yet promised to one
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        """Run `job()` soon, in a copy of the caller's context (as asyncio runs a task); it must not raise."""
        job = functools.partial(contextvars.copy_context().run, job)
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1
        self._jobs.put(job)
        if start:
            threading.Thread(target=self._work, name=self._name, daemon=True).start()

    def _work(self) -> None:
        while True:
            self._jobs.get()()
            with self._lock:
                self._idle += 1
