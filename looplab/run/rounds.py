"""Repeats that stop early (`looplab eval --repeat-until WIDTH`): each cell repeated until its pass rate's 95 %
interval is at most WIDTH wide, or until the most repeats allowed.

The matrix runs in rounds. The first gives every cell the runs an interval that narrow needs at best (every run
passing, or every run failing); each later one gives a cell still too wide the runs it would need if its pass rate
so far held (`intervals.runs_for_width`), so a cell that is settled spends nothing more and one that is not gets
there in a round or two, not one run at a time (each round is one matrix: its worker processes start once).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from looplab.records.intervals import runs_for_width, wilson
from looplab.records.outcome import RunOutcome

__all__ = ["first_round", "next_round", "tally"]

#: One cell's runs so far: (passed, runs).
Tally = tuple[int, int]


def tally(outcomes: Iterable[RunOutcome]) -> dict[tuple[str, str], Tally]:
    """Each (runner, case)'s passes and runs among `outcomes`."""
    found: dict[tuple[str, str], Tally] = {}
    for o in outcomes:
        passed, runs = found.get((o.runner, o.case), (0, 0))
        found[o.runner, o.case] = (passed + o.passed, runs + 1)
    return found


def first_round(width: float, most: int) -> int:
    """The runs every cell gets first: as many as the narrowest interval (every run alike) needs, at least 2."""
    return min(most, max(2, runs_for_width(1.0, width, most)))


def next_round(tallies: Mapping[tuple[str, str], Tally], width: float, most: int) -> dict[tuple[str, str], int]:
    """The cells whose interval is still wider than `width`, each with the runs it should have after the next round:
    what its pass rate so far needs, one more at least, `most` at most. Empty: every cell is settled."""
    more = {}
    for cell, (passed, runs) in tallies.items():
        if runs >= most or wilson(passed, runs).width <= width:
            continue
        more[cell] = min(most, max(runs + 1, runs_for_width(passed / runs, width, most)))
    return more
