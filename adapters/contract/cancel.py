"""A run's cancel switch: what a caller holds to stop one run among many, from any thread or task."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Cancellation"]


class Cancellation:
    """Set once, from any thread; everything that listens hears of it once, at once or when it starts listening.

    A run's session listens (it refuses the next model call, cuts the exchange in flight, ends the tool that
    runs and the test processes it started, and the runner process), so the run ends as `cancelled` with its
    partial trace.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str], None]] = []
        self.detail = ""

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, detail: str = "cancelled by the caller") -> None:
        """Cancel (a second call does nothing); the listeners are called on this thread."""
        with self._lock:
            if self._event.is_set():
                return
            self.detail = detail
            self._event.set()
            listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener(detail)

    def listen(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call `listener(detail)` on cancel (now, if already cancelled); returns what stops listening."""
        with self._lock:
            if not self._event.is_set():
                self._listeners.append(listener)
                return lambda: self._forget(listener)
        listener(self.detail)
        return lambda: None

    def wait(self, timeout: float | None = None) -> bool:
        """Whether it was cancelled within `timeout` seconds."""
        return self._event.wait(timeout)

    def _forget(self, listener: Callable[[str], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)
