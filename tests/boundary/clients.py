"""Clients a boundary test makes, closed when the test ends (`tests/boundary/conftest.py`): one left to the garbage
collector leaves its socket open, and the warning lands on whichever test runs then."""

from __future__ import annotations

from typing import Protocol


class _Closable(Protocol):
    def close(self) -> None: ...


#: The clients the running test made, in the order it made them.
OPENED: list[_Closable] = []


def closed_at_end(*clients: _Closable) -> None:
    """Close `clients` when the running test ends, the last made first."""
    OPENED.extend(clients)


def close_all() -> None:
    while OPENED:
        OPENED.pop().close()
