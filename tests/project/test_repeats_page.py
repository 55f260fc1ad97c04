"""docs/repeats.md, "How many repeats a comparison needs": its tables are what looplab's statistics compute now
(`looplab.views.repeats_page`), and what its prose says of them holds.

A table that no longer matches is rewritten with `python -m looplab.views.repeats_page`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from looplab.records.intervals import LEVEL, MAX_REPEATS, SignCounts, median_interval, runs_for_width, sign_test, wilson
from looplab.views import repeats_page
from tests.paths import REPO

PAGE = REPO / "docs" / "repeats.md"
NAMES = re.compile(r"<!-- repeats:([a-z-]+) -->")


def _page() -> str:
    return PAGE.read_text(encoding="utf-8")


def test_the_pages_tables_are_what_the_code_computes_now() -> None:
    assert repeats_page.fill(_page()) == _page(), (
        "docs/repeats.md's tables differ from what looplab computes now: `python -m looplab.views.repeats_page`"
    )


def test_the_page_shows_every_table_once() -> None:
    names = NAMES.findall(_page())
    assert sorted(names) == sorted(repeats_page.tables()), names
    assert _page().count(repeats_page.END) == len(names)


def test_the_page_is_in_the_sites_nav() -> None:
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    assert re.search(r"^ +- [^:\n]+: repeats\.md$", nav, re.M)


def test_a_table_of_another_name_is_refused() -> None:
    with pytest.raises(ValueError, match="no-such-table"):
        repeats_page.fill("<!-- repeats:no-such-table -->\n<!-- /repeats -->\n")


def test_writing_the_page_replaces_a_stale_table_and_keeps_the_prose(tmp_path: Path, capsys) -> None:
    page = tmp_path / "repeats.md"
    page.write_text("before\n\n<!-- repeats:signs -->\n| old | table |\n<!-- /repeats -->\n\nafter\n", encoding="utf-8")
    assert repeats_page.main([str(page)]) == 0
    written = page.read_text(encoding="utf-8")
    assert written.startswith("before\n\n") and written.endswith("\n\nafter\n") and "| old |" not in written
    assert repeats_page.signs_table() in written and "tables written" in capsys.readouterr().out
    repeats_page.main([str(page)])
    assert page.read_text(encoding="utf-8") == written and "already current" in capsys.readouterr().out


# --- the repeats a verdict takes: the test's own boundary ----------------------------------------------------------


def _whole(above: float, below: float, repeats: int) -> SignCounts:
    return SignCounts(above, 1 - above - below, below).scaled(repeats)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "above,below",
    [
        *(pytest.param(a * (1 - b), b * (1 - a), id=f"passes {a:.0%} and {b:.0%}") for a, b in repeats_page.RATE_GAPS),
        *(pytest.param(s, 1 - s, id=f"above in {s:.0%}") for s in repeats_page.SHARES),
    ],
)
def test_the_repeats_shown_are_where_the_exact_test_first_holds_at_95(above: float, below: float) -> None:
    """At the repeats shown, the expected pairs each way (in whole pairs) pass the exact test; one repeat fewer, not."""
    needed = repeats_page.repeats_to_tell(above, below)
    assert needed is not None
    at, before = _whole(above, below, needed), _whole(above, below, needed - 1)
    assert sign_test(at.above, at.below) < 1 - LEVEL <= sign_test(before.above, before.below)


# --- what the prose says of the tables ------------------------------------------------------------------------------


def test_five_passing_runs_say_more_than_half_and_fifty_runs_halve_ten() -> None:
    assert 0.5 < wilson(5, 5).low < 0.6
    assert wilson(4, 5).low < 0.5 and wilson(4, 5).high > 0.9  # a good runner and a mediocre one, both plausible
    assert wilson(40, 50).width == pytest.approx(wilson(8, 10).width / 2, abs=0.02)


def test_runs_that_fail_together_need_fewer_repeats() -> None:
    for first, second in repeats_page.RATE_GAPS:
        independent = repeats_page.repeats_to_tell(first * (1 - second), second * (1 - first))
        together = repeats_page.repeats_to_tell(first - second, 0.0)
        assert independent is not None and together is not None and together < independent, (first, second)


def test_a_share_near_half_needs_a_hundred_repeats_or_more_and_one_near_all_a_handful() -> None:
    assert (repeats_page.repeats_to_tell(0.6, 0.4) or MAX_REPEATS) >= 100
    assert (repeats_page.repeats_to_tell(0.9, 0.1) or MAX_REPEATS) <= 10


def test_a_median_of_five_runs_or_fewer_is_their_range_short_of_95() -> None:
    for runs in range(2, 6):
        interval = median_interval(range(runs))
        assert (interval.low, interval.high) == (0, runs - 1) and interval.confidence < LEVEL
    assert median_interval(range(6)).confidence >= LEVEL


def test_repeat_until_settles_a_cell_that_always_passes_first_and_a_coin_flip_last() -> None:
    from looplab.run import rounds

    for width in repeats_page.WIDTHS:
        needed = [runs_for_width(rate, width, MAX_REPEATS) for rate in repeats_page.UNTIL_RATES]
        assert needed == sorted(needed), (width, needed)
        # every cell gets at least the runs of the first column
        assert rounds.first_round(width, MAX_REPEATS) == max(2, needed[0])


def test_repeat_until_without_repeat_stops_at_the_most_the_page_names() -> None:
    from looplab.cli.running import REPEAT_UNTIL_MOST

    assert f"with `--repeat K` as the most ({REPEAT_UNTIL_MOST} without it)" in " ".join(_page().split())
