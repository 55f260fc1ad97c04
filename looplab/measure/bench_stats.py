"""The statistics the bench reports: medians and percentiles as `looplab eval` computes them, a bootstrap interval
of a median, ratios to the baseline."""

from __future__ import annotations

import random
import statistics

#: Resamples for the bootstrap interval of the tax.
BOOTSTRAP_RESAMPLES = 2000


def median(values: list[float]) -> float:
    """The median, as `looplab eval` computes it (0.0 for no values, so a table never breaks)."""
    from looplab.records.summary import median

    return median(values) or 0.0


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile, as `looplab eval` computes it."""
    from looplab.records.summary import percentile

    return percentile(values, 95) or 0.0


def median_interval(
    values: list[float], confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float] | None:
    """A percentile-bootstrap interval of the median of `values` (None under two values).

    Seeded, so the same measurements give the same interval; the pairs are what is resampled, so the
    interval says how far another run of the same bench could put the median.
    """
    if len(values) < 2:
        return None
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    tail = (1 - confidence) / 2
    return medians[int(tail * resamples)], medians[min(resamples - 1, int((1 - tail) * resamples))]


def ratio(value: float, base: float) -> float | None:
    """`value` as a multiple of `base`, to two places (None when `base` is not positive)."""
    return round(value / base, 2) if base > 0 else None


def rounded(interval: tuple[float, float] | None, digits: int) -> tuple[float, float] | None:
    """Both ends of `interval` rounded to `digits` places (None stays None)."""
    return None if interval is None else (round(interval[0], digits), round(interval[1], digits))
