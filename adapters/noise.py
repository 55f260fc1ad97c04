"""What a framework says during a run: its warnings and WARNING-level log records, kept with that run.

They belong to the run's record (a framework complaining about a sloppy tool call is part of how it
behaved), not on the terminal. The warnings module and the root logger are process-wide, and several
runs may be in flight in one process (`eval --concurrency`), so one hook serves the whole process and
hands each message to the run whose context it was raised in: the run's thread, the asyncio tasks
and the executor threads that copy their context from it (asyncio, LangChain's executors and
looplab's own tool workers all do).
"""

from __future__ import annotations

import contextvars
import logging
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Longest message kept.
MESSAGE_CHARS = 500


class _RunNoise:
    """One run's messages, and how many came from a thread no run owns while other runs were in flight."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.unowned = 0


_owner: contextvars.ContextVar[_RunNoise | None] = contextvars.ContextVar("looplab_run_noise", default=None)


class _Router(logging.Handler):
    """The process's one hook: a root log handler and `warnings.showwarning`, installed while any run is in flight."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.runs: list[_RunNoise] = []
        self._guard = threading.Lock()
        self._catcher: warnings.catch_warnings | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self._deliver(f"{record.name}: {record.getMessage()}")

    def _show(self, message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        self._deliver(f"{category.__name__}: {message}")

    def _deliver(self, text: str) -> None:
        text = text[:MESSAGE_CHARS]
        if (run := _owner.get()) is not None:
            run.messages.append(text)
            return
        with self._guard:  # a thread that did not copy a run's context
            if len(self.runs) == 1:
                self.runs[0].messages.append(text)  # the only run in flight: it is that run's
            else:
                for other in self.runs:
                    other.unowned += 1

    def enter(self, run: _RunNoise) -> None:
        with self._guard:
            if not self.runs:  # the first run in flight: take over the process's warnings and root logger
                self._catcher = warnings.catch_warnings()
                self._catcher.__enter__()  # saves the filters and showwarning, restored on the last leave
                warnings.simplefilter("always")
                # Except ResourceWarning, ignored as Python's default filters do: it is raised by a finalizer
                # when the collector runs, in whichever run's context that happens, for an object that can
                # be any run's (or none's), so it would land in the record of a run that did not cause it.
                warnings.simplefilter("ignore", ResourceWarning)
                warnings.showwarning = self._show
                logging.getLogger().addHandler(self)
            self.runs.append(run)

    def leave(self, run: _RunNoise) -> None:
        with self._guard:
            self.runs.remove(run)
            if not self.runs and self._catcher is not None:
                logging.getLogger().removeHandler(self)
                self._catcher.__exit__(None, None, None)
                self._catcher = None


_router = _Router()


@contextmanager
def framework_noise() -> Iterator[list[str]]:
    """Collects what the framework warns or logs (WARNING and up) during the block, for this run alone.

    The list is filled as messages come; a note at the end says how many came from a thread no run
    owns while other runs were in flight (given to none of them rather than to the wrong one).
    """
    run = _RunNoise()
    token = _owner.set(run)
    _router.enter(run)
    try:
        yield run.messages
    finally:
        _router.leave(run)
        _owner.reset(token)
        if run.unowned:
            run.messages.append(
                f"looplab: {run.unowned} warning(s) or log record(s) came from a thread outside any run "
                "while other runs were in flight, and are not attributed to this one"
            )
