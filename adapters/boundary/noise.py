"""What a framework says during a run: its warnings, WARNING-level log records and prints, kept with that run.

They belong to the run's record (a framework complaining about a sloppy tool call is part of how it
behaved, a first-run banner is part of what it does), not on the terminal, where they would land in
the middle of a progress bar. The warnings module, the root logger and `sys.stdout`/`sys.stderr` are
process-wide, and several runs may be in flight in one process (`eval --concurrency`), so one hook
serves the whole process and hands each message to the run whose context it was raised in: the run's
thread, the asyncio tasks and the executor threads that copy their context from it (asyncio,
LangChain's executors and looplab's own tool workers all do). A print from anywhere else (the
progress bar, a thread outside every run) goes where it always went.
"""

from __future__ import annotations

import contextvars
import logging
import re
import sys
import threading
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from looplab.shared_tools.records import shorten

__all__ = ["framework_noise"]

#: Longest message kept (a longer one is cut after a whole word).
MESSAGE_CHARS = 500
#: Most printed messages kept from one run (a framework printing every step would otherwise fill the record).
PRINTS_KEPT = 100
#: Terminal colour and cursor codes, which a framework writes when its stream is a terminal.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


class _RunNoise:
    """One run's messages, and how many came from a thread no run owns while other runs were in flight."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.unowned = 0
        self.active = True
        self.prints = 0
        self.prints_dropped = 0
        self._pending: dict[str, str] = {}  # per stream: the text of a line not ended yet
        self._said: dict[str, list[int]] = {}  # a warning's or log record's text: [its index, how many came]
        self._lock = threading.Lock()  # a run's executor threads may print at once

    def said(self, text: str) -> None:
        """A warning or log record of the run: kept once, in the order first said, counting the repeats
        (LlamaIndex warns the same four Pydantic deprecations 31 times a run)."""
        with self._lock:
            if (seen := self._said.get(text)) is not None:
                seen[1] += 1
                return
            self._said[text] = [len(self.messages), 1]
            self.messages.append(text)

    def count_repeats(self) -> None:
        """Each message said more than once says how many times."""
        for index, times in self._said.values():
            if times > 1:
                self.messages[index] += f" ({times} times)"

    def printed(self, stream: str, text: str) -> None:
        """Text the run wrote to `stream`: each write that ends a line is kept as one message."""
        with self._lock:
            text = self._pending.pop(stream, "") + text
            if not text.endswith("\n"):
                self._pending[stream] = text
                return
            self._keep(stream, text)

    def flush(self) -> None:
        """Keep what was printed without a newline at the end."""
        with self._lock:
            for stream, text in self._pending.items():
                self._keep(stream, text)
            self._pending.clear()

    def _keep(self, stream: str, text: str) -> None:
        text = _ANSI.sub("", text).strip()
        if not text:
            return
        if self.prints >= PRINTS_KEPT:
            self.prints_dropped += 1
            return
        self.prints += 1
        self.messages.append(shorten(f"{stream}: {text}", MESSAGE_CHARS))


class _Stream:
    """`sys.stdout` or `sys.stderr` while runs are in flight: a run's writes go to its record, others through.

    Everything but writing (`isatty`, `fileno`, `encoding`, ...) is the stream it stands in for, so a
    framework that asks whether it writes to a terminal gets the true answer.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.target: Any = None  # the stream it stands in for
        self._passing = threading.local()

    def write(self, text: str) -> int:
        run = _owner.get()
        if run is not None and run.active:
            run.printed(self.name, text)
            return len(text)
        if self.target is None:
            return len(text)
        if getattr(self._passing, "on", False):
            # Back here from inside the target: a wrapper that was put around this stream became its
            # target (a progress bar started during a run); the process's own stream ends the loop.
            real = getattr(sys, f"__{self.name}__", None)
            return real.write(text) if real is not None else len(text)
        self._passing.on = True
        try:
            return self.target.write(text)
        finally:
            self._passing.on = False

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        run = _owner.get()
        if (run is None or not run.active) and self.target is not None:
            self.target.flush()

    @property
    def rich_proxied_file(self) -> Any:
        """The file a rich console writes to when this is its stream: this one during a run, else the real one.

        rich looks for this attribute to see through its own progress bar's stand-in (writing to that
        stand-in from a console would print into itself); a framework's console in a run must not see
        through to the terminal.
        """
        run = _owner.get()
        if run is not None and run.active:
            return self
        return getattr(self.target, "rich_proxied_file", self.target)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


_owner: contextvars.ContextVar[_RunNoise | None] = contextvars.ContextVar("looplab_run_noise", default=None)


class _Router(logging.Handler):
    """The process's one hook: a root log handler and `warnings.showwarning`, installed while any run is in flight."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.runs: list[_RunNoise] = []
        self._guard = threading.Lock()
        self._catcher: warnings.catch_warnings | None = None
        self._streams = (_Stream("stdout"), _Stream("stderr"))

    def emit(self, record: logging.LogRecord) -> None:
        self._deliver(f"{record.name}: {record.getMessage()}")

    def _show(self, message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        self._deliver(f"{category.__name__}: {message}")

    def _deliver(self, text: str) -> None:
        text = shorten(text, MESSAGE_CHARS)
        if (run := _owner.get()) is not None:
            run.said(text)
            return
        with self._guard:  # a thread that did not copy a run's context
            if len(self.runs) == 1:
                self.runs[0].said(text)  # the only run in flight: it is that run's
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
                for stream in self._streams:
                    current = getattr(sys, stream.name)
                    if current is not None and current is not stream:
                        stream.target = current
                        setattr(sys, stream.name, stream)
            self.runs.append(run)

    def leave(self, run: _RunNoise) -> None:
        with self._guard:
            run.active = False
            self.runs.remove(run)
            if not self.runs and self._catcher is not None:
                logging.getLogger().removeHandler(self)
                self._catcher.__exit__(None, None, None)
                self._catcher = None
                for stream in self._streams:
                    if getattr(sys, stream.name) is stream:  # not replaced meanwhile (then it is the replacer's)
                        setattr(sys, stream.name, stream.target)


_router = _Router()


@contextmanager
def framework_noise() -> Iterator[list[str]]:
    """Collects what the framework warns, logs (WARNING and up) or prints during the block, for this run alone.

    A warning or log record said again is kept once, and says at the end how many times it came.

    The list is filled as messages come (a print as `stdout: ...` or `stderr: ...` once its line
    ends); a note at the end says how many warnings or log records came from a thread no run owns
    while other runs were in flight (given to none of them rather than to the wrong one).
    """
    run = _RunNoise()
    token = _owner.set(run)
    _router.enter(run)
    try:
        yield run.messages
    finally:
        _router.leave(run)
        _owner.reset(token)
        run.flush()
        run.count_repeats()
        if run.prints_dropped:
            run.messages.append(f"looplab: {run.prints_dropped} more printed line(s) not kept")
        if run.unowned:
            run.messages.append(
                f"looplab: {run.unowned} warning(s) or log record(s) came from a thread outside any run "
                "while other runs were in flight, and are not attributed to this one"
            )
