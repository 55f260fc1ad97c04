"""The documentation site's Markdown read off the kept measurements: the front page's comparison, the caps at a glance,
and the generated pages (`docs/_hooks/kept_data.py` calls this at every build; nothing here measures).

The front page shows, for each runner's newest kept version, a compact scorecard, where the runners differ (grouped
in a team's words: what a runner does on a malformed call, at its own cap, with the tools of its last call, and how
big its first request is) and each runner's cap at a glance. Kept files come from runs of unpinned framework releases
and the site publishes them: every piece of one that reaches Markdown goes through `looplab.views.markdown`'s `text`
or `code`; the labels the grouping gives are looplab's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from looplab.records.history import VersionRecord
from looplab.records.measurements import Ending
from looplab.views import history as shown
from looplab.views.markdown import code, text

__all__ = ["fill", "pages"]

#: The case whose first request the scorecard sizes (the same task and tools for every runner).
FIRST_REQUEST_CASE = "vip-compound"
#: The phrase for a kept scorecard cell that says nothing measured.
_NOT_MEASURED = "not measured"


# --- a runner's behaviour, in a team's words ----------------------------------------------------------------


def _newest(kept: dict[str, list[VersionRecord]]) -> dict[str, VersionRecord]:
    return {runner: versions[-1] for runner, versions in kept.items() if versions}


def _first_ending(one: VersionRecord) -> Ending | None:
    """How the runner's own cap ended the runaway probe at its lowest value measured (kept caps), if measured."""
    knobs = one.caps.knobs if one.caps else []
    return knobs[0].rows[0].ending if knobs and knobs[0].rows else None


def at_cap(one: VersionRecord) -> str | None:
    """What the framework does when its own cap is reached: `raises`, `returns without an answer`, `returns a final
    text of its own` or `keeps asking` (looplab's safety stop ended it); None when not measured. Read off the kept
    caps measurement, else the kept scorecard cell."""
    ending = _first_ending(one)
    if ending is not None:
        if ending.exception:
            return "raises"
        if ending.how.startswith("kept going"):
            return "keeps asking"
        if ending.how.startswith("returns, with a message"):
            return "returns a final text of its own"
        return "returns without an answer" if ending.how.startswith("returns") else None
    said = one.scorecard.get("at_cap", "")
    if said.startswith("the framework raises"):
        return "raises"
    return {
        "returns silently": "returns without an answer",
        "returns a made-up final message": "returns a final text of its own",
    }.get(said)


def _raised(one: VersionRecord) -> str | None:
    """The class name of the exception the framework raised at its cap, as the kept measurement names it."""
    ending = _first_ending(one)
    if ending is not None and ending.exception:
        return ending.exception.rsplit(".", 1)[-1]
    return None


def malformed(one: VersionRecord) -> str | None:
    """What the run did after a tool call with malformed arguments (`sloppy-calls`): `recovers` or `stops`; None
    when not measured."""
    said = one.scorecard.get("malformed", "")
    if said.startswith("recovers"):
        return "recovers"
    return "stops" if said.startswith("stops") else None


#: The kept `last_tools` cell (`scorecard._cap_cells`), said of the runner.
_LAST_TOOLS = {
    "ran": "runs them",
    "did not run": "does not run them",
    "none asked for": "its last call asks for none",
    "depends on the value": "depends on the cap's value",
}


def last_tools(one: VersionRecord) -> str | None:
    """Whether the framework runs the tools its last allowed model call asked for, when its own cap stops it."""
    return _LAST_TOOLS.get(one.scorecard.get("last_tools", ""))


def first_request(one: VersionRecord) -> int | None:
    """The bytes of the runner's first model request on `FIRST_REQUEST_CASE`, as kept; None when not run."""
    outcome = one.cases.get(FIRST_REQUEST_CASE)
    return outcome.first_request_bytes if outcome else None


def _kb(size: int) -> str:
    return f"{size / 1000:.1f} kB"


def _names(runners: Sequence[str]) -> str:
    return ", ".join(code(r) for r in runners)


# --- the front page's comparison ------------------------------------------------------------------------------


def _scorecard_table(newest: dict[str, VersionRecord]) -> list[str]:
    out = [
        "| runner | version | cases passed | at its cap | a malformed call | tools of the last call | first request |",
        "|---|---|---|---|---|---|---|",
    ]
    for runner, one in newest.items():
        cap = at_cap(one) or _NOT_MEASURED
        if cap == "raises" and (raised := _raised(one)):
            cap = f"raises {code(raised)}"
        size = first_request(one)
        row = [
            code(runner),
            text(one.version),
            shown.cases_passed(one),
            cap,
            malformed(one) or _NOT_MEASURED,
            last_tools(one) or _NOT_MEASURED,
            _kb(size) if size is not None else _NOT_MEASURED,
        ]
        out.append("| " + " | ".join(row) + " |")
    return out


def _grouped(newest: dict[str, VersionRecord], classify: Callable[[VersionRecord], str | None]) -> dict[str, list[str]]:
    """The runners by what `classify` says of them, the largest group first; the unmeasured left out."""
    groups: dict[str, list[str]] = {}
    for runner, one in newest.items():
        if (said := classify(one)) is not None:
            groups.setdefault(said, []).append(runner)
    return dict(sorted(groups.items(), key=lambda item: -len(item[1])))


#: Where runners can differ, each with the question it answers and how a runner's answer is read.
_TOPICS: tuple[tuple[str, Callable[[VersionRecord], str | None]], ...] = (
    ("a tool call's arguments are malformed", malformed),
    ("its own cap is reached", at_cap),
    ("its cap stops it after a call that asked for tools", last_tools),
)


def _differences_table(newest: dict[str, VersionRecord]) -> list[str]:
    out = ["| when | the runner | runners |", "|---|---|---|"]
    for when, classify in _TOPICS:
        groups = _grouped(newest, classify)
        if len(groups) < 2:  # every runner measured alike: no difference to show
            continue
        for n, (said, runners) in enumerate(groups.items()):
            out.append(f"| {when if n == 0 else ''} | {said} | {_names(runners)} |")
    sizes = {runner: size for runner, one in newest.items() if (size := first_request(one)) is not None}
    if len(set(sizes.values())) > 1:
        ordered = sorted(sizes.values())
        smallest, largest, middle = ordered[0], ordered[-1], ordered[len(ordered) // 2]
        at = {size: [runner for runner, its in sizes.items() if its == size] for size in (smallest, largest)}
        out.append(f"| its first request | is smallest, {_kb(smallest)} | {_names(at[smallest])} |")
        out.append(f"|  | is largest, {_kb(largest)} (the median runner's: {_kb(middle)}) | {_names(at[largest])} |")
    if len(out) == 2:  # nothing measured differs
        return ["The runners measured behave alike on every behaviour compared here."]
    return out


def caps_glance(kept: dict[str, list[VersionRecord]]) -> str:
    """Each runner's own cap at a glance (newest kept version): the knob `max_steps` maps onto, what it counts, its
    default, and what stops a runaway when nothing is set, as a Markdown table."""
    out = ["| runner | knob | counts | default | unset, a runaway is stopped by |", "|---|---|---|---|---|"]
    for runner, one in _newest(kept).items():
        knob = one.caps.knobs[0] if one.caps and one.caps.knobs else None
        if knob is None:
            out.append(f"| {code(runner)} | {_NOT_MEASURED} | | | |")
            continue
        default = "none" if knob.default is None else f"{knob.default:,}"
        runaway = text(one.scorecard.get("default_cap", _NOT_MEASURED))
        out.append(f"| {code(runner)} | {code(knob.knob)} | {text(knob.counts)} | {default} | {runaway} |")
    return "\n".join(out) + "\n"


def _measured_span(newest: dict[str, VersionRecord]) -> str:
    days = sorted({one.measured_on for one in newest.values()})
    if not days:
        return ""
    return f"on {days[0]}" if len(days) == 1 else f"between {days[0]} and {days[-1]}"


def comparison(kept: dict[str, list[VersionRecord]]) -> str:
    """The front page's comparison: the scorecard of each runner's newest kept version in a compact form, where the
    runners differ, and the caps at a glance, each with a link to its full page and the method."""
    newest = _newest(kept)
    if not newest:
        return "Nothing is kept in `history/` yet: `looplab history record` keeps a measurement.\n"
    out = [
        "## The comparison, measured",
        "",
        f"{len(newest)} runners, each at its newest measured version, measured {_measured_span(newest)} against the",
        "offline scripted model; read from the kept measurements (`history/`) when this site was built.",
        "",
        "### Scorecard",
        "",
        *_scorecard_table(newest),
        "",
        "Every behaviour, and where each cell was read from: [the scorecard](scorecard.md); case by case:",
        "[the latest results](latest-results.md); every version measured: [the change history](history.md).",
        "",
        "### Where runners differ",
        "",
        *_differences_table(newest),
        "",
        f"The first request is each runner's on {code(FIRST_REQUEST_CASE)}: the same task and tools, and what the",
        "framework adds to them. What each case does and checks: [Cases and the scripted model](cases.md); what",
        "looplab does where they differ (one normalized stop, no invented answer): [Reliability](reliability.md).",
        "",
        "### The caps at a glance",
        "",
        "Each framework caps its loop with its own knob, and the knobs count different things; looplab sets the knob",
        "from `max_steps` and stops every runner after at most `max_steps` model calls.",
        "",
        caps_glance(kept).rstrip("\n"),
        "",
        "How they were measured: [Iteration caps and the scorecard](caps.md); every knob, value and ending:",
        "[Iteration caps](iteration-caps.md).",
    ]
    return "\n".join(out) + "\n"


#: Where a hand-written page takes a generated part: the marker, on a line of its own, and what replaces it.
MARKERS: dict[str, Callable[[dict[str, list[VersionRecord]]], str]] = {
    "<!-- kept:comparison -->": comparison,
    "<!-- kept:caps -->": caps_glance,
}


def fill(page: str, kept: dict[str, list[VersionRecord]]) -> str:
    """A hand-written page with each `MARKERS` line replaced by its part, read off `kept`."""
    lines = page.split("\n")
    return "\n".join(MARKERS[line.strip()](kept).rstrip("\n") if line.strip() in MARKERS else line for line in lines)


def pages(kept: dict[str, list[VersionRecord]], report: str | None = None) -> dict[str, str]:
    """The site's generated pages' Markdown, read off `kept`: the change history, the latest results (linking to
    `report`, a page of the site, when given) and the scorecard."""
    latest = shown.results_markdown(kept)
    if report:
        latest += f"\nThe scheduled comparison's side-by-side report, every run's trace: [report.html]({report}).\n"
    return {
        "history.md": shown.markdown(kept),
        "latest-results.md": latest,
        "scorecard.md": shown.scorecard_markdown(kept),
    }
