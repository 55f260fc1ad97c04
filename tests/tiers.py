"""Helpers for the suite's two tiers (tests/conftest.py defines them): which cells of a matrix over runners run in
the fast tier, and how many examples a costly Hypothesis test takes from the loaded profile."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

__all__ = ["BUSY_MACHINE_S", "FAST_TIER_RUNNER", "by_tier", "scaled_examples"]

#: Seconds a test's bound on elapsed time allows past what the code promises, so the fast tier passes on a 2-core
#: machine busy with other work: at a load of 3, a process's exit there was seen to take 2.3 s where the promise is
#: 2 s, and a search bounded at 1.5 s to return after 4.8 s. Past the promise plus this, something has hung.
BUSY_MACHINE_S = 4.0
#: The runner whose cells of a matrix over runners run in the fast tier; the others' run with `pytest --full`.
FAST_TIER_RUNNER = "handrolled"
_PARAMETER_SET = type(pytest.param())


def by_tier(cells: Iterable[object]) -> list[Any]:
    """The cells of a matrix whose first value is a runner, each marked `full` unless its runner is FAST_TIER_RUNNER.

    A cell is a runner's name, a tuple starting with it, or a `pytest.param` of either.
    """
    tiered = []
    for cell in cells:
        if isinstance(cell, _PARAMETER_SET):
            values, marks, id_ = cell.values, list(cell.marks), cell.id
        else:
            values, marks, id_ = (cell if isinstance(cell, tuple) else (cell,)), [], None
        if values[0] != FAST_TIER_RUNNER:
            marks.append(pytest.mark.full)
        tiered.append(pytest.param(*values, marks=marks, id=id_))
    return tiered


def scaled_examples(share: float) -> int:
    """`share` of the loaded profile's examples per test, at least one: for a test whose every example is costly.

    Read when the test module is imported, after tests/conftest.py has loaded the tier's profile.
    """
    from hypothesis import settings  # here: a runner environment imports this module without Hypothesis

    return max(1, round(settings.default.max_examples * share))
