"""Two runners compared over the same cases and repeats: which of their differences hold at 95 %.

A pair is one case, one repeat (and one model, wire API and stream) that both runners ran. Against a model that
varies, repeat k of every runner meets the same luck where the model's noise is seeded by the case and the repeat
(the scripted `noisy` persona), and the same day's provider otherwise; pairing takes out what the case and the
repeat add, so fewer repeats tell two runners apart than comparing their rates alone would.

Each metric is compared by sign, pair by pair (`intervals.sign_test`): pass/fail pairs by McNemar's exact test on the
pairs where one passed and the other did not; model calls, tokens, cost and wall time by the sign test on the pairs
where they differ. A difference is named only where that test holds at 95 %; otherwise the comparison says how
many repeats would resolve it if the spread held (`intervals.repeats_to_resolve`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations

from looplab.adapters.contract.result import RunResult
from looplab.records.document import CellRecord, Document
from looplab.records.intervals import LEVEL, SignCounts, median_interval, repeats_to_resolve, sign_test

__all__ = ["Comparison", "compare_runners", "repeats_of"]


#: What is compared, by name, and how a cell gives it (None: the cell has none: it did not run, or its cost is
#: unknown). Pass rate first: it is what a team chooses by.
METRICS: dict[str, Callable[[CellRecord, RunResult | None], float | None]] = {
    "pass rate": lambda cell, _: None if cell.passed is None else float(cell.passed),
    "model calls": lambda _, r: None if r is None else float(r.totals.model_calls),
    "tokens": lambda _, r: None if r is None else float(r.totals.input_tokens + r.totals.output_tokens),
    "cost": lambda _, r: None if r is None else r.totals.cost_usd,
    "time": lambda _, r: None if r is None else r.totals.wall_s,
}


@dataclass(frozen=True)
class Comparison:
    """One metric of two runners over their pairs: how often the first was above the second, and what that holds."""

    metric: str
    first: str
    second: str
    #: The pairs counted by sign of first minus second (for pass rate: first passed and second did not, ...).
    counts: SignCounts
    #: The most times any case ran for both: what "after N repeats" counts.
    repeats: int
    #: The exact two-sided p-value of the counts (`intervals.sign_test`).
    p_value: float
    #: What each runner's values over the pairs come to, first's then second's: passes for the pass rate, else the
    #: median.
    shown: tuple[float, float]
    #: Over the pairs where the two differ, first minus second: the median difference and its 95 % interval
    #: (`intervals.median_interval`; it leaves 0 out exactly where the sign test holds). None where fewer than 6 pairs
    #: differ (too few for a 95 % interval), and for the pass rate, whose differences are all 1 or -1.
    difference: tuple[float, float, float] | None = None

    @property
    def distinguishable(self) -> bool:
        """Whether the difference holds at 95 %."""
        return self.counts.distinguishable

    @property
    def higher(self) -> str | None:
        """The runner above the other in more pairs (None: as many each way)."""
        if self.counts.above == self.counts.below:
            return None
        return self.first if self.counts.above > self.counts.below else self.second

    @property
    def repeats_needed(self) -> int | None:
        """The repeats that would tell them apart if the spread held (`repeats` when they already are; None: no
        number would, up to `intervals.MAX_REPEATS`)."""
        return repeats_to_resolve(self.counts, self.repeats)


def _shown(metric: str, first: list[float], second: list[float]) -> tuple[float, float]:
    if metric == "pass rate":
        return sum(first), sum(second)
    return statistics.median(first), statistics.median(second)


def _difference(differences: list[float]) -> tuple[float, float, float] | None:
    differ = [d for d in differences if d]
    interval = median_interval(differ) if differ else None
    if interval is None or interval.confidence < LEVEL:
        return None
    return statistics.median(differ), interval.low, interval.high


def repeats_of(doc: Document) -> int:
    """The most times any one cell ran (same runner, case, model, wire API and stream): 1 without repeats."""
    seen: dict[tuple[object, ...], int] = {}
    for cell in doc.cells:
        key = (cell.runner, cell.case, cell.model, cell.api, cell.stream)
        seen[key] = seen.get(key, 0) + 1
    return max(seen.values(), default=0)


def compare_runners(doc: Document, runners: Sequence[str] | None = None) -> list[Comparison]:
    """Every pair of `runners` (default: the document's, in its order), every metric both have values for on two
    pairs or more, in the order runner pair by pair, then `METRICS`."""
    names = list(runners) if runners is not None else list(dict.fromkeys(c.runner for c in doc.cells))
    # Each cell's values read once, into columns aligned on every key any runner has (a result's fields are slow to
    # reach through the document, and the pairs of runners many: each pair is then two columns zipped).
    keys: dict[tuple[object, ...], int] = {}
    cells: dict[str, dict[int, CellRecord]] = {name: {} for name in names}
    for cell in doc.cells:
        slot = keys.setdefault((cell.case, cell.repeat, cell.model, cell.api, cell.stream), len(keys))
        if cell.runner in cells:  # the first of a key wins: a merged document's other runner version is later
            cells[cell.runner].setdefault(slot, cell)
    results = doc.run_results()
    columns: dict[str, list[list[float | None]]] = {}
    for name in names:
        rows = [cells[name].get(slot) for slot in range(len(keys))]
        found_rows = [(c, None if c is None or c.result is None else results[c.result]) for c in rows]
        columns[name] = [
            [None if c is None else value_of(c, r) for c, r in found_rows] for value_of in METRICS.values()
        ]
    case_of = [key[0] for key in keys]
    found = []
    for first, second in combinations(names, 2):
        both = [case_of[slot] for slot in cells[first] if slot in cells[second]]
        repeats = max(Counter(both).values(), default=0)
        for metric, mine, theirs in zip(METRICS, columns[first], columns[second], strict=True):
            pairs = [(x, y) for x, y in zip(mine, theirs, strict=True) if x is not None and y is not None]
            if len(pairs) < 2:
                continue
            differences = [x - y for x, y in pairs]
            counts = SignCounts.of(differences)
            found.append(
                Comparison(
                    metric=metric,
                    first=first,
                    second=second,
                    counts=counts,
                    repeats=repeats,
                    p_value=sign_test(counts.above, counts.below),
                    shown=_shown(metric, [x for x, _ in pairs], [y for _, y in pairs]),
                    difference=None if metric == "pass rate" else _difference(differences),
                )
            )
    return found
