"""How fast requests may go to the model: one pacer for every run in flight, in every worker process.

Two rules, both applied at the model boundary before a request is sent:

- `--rpm N`: requests are spaced 60/N seconds apart, across every run in flight;
- a 429 with `retry-after` holds every request back until that time, not only the retry of the run
  that got it (the SDK's own backoff handles that one; the others would each hit the limit too).

The schedule is one number, the earliest time the next request may go, kept in shared memory when
the runs are spread over worker processes. `time.monotonic()` is the system-wide boot clock on
Linux, so every process reads the same timeline.
"""

from __future__ import annotations

import email.utils
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Pacer", "current", "install"]

#: The longest hold a 429's retry-after may impose (a server asking for an hour is not waited for here:
#: the run's own deadline decides).
MAX_HOLD_S = 600.0


class Pacer:
    """Spaces requests `60/rpm` seconds apart and holds them after a 429; thread- (and process-) safe.

    `shared` is a `multiprocessing` double `Value` (with its lock) that worker processes inherit;
    without it the schedule is this process's alone.
    """

    def __init__(self, rpm: int | None = None, shared: Any = None, clock: Callable[[], float] = time.monotonic) -> None:
        if rpm is not None and rpm < 1:
            raise ValueError("rpm must be at least 1")
        self.rpm, self.clock = rpm, clock
        self._shared = shared
        self._lock = shared.get_lock() if shared is not None else threading.Lock()
        self._next = 0.0  # used without `shared`

    @property
    def interval_s(self) -> float:
        return 0.0 if self.rpm is None else 60.0 / self.rpm

    def _get(self) -> float:
        return self._shared.value if self._shared is not None else self._next

    def _set(self, value: float) -> None:
        if self._shared is not None:
            self._shared.value = value
        else:
            self._next = value

    def reserve(self, deadline: float) -> float | None:
        """Take the next slot and return how long to wait for it; None if it comes after `deadline` (not taken)."""
        with self._lock:
            now = self.clock()
            slot = max(now, self._get())
            if slot > deadline:
                return None
            self._set(slot + self.interval_s)
        return slot - now

    def hold(self, seconds: float) -> None:
        """No request before `seconds` from now (a 429's retry-after)."""
        seconds = min(max(seconds, 0.0), MAX_HOLD_S)
        with self._lock:
            self._set(max(self._get(), self.clock() + seconds))


def retry_after_s(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> float | None:
    """Seconds a response asks to wait: `retry-after-ms`, else `retry-after` (seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        if (ms := lowered.get("retry-after-ms")) is not None and math.isfinite(value := float(ms)):
            return max(value / 1000, 0.0)
    except ValueError:
        pass
    if (text := lowered.get("retry-after")) is None:
        return None
    try:
        value = float(text)
        return max(value, 0.0) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return max(when.timestamp() - now(), 0.0) if when is not None else None


_current = Pacer()


def current() -> Pacer:
    """The pacer for this process's runs (no rpm limit unless `install`ed with one)."""
    return _current


def install(pacer: Pacer) -> None:
    """Use `pacer` for every run this process starts from now on."""
    global _current
    _current = pacer
