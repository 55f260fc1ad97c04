"""Where the runners of one results document differ, and how: the closing screen of `looplab run`.

Each way runners can differ is one topic, and each topic is one row that names the runners outside the
largest group and says what the others did:

- stops: per case, the runners that stopped otherwise or after another number of model calls;
- bad calls: on a case with malformed tool calls, who recovers, who stops, and who answers a call to a
  tool that does not exist (the scorecard's `malformed` and `unknown tool` cells);
- at the cap: on a case where the runs hit `max_steps`, how the framework ended (returned, raised, or asked
  for one more model call, which looplab's model boundary refused);
- tools of the last call: whether the framework runs the tools its last model call asked for when its own cap
  stops it (read from the committed caps measurement, as the scorecard does);
- first request: the bytes of the first model request (the task plus what the framework adds);
- time: wall seconds over the document's runs.

A case on which every runner behaved the same (stop, model calls, tool calls, checks, answer) is one line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from looplab.adapters.contract.errors import LooplabError
from looplab.records.measurements import CapsDoc
from looplab.views import render, scorecard
from looplab.views.report import Behaviour, RunView, behaviour, describe_divergence, runs_from

__all__ = [
    "Topic",
    "first_screen_lines",
    "print_first_screen",
    "topics",
]


@dataclass(frozen=True)
class Topic:
    """One way the runners differ (or one case on which they agree): a short label and one sentence."""

    label: str
    text: str


#: The labels as the first screen shows them, in the order of its rows.
SAME, STOPS, BAD_CALLS, AT_CAP, LAST_TOOLS, FIRST_REQUEST, TIME, NOT_RUN = (
    "same",
    "stops",
    "bad calls",
    "at the cap",
    "last call",
    "1st request",
    "time",
    "not run",
)

#: How the scorecard's two bad-call cells read together, as what the runner does (unlisted pairs: the cells).
_BAD_CALLS = {
    ("recovers", "reaches the tools"): "recover, passing the unknown tool on to the tools",
    ("recovers", "answered by the framework"): "recover, answering the unknown tool themselves",
    ("recovers", "not reached (the run ended first)"): "recover",
    ("stops: error", "not reached (the run ended first)"): "stop at the first malformed call",
    ("stops: error", "ends the run: error"): "stop at the unknown tool",
}
#: What the caps measurement's `last_call_tools` values say, as what the runner does.
_LAST_TOOLS = {"ran": "run them", "did not run": "do not run them", "none asked for": "ask for none"}


def _conjugated(phrase: str, count: int) -> str:
    """`phrase` (its first word a verb in the plural: "stop at ...") for `count` runners: "stops at ..." for one."""
    if count != 1:
        return phrase
    verb, _, rest = phrase.partition(" ")
    verb = "does" if verb == "do" else verb + ("es" if verb.endswith(("s", "sh", "ch", "x")) else "s")
    return f"{verb} {rest}".rstrip()


def _grouped_line(values: dict[str, str]) -> str:
    """`a and b do X; c does Y; the other 9 do Z`: each group's runners named, the largest group last.

    Each value is a phrase whose first word is a verb in the plural (`_conjugated` makes it singular).
    """
    groups: dict[str, list[str]] = {}
    for runner, value in values.items():
        groups.setdefault(value, []).append(runner)
    largest = max(groups, key=lambda value: len(groups[value]))  # max keeps the first of equals
    order = [v for v in groups if v != largest] + [largest]
    clauses = []
    for value in order:
        runners = groups[value]
        if len(groups) == 1:
            who = f"all {len(runners)}" if len(runners) > 1 else runners[0]
        elif value == largest and len(runners) > 2:
            who = f"the other {len(runners)}"
        else:
            who = _every_name(runners)
        clauses.append(f"{who} {_conjugated(value, len(runners))}")
    return "; ".join(clauses)


def _every_name(runners: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`: every runner named (the line is what tells them apart)."""
    return " and ".join([", ".join(runners[:-1]), runners[-1]]) if len(runners) > 1 else "".join(runners)


def _firsts(runs: Sequence[RunView]) -> dict[str, dict[str, RunView]]:
    """Per case, each runner's first run (a run that ran preferred to one that did not)."""
    cases: dict[str, dict[str, RunView]] = {}
    for view in runs:
        mine = cases.setdefault(view.case, {})
        if view.runner not in mine or (mine[view.runner].result is None and view.result is not None):
            mine[view.runner] = view
    return cases


def _answer(view: RunView) -> str:
    answer = view.result.answer if view.result else None
    return " ".join((answer or "").split())  # whitespace differences are not different answers


def _same_line(case: str, views: dict[str, RunView]) -> str:
    """`vip-compound: 12 runners: 5 model calls, final answer, same answer`."""
    first = next(iter(views.values()))
    result = first.result
    assert result is not None  # a case where every runner agrees and one did not run is under "not run"
    calls = result.totals.model_calls
    stop = "final answer" if str(result.stop_reason) == "final_answer" else f"stop: {result.stop_reason}"
    bits = [f"{calls} model call{'s' if calls != 1 else ''}", stop]
    answers = {_answer(v) for v in views.values()}
    if answers != {""}:
        bits.append("same answer" if len(answers) == 1 else f"{len(answers)} different answers")
    if first.failed_checks:
        bits.append("failing " + ", ".join(first.failed_checks))
    who = f"all {len(views)}" if len(views) > 1 else f"only {next(iter(views))}"
    return f"{case}: {who}: {', '.join(bits)}"


def _stops(case: str, views: dict[str, RunView]) -> str | None:
    """The case's runners compared by stop and model calls only; None when those agree."""
    line = describe_divergence(
        {r: Behaviour(behaviour(v).stop, behaviour(v).model_calls) for r, v in views.items() if v.result}
    )
    return None if line.agree else f"{case}: {line.line.rstrip('.')}"


def _at_cap(case: str, views: dict[str, RunView]) -> str | None:
    """How each framework ended a run stopped at max_steps; None unless they ended in more than one way."""
    capped = {r: v.result for r, v in views.items() if v.result and str(v.result.stop_reason) == "max_steps"}
    if len(capped) < 2:
        return None
    ways = {}
    for runner, result in capped.items():
        end = result.native_end
        if end is None or end.kind == "returned":
            ways[runner] = "return without an answer"
        elif end.kind == "raised":
            ways[runner] = "raise an exception"
        else:  # the framework's own cap did not stop it: it asked for one more model call
            ways[runner] = "go on (looplab's boundary refuses the next model call)"
    if len(set(ways.values())) < 2:
        return None
    return f"{case}: {_grouped_line(ways)}"


def _bad_calls(card: scorecard.Scorecard) -> str | None:
    """Who recovers from malformed tool calls and what answers an unknown tool; None where not measured."""
    ways = {}
    for c in card.cards:
        malformed, unknown = c.cells["malformed"], c.cells["unknown_tool"]
        if malformed.measured and unknown.measured:
            ways[c.runner] = _BAD_CALLS.get((malformed.text, unknown.text), f"{malformed.text}; {unknown.text}")
    if len(set(ways.values())) < 2:
        return None
    case = next(c.cells["malformed"].evidence for c in card.cards if c.cells["malformed"].measured)
    return f"{(case or '').removeprefix('eval: ')}: {_grouped_line(ways)}"


def _last_tools(card: scorecard.Scorecard, source: str) -> str | None:
    """At the framework's own cap, whether the last model call's tools run (the caps measurement)."""
    ways = {
        c.runner: _LAST_TOOLS.get(c.cells["last_tools"].text, c.cells["last_tools"].text)
        for c in card.cards
        if c.cells["last_tools"].measured
    }
    if len(set(ways.values())) < 2:
        return None
    return f"its tools, at the framework's own cap ({source}): {_grouped_line(ways)}"


def _first_request(cases: dict[str, dict[str, RunView]]) -> str | None:
    """The first request's size on the first case every runner ran: the outsized ones named, the rest a range."""
    for case, views in cases.items():  # noqa: B007 (the case the loop stops at is named below)
        sizes = {
            r: v.result.trace.steps[0].model_call.request_bytes
            for r, v in views.items()
            if v.result and v.result.trace.steps
        }
        if len(sizes) == len(views) and len(sizes) > 1:
            break
    else:
        return None
    smallest = min(sizes.values())
    big = sorted((r for r, n in sizes.items() if n > 1.5 * smallest), key=lambda r: -sizes[r])
    rest = [n for r, n in sizes.items() if r not in big]
    if not big:
        return None
    named = [f"{r} {sizes[r] / 1000:.1f} kB" for r in big]
    span = f"{min(rest) / 1000:.1f}–{max(rest) / 1000:.1f} kB" if min(rest) != max(rest) else f"{rest[0] / 1000:.1f} kB"
    who = f"the other {len(rest)}" if len(rest) > 1 else next(r for r in sizes if r not in big)
    return f"{case}: {', '.join(named)}; {who} {span}"


def _time(runs: Sequence[RunView]) -> str | None:
    """Wall seconds per runner over the document's runs: the fastest and the slowest named, and the median."""
    walls: dict[str, float] = {}
    for v in runs:
        if v.result:
            walls[v.runner] = walls.get(v.runner, 0.0) + v.result.totals.wall_s
    if len(walls) < 2:
        return None
    order = sorted(walls, key=lambda r: walls[r])
    if walls[order[0]] == walls[order[-1]]:
        return None
    middle = sorted(walls.values())[len(walls) // 2]
    cases = len({v.case for v in runs})
    over = f"over {cases} cases" if cases > 1 else "on its case"
    fast, slow = order[0], order[-1]
    fastest, slowest = f"{fast} {walls[fast]:.1f} s fastest", f"{slow} {walls[slow]:.1f} s slowest"
    return f"each runner {over}: {fastest}, {slowest}, median {middle:.1f} s"


def topics(doc: Any, *, caps: CapsDoc | None = None, caps_source: str = str(scorecard.CAPS_PATH)) -> list[Topic]:
    """The ways the runners of a results document differ, each one row; a case where all agree is one row.

    `caps` is the caps measurement the "tools of the last call" row is read from (None: that row is left out).
    """
    from looplab.records import results

    document = results.load(doc)
    runs = runs_from(document)
    cases = _firsts(runs)
    rows: list[Topic] = []
    diverging: list[Topic] = []
    not_run = {f"{v.runner} on {v.case}": v.error or "not run" for v in runs if v.result is None}
    for case, views in cases.items():
        if any(v.result is None for v in views.values()):
            continue
        if (
            describe_divergence({r: behaviour(v) for r, v in views.items()}).agree
            and len({_answer(v) for v in views.values()}) == 1
        ):
            rows.append(Topic(SAME, _same_line(case, views)))
    for case, views in cases.items():
        if (line := _stops(case, views)) is not None:
            diverging.append(Topic(STOPS, line))
    runners = list(dict.fromkeys(v.runner for v in runs))
    card = scorecard.build(runners, scorecard.observed(document), caps)
    if (line := _bad_calls(card)) is not None:
        diverging.append(Topic(BAD_CALLS, line))
    for case, views in cases.items():
        if (line := _at_cap(case, views)) is not None:
            diverging.append(Topic(AT_CAP, line))
    if caps is not None and (line := _last_tools(card, caps_source)) is not None:
        diverging.append(Topic(LAST_TOOLS, line))
    for label, make in ((FIRST_REQUEST, lambda: _first_request(cases)), (TIME, lambda: _time(runs))):
        if (line := make()) is not None:
            diverging.append(Topic(label, line))
    rows += diverging
    rows += [Topic(NOT_RUN, f"{who}: {' '.join(why.split())[:160]}") for who, why in not_run.items()]
    return rows


def _caps_or_none(load: Callable[[], CapsDoc | None]) -> CapsDoc | None:
    """The caps measurement, or None when it is missing or unreadable (the screen then leaves its row out)."""
    try:
        return load()
    except LooplabError:
        return None


def first_screen_lines(
    doc: Any,
    results_path: Path | str | None,
    *,
    width: int,
    caps: CapsDoc | None = None,
    out: Console | None = None,
) -> list[Text]:
    """The closing screen of a run, laid out for `width` columns: how the runners differ, and where the report is."""
    from looplab.records import results

    document = results.load(doc)
    rows = topics(document, caps=caps)
    runners = list(dict.fromkeys(c.runner for c in document.cells))
    cases = list(dict.fromkeys(c.case for c in document.cells))
    plural = "s" if len(cases) != 1 else ""
    differ = any(t.label not in (SAME, TIME) for t in rows)  # wall time always varies a little
    title = (
        f"how the {len(runners)} runners differ on {len(cases)} case{plural}"
        if differ
        else f"the {len(runners)} runners behaved the same on {len(cases)} case{plural}"
    )
    cells = [[Text(t.label, style="bold"), t.text] for t in rows]
    if results_path is not None:
        cells.append([Text("report", style="bold"), f"looplab report {results_path}"])
    cols = (render.Col("topic"), render.Col("how", prose=True))
    return render.table_lines(title, cols, cells, width=width, out=out, show_header=False)


def print_first_screen(
    doc: Any, results_path: Path | str | None, *, out: Console | None = None, caps: CapsDoc | None = None
) -> None:
    """Print `first_screen_lines` at the console's width; `caps` defaults to the caps measurement, if found."""
    out = out or render.console()
    caps = caps if caps is not None else _caps_or_none(scorecard.load_caps)
    out.print()
    for line in first_screen_lines(doc, results_path, width=out.width, caps=caps, out=out):
        out.print(line, overflow="fold")
