"""The kept measurements shown: `looplab history` in the terminal, the site's pages, and the text of a drift issue.

Every line is read off the kept files (`looplab.records.history`); nothing here measures. Kept files come from runs
of unpinned framework releases, and the site and GitHub publish these pages: every piece of a kept file that reaches
Markdown goes through `looplab.views.markdown`'s `text` or `code` (and a run's URL through its `link`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise

from packaging.version import InvalidVersion, Version

from looplab.records.caps_changes import Change, shown
from looplab.records.document import Document
from looplab.records.history import Recorded, VersionRecord, changes_between
from looplab.records.measurements import CapsDoc, KnobReport
from looplab.views import scorecard, scorecard_rows, scorecard_text
from looplab.views.markdown import code, ending_text, link, text

__all__ = ["drift_issue", "drift_title", "scorecard_cells", "terminal"]


def _summary(one: VersionRecord, *, when: bool = True) -> str:
    """What was measured of a version; `when`: after the date and the looplab that measured it."""
    parts = ["caps"] if one.caps else []
    if one.cases:
        passed = sum(c.passed == c.runs for c in one.cases.values())
        parts.append(f"{passed}/{len(one.cases)} cases passed")
    what = ", ".join(parts) or "nothing"
    return f"{_when(one)}: {what}" if when else what


def _when(one: VersionRecord) -> str:
    return f"measured {one.measured_on} by looplab {_public(one.looplab)}"


def _pairs(versions: Sequence[VersionRecord]) -> list[tuple[VersionRecord, VersionRecord, list[Change]]]:
    return [(a, b, changes_between(a, b)) for a, b in pairwise(versions)]


def _caveat(a: VersionRecord, b: VersionRecord, said: Callable[[str], str] = str) -> str:
    """Two versions measured by two looplab releases: a difference may be looplab's, and the reader is told so, each
    version as `said` shows it. (Builds between two releases count as the release they lead to: each commit is a
    version of its own.)"""
    if _release(a.looplab) == _release(b.looplab):
        return ""
    return f" (measured by looplab {said(a.looplab)} and {said(b.looplab)}: a change may be looplab's)"


def _public(version: str) -> str:
    """A looplab version without its local part: a dev build's commit and date say nothing to a reader."""
    return version.split("+")[0]


def _release(version: str) -> str:
    try:
        return Version(version).base_version
    except InvalidVersion:
        return version


def terminal(kept: dict[str, list[VersionRecord]], width: int = 80) -> str:
    """Per runner, each version kept, and what changed from the one before it; no line wider than `width` (a line
    that cannot fit wraps at its spaces, its continuation indented under it)."""
    when = {_when(one) for versions in kept.values() for one in versions}
    shared = len(when) == 1  # one date and one looplab for every version: said once, above them all
    out: list[str] = [f"every version below {when.pop()}", ""] if shared else []
    for runner, versions in kept.items():
        out.append(f"{runner} ({versions[0].distribution or 'its framework'})")
        column = max(len(v.version) for v in versions)
        column = column if column <= 16 else 0  # a long version is not a column's width for the others
        out.append(f"  {versions[0].version:<{column}}  {_summary(versions[0], when=not shared)}")
        for a, b, moved in _pairs(versions):
            out.append(f"  {b.version:<{column}}  {_summary(b, when=not shared)}")
            if not moved:
                out.append(f"    nothing measured changed from {a.version}")
                continue
            out.append(f"    changed from {a.version}{_caveat(a, b)}:")
            out += [line for c in moved for line in _change_lines(c, width)]
        out.append("")
    # Kept data is read from files a scheduled job wrote: an escape sequence in one must not reach the terminal.
    safe = ["".join(ch if ch.isprintable() else "\ufffd" for ch in line) for line in out]
    return "\n".join(folded for line in safe for folded in _fitted(line, width))


def _change_lines(c: Change, width: int) -> list[str]:
    """One change on one line where it fits; else what changed, then its values under it, broken before `->`
    only where the two values do not fit one line."""
    what, before, after = f"      {_where(c)}: {c.field}", shown(c.committed), shown(c.measured)
    shapes = [
        [f"{what} {before} -> {after}"],
        [what, f"        {before} -> {after}"],
        [f"{what} {before}", f"        -> {after}"],
        [what, f"        {before}", f"        -> {after}"],
    ]
    return next((lines for lines in shapes if all(_cells(x) <= width for x in lines)), shapes[-1])


def _cells(line: str) -> int:
    from rich.cells import cell_len

    return cell_len(line)


def _fitted(line: str, width: int) -> list[str]:
    """`line` in lines of at most `width` cells: broken at spaces where it can be, each continuation indented two
    more than the line's own indent."""
    if _cells(line) <= width:
        return [line]
    from rich.console import Console
    from rich.text import Text

    body = line.lstrip(" ")
    indent = min(len(line) - len(body), max(width - 20, 0))
    more = min(indent + 2, max(width - 20, 0))
    measure = Console(width=width, color_system=None, highlight=False)
    first, *rest = Text(body).wrap(measure, width - indent, overflow="fold")
    lines = [" " * indent + first.plain.rstrip()]
    remainder = body[len(first.plain) :].lstrip(" ")
    if remainder:
        lines += [" " * more + t.plain.rstrip() for t in Text(remainder).wrap(measure, width - more, overflow="fold")]
    return lines


def _where(change: Change) -> str:
    return change.where or "the runner"


def _first_knob(one: VersionRecord) -> KnobReport | None:
    return one.caps.knobs[0] if one.caps and one.caps.knobs else None


def _versions_table(versions: Sequence[VersionRecord]) -> list[str]:
    out = [
        "| version | measured | knob | default | counts | at the cap | unset, a runaway made | cases passed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for one in reversed(versions):  # the newest first
        knob = _first_knob(one)
        caps = (
            [
                code(knob.knob),
                "none" if knob.default is None else str(knob.default),
                text(knob.counts),
                ending_text(knob.rows[0].ending, inert=True) if knob.rows else "not measured",
                f"{knob.unset.model_calls} model calls",
            ]
            if knob
            else ["not measured"] * 5
        )
        cases = cases_passed(one)
        looplab = text(_public(one.looplab))
        out.append(
            f"| {text(one.version)} | {one.measured_on} (looplab {looplab}) | " + " | ".join(caps) + f" | {cases} |"
        )
    return out


def cases_passed(one: VersionRecord) -> str:
    """How many of a kept version's cases passed every run, of those run (`3/4`), or `not run`."""
    if not one.cases:
        return "not run"
    return f"{sum(c.passed == c.runs for c in one.cases.values())}/{len(one.cases)}"


def _changes_table(moved: Sequence[Change], before: str, after: str) -> list[str]:
    out = [f"| where | field | {text(before)} | {text(after)} |", "|---|---|---|---|"]
    out += [
        f"| {text(_where(c))} | {text(c.field)} | {text(shown(c.committed))} | {text(shown(c.measured))} |"
        for c in moved
    ]
    return out


def markdown(kept: dict[str, list[VersionRecord]]) -> str:
    """The site's change history: a summary, then per runner every version measured and what moved between them."""
    out = [
        "# Measured versions and what changed",
        "",
        "Every framework version looplab has measured, read from the kept data (`history/<runner>/<version>.json`),",
        "and what changed from one to the next: a cap's default, what it counts, what happens at the cap, the tools",
        "of the last call, the size of a request, a case's outcome. `looplab history` prints the same.",
        "",
        "| runner | versions measured | newest | changed at the newest |",
        "|---|---|---|---|",
    ]
    pairs = {runner: _pairs(versions) for runner, versions in kept.items()}
    for runner, versions in kept.items():
        newest = pairs[runner][-1][2] if pairs[runner] else None
        last = "first measured" if newest is None else (f"{len(newest)} fields" if newest else "nothing")
        # A runner's name is its kept folder's (letters, digits, `_`, `.`, `-`): safe as a link's anchor.
        out.append(f"| [{code(runner)}](#{runner}) | {len(versions)} | {text(versions[-1].version)} | {last} |")
    for runner, versions in kept.items():
        out += ["", f"## {text(runner)}", "", f"Framework: {code(versions[0].distribution or 'its own')}.", ""]
        out += _versions_table(versions)
        for a, b, moved in reversed(pairs[runner]):
            out += ["", f"### {text(a.version)} → {text(b.version)}", ""]
            if not moved:
                out.append("Nothing measured changed.")
                continue
            if caveat := _caveat(a, b, text):
                out += [f"Measured{caveat}.", ""]
            out += _changes_table(moved, a.version, b.version)
    return "\n".join(out) + "\n"


#: What a results cell "left to timing" means, said under the page's title where one is.
TIMING_SAID = (
    "A cell left to timing is a case whose outcome the framework leaves to thread timing (the race its runner",
    "declares): kept to read, not compared between versions.",
    "",
)


def results_markdown(kept: dict[str, list[VersionRecord]]) -> str:
    """The site's latest results: each runner's newest kept version, case by case."""
    newest = {runner: versions[-1] for runner, versions in kept.items() if versions[-1].cases}
    cases = sorted({case for one in newest.values() for case in one.cases})
    out = [
        "# Latest results",
        "",
        "Each runner's newest measured version on every case of the built-in suite, against the offline scripted",
        "model: whether the case's checks passed (and how many of its runs, where it ran more than once) and its",
        "model calls. Read from the kept data; [the change history](history.md) shows how each moved between versions.",
        "",
        *(TIMING_SAID if any(c.race for one in newest.values() for c in one.cases.values()) else ()),
        "| runner | version | passed | " + " | ".join(code(case) for case in cases) + " |",
        "|---" * (len(cases) + 3) + "|",
    ]
    for runner, one in newest.items():
        row = [code(runner), text(one.version), cases_passed(one)]
        for case in cases:
            outcome = one.cases.get(case)
            if outcome is None:
                row.append("not run")
                continue
            mark = "pass" if outcome.passed == outcome.runs else f"**fail** {outcome.passed}/{outcome.runs}"
            timing = ", left to timing" if outcome.race else ""
            row.append(f"{mark}, {outcome.model_calls if outcome.model_calls is not None else 'no'} calls{timing}")
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out) + "\n"


def drift_title(runner: str) -> str:
    """The title of a runner's drift issue: one per runner, so a later release updates the open one."""
    return f"Measured behaviour changed: {runner}"


def drift_issue(news: Recorded, run_url: str | None = None) -> str:
    """The body of the issue saying a new release changed what looplab measures, with every field that moved;
    `run_url`, the run that measured it, must be an http(s) URL (`markdown.web_url`)."""
    before, after = news.previous, news.record
    assert before is not None  # news has a version before it
    label = text(after.distribution or after.runner)
    out = [
        f"{code(after.runner)} on {label} {text(after.version)} measures otherwise than on {text(before.version)}, "
        f"the version measured before it{_caveat(before, after, text)}.",
        "",
        f"Measured {after.measured_on} by looplab {text(after.looplab)}"
        + (f" in {link('this run', run_url)}." if run_url else "."),
        "",
        *_changes_table(news.moved, before.version, after.version),
        "",
        f"The kept measurements are {code(f'history/{after.runner}/')}; "
        f"{code(f'looplab history --runner {after.runner}')} shows every version. When the change is the framework's, "
        f"regenerate the caps doc ({code(f'looplab caps --runner {after.runner}')}) and say in the runner's prose what "
        "moved; when a case's outcome moved, the runner's adapter or the case needs a look.",
    ]
    return "\n".join(out) + "\n"


#: The scorecard's rows worth keeping per framework version: what the framework does, not what this machine
#: measured (the bench's timings), a team's cases, or a size relative to another runner's (each case's request
#: sizes are kept on their own).
KEPT_ROWS = tuple(
    r.key
    for r in scorecard_rows.ROWS
    if r.group in ("the cap", "bad calls", "budgets", "agent trees") or r.key == "apis"
)


def scorecard_cells(
    caps: CapsDoc | None, document: Document | None, races: Mapping[tuple[str, str], str] | None = None
) -> dict[str, dict[str, str]]:
    """Each runner's measured scorecard cells (`KEPT_ROWS`), by runner, for `history.records_from` to keep; a case's
    cell left out where its runner leaves the case to thread timing (`races`, by runner and case)."""
    runners = sorted({r.runner for r in caps.runners} if caps else set())
    runners += sorted({c.runner for c in document.cells} - set(runners)) if document else []
    card = scorecard.build(runners, scorecard.observed(document) if document else (), caps)
    row_of = {case: key for key, case, _ in scorecard.DELEGATION_ROWS}
    timed = {(runner, row_of[case]) for runner, case in races or {} if case in row_of}
    return {
        c.runner: {k: c.cells[k].text for k in KEPT_ROWS if c.cells[k].measured and (c.runner, k) not in timed}
        for c in card.cards
    }


def scorecard_markdown(kept: dict[str, list[VersionRecord]]) -> str:
    """The scorecard of each runner's newest kept version, as `looplab scorecard --markdown` lays it out."""
    cards = [
        scorecard_rows.RunnerCard(
            runner=runner,
            version=versions[-1].version,
            cells={
                row.key: scorecard_rows.Cell(text=versions[-1].scorecard[row.key], evidence="kept")
                if row.key in versions[-1].scorecard
                else scorecard_rows.Cell(text="not measured")
                for row in scorecard_rows.ROWS
            },
        )
        for runner, versions in kept.items()
    ]
    sources = {"kept data": "each runner's newest version in history/ (its caps and its cases)"}
    return scorecard_text.markdown(scorecard_rows.Scorecard(cards=cards, sources=sources))
