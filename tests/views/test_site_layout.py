"""The site's front page and caps pages, read off the kept measurements, and every table of the site's comparison
pages and of the HTML report laid out in a real browser (headless Chromium) at 1280 px and at a phone's 390 px.

What a layout check holds (tests/browser.py measures it):

- at 1280 px no table overflows: nothing reaches past its box or the page's content column, nothing scrolls;
- at either width no cell holding more than one word is squeezed under 6 ems and wrapped (one word a line);
- at 390 px the page never scrolls sideways, and a table wider than the screen scrolls inside its own box, which stays
  on the screen (Material's scrollable table wrapper; the site's stylesheet keeps the runner column in view). A row
  of the comparison holds a runner's facts side by side, and stacking them would lose the side-by-side reading; the
  front page's "where runners differ" table, the one read first on a phone, fits whole.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from looplab.records import history
from looplab.views import history as shown
from looplab.views import report, site
from tests import browser
from tests.project.test_docs import REPO, build_site

#: The site's pages a layout check reads: the front page, the generated scorecard, and the caps pages.
PAGES = ("index.html", "scorecard.html", "caps.html", "iteration-caps.html")
DESKTOP = (1280, 900)
PHONE = (390, 844)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built strict as the site job builds it, into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    report_page = out / "report.html"
    report_page.write_text("<html><body>the run's report</body></html>", encoding="utf-8")
    build_site(REPO, out / "site", report_page)
    return out / "site"


# --- what the front page and the caps page show (no browser) -------------------------------------------------------


def test_the_front_page_leads_with_the_comparison_read_off_the_kept_measurements() -> None:
    kept = history.read(REPO / "history")
    page = site.fill((REPO / "docs" / "index.md").read_text(encoding="utf-8"), kept)
    order = ["# looplab", "### Scorecard", "### Where runners differ", "### The caps at a glance", "| to | read |"]
    assert [page.index(part) for part in order] == sorted(page.index(part) for part in order)
    assert "<!-- kept:" not in page
    for runner, versions in kept.items():  # a row per runner at its newest version, with its cases passed
        newest = versions[-1]
        row = next(line for line in page.splitlines() if line.startswith(f"| `{runner}` | "))
        assert f" {newest.version} " in row and f" {shown.cases_passed(newest)} " in row, row
    # Every figure comes from the kept files: the first request sizes are the kept ones, in kB.
    sizes = {
        one[-1].cases["vip-compound"].first_request_bytes for one in kept.values() if "vip-compound" in one[-1].cases
    }
    kb_shown = {float(kb) for kb in re.findall(r"is (?:smallest|largest), ([\d.]+) kB", page)}
    assert kb_shown == {round(min(sizes) / 1000, 1), round(max(sizes) / 1000, 1)}
    for link in ("caps.md", "reliability.md", "scorecard.md", "iteration-caps.md"):
        assert f"]({link})" in page


def test_where_runners_differ_groups_them_by_what_their_framework_did() -> None:
    kept = history.read(REPO / "history")
    page = site.comparison(kept)
    differ = page[page.index("### Where runners differ") : page.index("### The caps at a glance")]
    newest = {runner: versions[-1] for runner, versions in kept.items()}
    for runner, one in newest.items():
        said = site.at_cap(one)
        if said is not None:
            row = next(line for line in differ.splitlines() if f"| {said} |" in line)
            assert f"`{runner}`" in row, (runner, said, row)


def test_the_caps_pages_show_the_results_before_the_method() -> None:
    caps_page = site.fill((REPO / "docs" / "caps.md").read_text(encoding="utf-8"), history.read(REPO / "history"))
    assert caps_page.index("| runner | knob | counts | default |") < caps_page.index("## Iteration caps, measured")
    generated = (REPO / "docs" / "iteration-caps.md").read_text(encoding="utf-8")
    assert generated.index("| runner | version | native knob") < generated.index("## How these were measured")


# --- in a browser ---------------------------------------------------------------------------------------------------


def _check(page: Path, tmp_path: Path, *, scrolls: tuple[str, ...] = ()) -> None:
    """The layout checks of this module's docstring on `page`; the tables with an id in `scrolls` may scroll in their
    own box at 1280 px too."""
    wide = browser.layout(page, *DESKTOP, tmp_path / "desktop")
    assert wide.width == DESKTOP[0] and wide.tables, f"{page.name}: no table measured"
    overflowing = [t for t in wide.overflowing() if t["id"] not in scrolls]
    assert not overflowing, f"{page.name} at {DESKTOP[0]} px: tables overflow: {overflowing}"
    assert wide.page_overflow <= 0 and not wide.off_screen(), f"{page.name} at {DESKTOP[0]} px scrolls sideways"
    assert not wide.squeezed(), f"{page.name} at {DESKTOP[0]} px: squeezed cells: {wide.squeezed()}"

    phone = browser.layout(page, *PHONE, tmp_path / "phone")
    assert phone.width == PHONE[0]
    assert phone.page_overflow <= 0, f"{page.name} at {PHONE[0]} px: the page scrolls sideways"
    assert not phone.off_screen(), f"{page.name} at {PHONE[0]} px: tables off the screen: {phone.off_screen()}"
    assert not phone.squeezed(), f"{page.name} at {PHONE[0]} px: squeezed cells: {phone.squeezed()}"


@pytest.mark.full  # a browser, and a site build
@browser.needs_chromium
@pytest.mark.parametrize("page", PAGES)
def test_no_table_of_the_site_overflows_or_squeezes_at_1280_px_or_on_a_phone(built: Path, page: str, tmp_path) -> None:
    _check(built / page, tmp_path)


@pytest.mark.full  # a browser, and a site build
@browser.needs_chromium
def test_where_runners_differ_fits_a_phone_whole(built: Path, tmp_path: Path) -> None:
    phone = browser.layout(built / "index.html", *PHONE, tmp_path)
    [differ] = [t for t in phone.tables if t["head"] == "when"]
    assert differ["overflow"] <= 1, differ


@pytest.fixture(scope="module")
def full_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML report of every runner on every case: one real run (handrolled, against the scripted model) copied
    into each cell, each runner sending its own bytes."""
    from looplab.adapters.registry import RUNNERS
    from looplab.scenarios.cases import load_cases
    from tests.records.test_results import sample

    base = json.loads(sample().model_dump_json())
    runs = []
    for case in load_cases():
        for i, runner in enumerate(RUNNERS):
            run = json.loads(json.dumps(base))
            run.update(runner=runner, case=case)
            for step in run["trace"]["steps"]:
                step["model_call"]["request_bytes"] += 40 * i
            runs.append(run)
    return report.write_html(runs, tmp_path_factory.mktemp("report") / "report.html")


@pytest.mark.full  # a browser, and a report of every runner on every case
@browser.needs_chromium
def test_no_table_of_the_report_overflows_or_squeezes_at_1280_px_or_on_a_phone(full_report: Path, tmp_path) -> None:
    # The matrix holds a column per case (16 and more): wider than a screen at a readable width, it scrolls in its own
    # box with its runner column in view; every other table fits.
    _check(full_report, tmp_path, scrolls=("matrix",))
