"""The tables of docs/repeats.md ("How many repeats a comparison needs"), computed by the statistics `looplab eval
--repeat` uses (`looplab.records.intervals`), so that every number the page shows is the code's.

- `wilson`: a pass count's 95 % interval (`intervals.wilson`), and how `eval` shows it;
- `pass-rates`: the repeats that tell two pass rates apart by McNemar's exact test (`intervals.repeats_to_resolve`),
  from the pairs each way two independent runners would give, and from those of runners that fail together;
- `signs`: the same for a number (tokens, time) by the sign test, from the share of pairs one way;
- `medians`: which runs a median's interval spans, and what it holds (`intervals.median_interval`);
- `until`: the runs `--repeat-until WIDTH` gives a cell, if its pass rate held (`intervals.runs_for_width`).

The page holds each table between a marker line, `<!-- repeats:NAME -->`, and `<!-- /repeats -->`. `fill` puts what
`tables` renders now between them; `python -m looplab.views.repeats_page [PAGE]` writes the page so, and
tests/project/test_repeats_page.py holds the page to it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from looplab.records.intervals import (
    MAX_REPEATS,
    SignCounts,
    median_interval,
    repeats_to_resolve,
    runs_for_width,
    wilson,
)
from looplab.views.eval_tables import pass_rate

#: Pass counts out of runs, as a team sees them after a few repeats.
PASS_COUNTS = ((5, 5), (4, 5), (10, 10), (8, 10), (20, 20), (16, 20), (50, 50), (40, 50))
#: Two runners' pass rates, the better first.
RATE_GAPS = ((0.95, 0.8), (0.9, 0.7), (0.8, 0.6), (0.9, 0.8), (0.6, 0.5))
#: The share of paired runs in which one runner's number is above the other's.
SHARES = (0.9, 0.8, 0.7, 0.6)
#: Runs of one runner on one case.
MEDIAN_RUNS = (3, 4, 5, 6, 10, 20, 50)
#: `--repeat-until` widths, and the pass rates a cell might hold.
WIDTHS = (0.4, 0.3, 0.2)
UNTIL_RATES = (1.0, 0.9, 0.7, 0.5)

MARKER = re.compile(r"<!-- repeats:([a-z-]+) -->\n.*?<!-- /repeats -->", re.S)
END = "<!-- /repeats -->"
PAGE = Path("docs") / "repeats.md"


def _table(header: list[str], rows: list[list[str]], align: str) -> str:
    """A Markdown table, each column aligned as `align` says, a letter a column: `l`eft or `r`ight."""
    lines = [header, ["---:" if a == "r" else "---" for a in align], *rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def _pct(value: float) -> str:
    return f"{value * 100:.0f} %"


def _ordinal(k: int, end: str) -> str:
    """`smallest`, `2nd smallest`, `18th smallest`, ..."""
    if k == 1:
        return end
    suffix = "th" if k % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix} {end}"


def repeats_to_tell(above: float, below: float) -> int | None:
    """The repeats of one case at which paired runs split `above` one way and `below` the other (shares of the pairs,
    the rest tied) tell the two runners apart at 95 % by the exact sign test: `intervals.repeats_to_resolve` on one
    repeat's expected counts (fractions of a pair), scaled, each count rounded to whole pairs."""
    one_repeat = SignCounts(above, 1 - above - below, below)  # type: ignore[arg-type]  # expected, not counted
    return repeats_to_resolve(one_repeat, 1, lambda counts: counts.scaled(1).distinguishable)


def _repeats(n: int | None) -> str:
    return "—" if n is None else f"{n:,}"


def wilson_table() -> str:
    rows = []
    for passed, runs in PASS_COUNTS:
        interval = wilson(passed, runs)
        rows.append(
            [
                f"{passed}/{runs}",
                f"{interval.low * 100:.0f}–{_pct(interval.high)}",
                f"{interval.width * 100:.0f} points",
                f"`{pass_rate(passed, runs, interval.ends)}`",
            ]
        )
    return _table(["passed", "95 % interval of the pass rate", "width", "as `eval` shows it"], rows, "lrrl")


def pass_rates_table() -> str:
    rows = []
    for first, second in RATE_GAPS:
        only_first, only_second = first * (1 - second), second * (1 - first)
        rows.append(
            [
                _pct(first),
                _pct(second),
                f"{only_first * 100:.0f} and {only_second * 100:.0f}",
                _repeats(repeats_to_tell(only_first, only_second)),
                _repeats(repeats_to_tell(first - second, 0.0)),
            ]
        )
    header = [
        "A passes",
        "B passes",
        "of 100 pairs: only A passes, only B passes",
        "repeats, independent runs",
        "repeats, B never passes where A fails",
    ]
    return _table(header, rows, "rrrrr")


def signs_table() -> str:
    rows = []
    for share in SHARES:
        needed = repeats_to_tell(share, 1 - share)
        split = "—"
        if needed is not None:
            counts = SignCounts(share, 0, 1 - share).scaled(needed)  # type: ignore[arg-type]
            split = f"{counts.above} and {counts.below}"
        rows.append([_pct(share), _repeats(needed), split])
    return _table(["A above B in", "repeats", "pairs each way then"], rows, "rrr")


def medians_table() -> str:
    rows = []
    for runs in MEDIAN_RUNS:
        interval = median_interval(range(1, runs + 1))  # the values are their ranks
        low = int(interval.low)
        spans = f"{_ordinal(low, 'smallest')} to the {_ordinal(low, 'largest')}"
        rows.append([str(runs), spans, f"{interval.confidence * 100:.1f} %"])
    return _table(["runs", "the interval runs from the", "holds the median"], rows, "rlr")


def until_table() -> str:
    rows = [
        [f"{width:g}", *(_repeats(runs_for_width(rate, width, MAX_REPEATS)) for rate in UNTIL_RATES)]
        for width in WIDTHS
    ]
    return _table(["`--repeat-until`", *(f"passes {_pct(rate)}" for rate in UNTIL_RATES)], rows, "rrrrr")


def tables() -> dict[str, str]:
    """Each table of the page, by its marker's name."""
    return {
        "wilson": wilson_table(),
        "pass-rates": pass_rates_table(),
        "signs": signs_table(),
        "medians": medians_table(),
        "until": until_table(),
    }


def fill(page: str) -> str:
    """`page` with what `tables` renders now between each pair of markers (an unknown name is an error)."""
    made = tables()

    def put(found: re.Match[str]) -> str:
        name = found[1]
        if name not in made:
            raise ValueError(f"the page names a table there is none of: {name!r} (known: {', '.join(made)})")
        return f"<!-- repeats:{name} -->\n\n{made[name]}\n\n{END}"

    return MARKER.sub(put, page)


def main(argv: list[str]) -> int:
    """Write the tables into the page named (default docs/repeats.md); say whether it changed."""
    path = Path(argv[0]) if argv else PAGE
    before = path.read_text(encoding="utf-8")
    after = fill(before)
    if after != before:
        path.write_text(after, encoding="utf-8")
    print(f"{path}: {'tables written' if after != before else 'tables already current'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
