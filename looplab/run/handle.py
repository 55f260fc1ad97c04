"""A run started in the background: a handle to cancel it from any thread or task, and to wait for its outcome."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Generator
from concurrent.futures import Future
from typing import Any

from looplab.adapters.contract.cancel import Cancellation
from looplab.records.outcome import RunOutcome
from looplab.run.harness import Endpoint, run_one
from looplab.run.options import RunOptions
from looplab.scenarios.cases import Case

__all__ = ["Cancels", "RunHandle", "start"]


class RunHandle:
    """One run in flight. `cancel()` ends it as `cancelled` within a second, with its partial trace, its test and
    runner processes ended and its workspace removed; `outcome()` waits for it (`await handle` in a task)."""

    def __init__(self, runner: str, case: Case, cancellation: Cancellation, future: Future[RunOutcome]) -> None:
        self.runner, self.case = runner, case
        self.cancellation = cancellation
        self._future = future

    def cancel(self, detail: str = "cancelled by the caller") -> None:
        """Stop the run (safe from any thread, and more than once); `outcome()` then returns it as `cancelled`."""
        self.cancellation.cancel(detail)

    def done(self) -> bool:
        return self._future.done()

    def outcome(self, timeout: float | None = None) -> RunOutcome:
        """The run's outcome, once it ended; `TimeoutError` if it did not within `timeout` seconds."""
        return self._future.result(timeout)

    def __await__(self) -> Generator[Any, None, RunOutcome]:
        return asyncio.wrap_future(self._future).__await__()


class Cancels:
    """Cancel switches for the cells of a matrix (`run_matrix(cancels=)`, `looplab eval`'s library side), by runner,
    case id and repeat: `cancel(...)` from any thread ends that cell as `cancelled`, before or while it runs, in this
    process, a worker process or a runner environment's lane; the other cells go on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._switches: dict[tuple[str, str, int], Cancellation] = {}

    def of(self, runner: str, case: str, repeat: int = 1) -> Cancellation:
        """The cell's switch (made on first ask)."""
        with self._lock:
            return self._switches.setdefault((runner, case, repeat), Cancellation())

    def cancel(self, runner: str, case: str, repeat: int = 1, detail: str = "cancelled by the caller") -> None:
        """Cancel one cell (`runner` as the matrix names it, `langgraph@1.0.0` for a pinned version)."""
        self.of(runner, case, repeat).cancel(detail)


def start(runner: str, case: Case, where: Endpoint, options: RunOptions | None = None, **given: Any) -> RunHandle:
    """`run_one(runner, case, where, options, **given)` on a thread of its own; the handle cancels it and waits for
    it."""
    options = RunOptions.of(options, **given)
    cancellation = Cancellation()
    future: Future[RunOutcome] = Future()

    def run() -> None:
        try:
            future.set_result(run_one(runner, case, where, options, cancel=cancellation))
        except BaseException as exc:  # run_one never raises; a bug here still reaches the caller
            future.set_exception(exc)

    threading.Thread(target=run, name=f"looplab-start-{runner}-{case.id}", daemon=True).start()
    return RunHandle(runner, case, cancellation, future)
