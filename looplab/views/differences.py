"""Where the runners of one results document differ, and how: the rows the closing screen of `looplab run`
(`looplab.views.first_screen`) and the HTML report's first screen both show, computed once here (`compare`).

Each way runners can differ is one topic, and each topic is one row that names the runners outside the
largest group and says what the others did, in the words of someone choosing a framework:

- stops: per case, the runners that stopped otherwise or after another number of model calls;
- bad call: on a case with malformed tool calls, who recovers and who stops, at the first malformed call or at
  the call to a tool that does not exist (the scorecard's `malformed` and `unknown tool` cells);
- at the cap: on a case where the runs hit `max_steps`, how the framework ended (returned without an answer,
  raised, or kept asking for model calls, which looplab's model boundary refused);
- last call: whether the framework runs the tools its last model call asked for when its own cap stops it (read
  from the committed caps measurement, as the scorecard does);
- agent tree: whose own cap holds a tree of agents (two children asked at once, three levels deep) and what the
  others' caps do there (the caps measurement, likewise);
- first request: the bytes of the first model request (the task plus what the framework adds);
- time: wall seconds over the document's runs;
- over repeats (a document whose cells ran twice or more): pass rate, model calls, tokens, cost and time, runner
  against runner over the same cases and repeats (`looplab.records.comparison`); a difference is named only where
  it holds at 95 %, otherwise the row says it is not distinguishable yet and how many repeats would tell. A case
  whose runs differ from repeat to repeat is one row, under `varies`, in place of its rows above (one repeat's runs
  would name noise as a difference); wall time is compared there, not under `time`.

A case on which every runner behaved the same (stop, model calls, tool calls, checks, answer) is one line, under
`same`, or under `all failed` when they agree on failing a check of the case.

How one case's runners differ in one line (`divergence`) is in `looplab.views.divergence`, and a run as the views
see it (`RunView`) in `looplab.views.runs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from looplab.records import results
from looplab.records.comparison import Comparison, compare_runners, repeats_of
from looplab.records.document import Document
from looplab.records.measurements import CapsDoc
from looplab.views import scorecard, scorecard_rows
from looplab.views.divergence import Behaviour, behaviour, describe_divergence, span, stop_phrase
from looplab.views.runs import RunView, first_runs, runs_from

__all__ = ["over_repeats"]


@dataclass(frozen=True)
class Topic:
    """One way the runners differ (or one case on which they agree): a short label, the case, one sentence."""

    label: str
    #: What differs (or what all did), naming the runners outside the largest group; without the case.
    text: str
    #: The case the row is about; None when it is about every case of the document.
    case: str | None = None
    #: An over-repeats row's differences that hold at 95 %, in a few words (`langgraph spends more tokens than
    #: handrolled`); an over-repeats row without any names no difference.
    holds: tuple[str, ...] = ()

    @property
    def names_difference(self) -> bool:
        """Whether the row names a difference (an over-repeats row may say that none holds yet)."""
        return self.label != REPEATS or bool(self.holds)

    @property
    def line(self) -> str:
        """The row's sentence with its case in front: `sloppy-calls: langgraph stopped on error ...`."""
        return f"{self.case}: {self.text}" if self.case else self.text


@dataclass(frozen=True)
class Differences:
    """The rows of one results document, with the runners and cases they are over: what both views show."""

    runners: tuple[str, ...]
    cases: tuple[str, ...]
    topics: tuple[Topic, ...]

    @property
    def differ(self) -> bool:
        """Whether any row says the runners differ (wall time always varies a little, so it does not count)."""
        return any(t.label not in (SAME, TIME, VARIES) and t.names_difference for t in self.topics)

    @property
    def title(self) -> str:
        """`how the 2 runners differ on 3 cases`, `the 12 runners behaved the same on 1 case`, or, for one runner,
        `handrolled on 3 cases (one runner: nothing to compare)`."""
        cases = f"{len(self.cases)} case{'s' if len(self.cases) != 1 else ''}"
        if len(self.runners) == 1:
            return f"{self.runners[0]} on {cases} (one runner: nothing to compare)"
        if self.differ:
            return f"how the {len(self.runners)} runners differ on {cases}"
        return f"the {len(self.runners)} runners behaved the same on {cases}"


#: The labels as the first screen shows them, in the order of its rows.
SAME, FAILED, RAN, VARIES, STOPS, BAD_CALLS, AT_CAP, LAST_TOOLS, TREE, FIRST_REQUEST, TIME, REPEATS, NOT_RUN = (
    "same",
    "all failed",
    "ran",
    "varies",
    "stops",
    "bad call",
    "at the cap",
    "last call",
    "agent tree",
    "1st request",
    "time",
    "over repeats",
    "not run",
)

#: How the scorecard's `unknown tool` cell reads after a run that stopped, as what the runner did (a verb phrase in
#: the plural): whether the run got as far as the made-up tool tells where it stopped.
_STOPPED_AT = {
    "not reached (the run ended first)": "stop at the first malformed call",
    "ends the run": "stop at the call to a tool that does not exist",
}
#: What the caps measurement's `last_call_tools` values say, as what the runner does.
_LAST_TOOLS = {"ran": "run them", "did not run": "skip them", "none asked for": "ask for none"}
#: What the caps measurement says of a framework's own cap over a tree of agents (the scorecard's `parallel_cap`
#: and `nested_cap` cells), as what its cap does.
_TREE_CAPS = {
    "the whole tree's calls": "hold it",
    "not the whole tree's": "let the children pass it",
    "each level's own": "count each level on its own",
    "not the third level's": "leave the third level uncapped",
}
#: How a framework ended a run its cap stopped, by the kind of its own end (a verb phrase in the plural).
_CAP_ENDS = {
    "returned": "return without an answer",
    "raised": "raise an exception",
    "refused by the model boundary": "keep asking for model calls, which looplab refuses",
}


def _conjugated(phrase: str, count: int) -> str:
    """`phrase` (its first word a verb in the plural: "stop at ...") for `count` runners: "stops at ..." for one.

    Punctuation after the verb stays after it: "recover, fixing ..." is "recovers, fixing ..."."""
    if count != 1:
        return phrase
    word, _, rest = phrase.partition(" ")
    verb = word.rstrip(",;:")
    verb = "does" if verb == "do" else verb + ("es" if verb.endswith(("s", "sh", "ch", "x", "o")) else "s")
    return f"{verb}{word[len(word.rstrip(',;:')) :]} {rest}".rstrip()


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


def _answer(view: RunView) -> str:
    answer = view.result.answer if view.result else None
    return " ".join((answer or "").split())  # whitespace differences are not different answers


def _same_line(views: dict[str, RunView]) -> str:
    """`all 12 answered in 5 model calls, the same answer` (one case's runs, which agree); for one runner, what it
    did."""
    first = next(iter(views.values()))
    result = first.result
    assert result is not None  # a case where every runner agrees and one did not run is under "not run"
    calls = result.totals.model_calls
    what = stop_phrase(str(result.stop_reason), (calls, calls))
    answers = {_answer(v) for v in views.values()}
    if answers != {""} and len(views) > 1:
        what += ", the same answer" if len(answers) == 1 else f", {len(answers)} different answers"
    if first.failed_checks:
        what += ", failing " + ", ".join(first.failed_checks)
    return f"all {len(views)} {what}" if len(views) > 1 else what


def _stops(views: dict[str, RunView]) -> str | None:
    """The case's runners compared by stop and model calls only; None when those agree."""
    line = describe_divergence(
        {r: Behaviour(behaviour(v).stop, behaviour(v).model_calls) for r, v in views.items() if v.result}
    )
    return None if line.agree else line.line.rstrip(".")


def _at_cap(views: dict[str, RunView]) -> str | None:
    """How each framework ended a run stopped at max_steps, and after how many model calls; None unless they ended
    in more than one way."""
    capped = {r: v.result for r, v in views.items() if v.result and str(v.result.stop_reason) == "max_steps"}
    if len(capped) < 2:
        return None
    ways = {
        runner: _CAP_ENDS.get(result.native_end.kind if result.native_end else "returned", "end otherwise")
        for runner, result in capped.items()
    }
    if len(set(ways.values())) < 2:
        return None
    calls = sorted(result.totals.model_calls for result in capped.values())
    after = span(calls[0], calls[-1])
    return f"after {after} model call{'' if calls == [1] * len(calls) else 's'}, {_grouped_line(ways)}"


def _verdict(cell: scorecard_rows.Cell) -> str:
    """A bad-call cell's verdict: `stops: error` without the framework's reason the scorecard adds in brackets."""
    return cell.text.split(" (", 1)[0] if cell.text.startswith("stops: ") else cell.text


def _bad_call_phrase(malformed: scorecard_rows.Cell, unknown: scorecard_rows.Cell) -> str:
    """What a run did with malformed tool calls and a call to a tool that does not exist, as a verb phrase in the
    plural (`recover`, `stop at the first malformed call`), from the scorecard's two cells."""
    if malformed.text.startswith("recovers"):
        fixed = "(" in malformed.text  # the framework repaired the arguments before the tools saw them
        return "recover, fixing bad arguments themselves" if fixed else "recover"
    stop = _verdict(malformed).removeprefix("stops: ")
    where = _STOPPED_AT.get(unknown.text.split(":", 1)[0] if unknown.text.startswith("ends") else unknown.text)
    if where is None:  # past both bad calls, then stopped on something else
        return f"get past the bad calls, then stop on {stop}"
    return where if stop == "error" else f"{where} ({stop})"


def _bad_calls(card: scorecard_rows.Scorecard) -> tuple[str, str] | None:
    """(case, line): who recovers from malformed tool calls and who stops, and where; None where not measured."""
    ways = {
        c.runner: _bad_call_phrase(c.cells["malformed"], c.cells["unknown_tool"])
        for c in card.cards
        if c.cells["malformed"].measured and c.cells["unknown_tool"].measured
    }
    if len(set(ways.values())) < 2:
        return None
    case = next(c.cells["malformed"].evidence for c in card.cards if c.cells["malformed"].measured)
    return (case or "").removeprefix("eval: "), _grouped_line(ways)


def _last_tools(card: scorecard_rows.Scorecard) -> str | None:
    """Stopped by its own cap, whether a framework runs the tools its last model call asked for (the caps
    measurement)."""
    ways = {
        c.runner: _LAST_TOOLS.get(c.cells["last_tools"].text, c.cells["last_tools"].text)
        for c in card.cards
        if c.cells["last_tools"].measured
    }
    if len(set(ways.values())) < 2:
        return None
    return f"at their own cap, after a model call that asks for tools: {_grouped_line(ways)}"


def _tree_caps(card: scorecard_rows.Scorecard) -> list[str]:
    """Whose own cap holds a tree of agents, two children asked at once and three levels deep (the caps
    measurement), in one line; a framework that cannot express a shape is judged on the other."""
    ways = {
        c.runner: {_TREE_CAPS[c.cells[k].text] for k in ("parallel_cap", "nested_cap") if c.cells[k].text in _TREE_CAPS}
        for c in card.cards
    }
    ways = {runner: said for runner, said in ways.items() if said}
    holds = [runner for runner, said in ways.items() if said == {"hold it"}]
    if not holds or len(holds) == len(ways):
        return []
    others, hold = len(ways) - len(holds), "holds" if len(holds) == 1 else "hold"
    return [
        f"{_every_name(holds)} alone {hold} a tree of agents to their own cap (two children at once, three levels "
        f"deep); the other {others} let the agents below pass it"
    ]


def _first_request(cases: dict[str, dict[str, RunView]]) -> tuple[str, str] | None:
    """(case, line): the first request's size on the first case every runner ran, the outsized ones named, the rest a
    range."""
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
    return case, f"{', '.join(named)}; {who} {span}"


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


#: What an over-repeats row says of two runners whose difference does not hold at 95 %.
NOT_YET = "not distinguishable yet"
#: How each compared metric reads, for the runner above the other (a verb phrase, its verb singular), and how its
#: values are written.
_ABOVE = {
    "pass rate": ("passes more often than", "{:.0%}"),
    "model calls": ("makes more model calls than", "{:g}"),
    "tokens": ("spends more tokens than", "{:,.0f}"),
    "cost": ("costs more than", "${:.4f}"),
    "time": ("takes longer than", "{:.2f} s"),
}
#: The distinguishable pairs an over-repeats row names before it counts the rest.
_NAMED_PAIRS = 3


def _varies(runs: Sequence[RunView]) -> dict[str, str]:
    """Per case whose runs differ from repeat to repeat for some runner: who, in how many ways (one repeat's runs
    would name noise as a difference)."""
    ways: dict[str, dict[str, set[tuple[Behaviour, str]]]] = {}
    for v in runs:
        ways.setdefault(v.case, {}).setdefault(v.runner, set()).add((behaviour(v), _answer(v)))
    found = {}
    for case, by_runner in ways.items():
        varied = {r: len(w) for r, w in by_runner.items() if len(w) > 1}
        if varied:
            named = ", ".join(f"{r} {n} ways" for r, n in varied.items())
            found[case] = f"the runs differ from repeat to repeat ({named}): compared over repeats below"
    return found


def _p(value: float) -> str:
    return "p < 0.001" if value < 0.001 else f"p = {value:.3f}"


def _medians(c: Comparison, fmt: str, higher_first: bool) -> str:
    """The two runners' values over their pairs: passes of the pairs, or medians."""
    if c.metric == "pass rate":
        shown = [f"{int(n)}/{c.counts.pairs}" for n in c.shown]
    else:
        shown = [fmt.format(v) for v in c.shown]
    return " and ".join(shown if higher_first else shown[::-1])


def _by(c: Comparison, fmt: str) -> str:
    """Where the pairs differ, by how much the higher runner is above the other: the median and its 95 % interval."""
    if c.difference is None:
        return ""
    middle, low, high = c.difference if c.higher == c.first else (-x for x in (c.difference[0], *c.difference[2:0:-1]))
    return f"; where they differ, by {fmt.format(middle)} [{fmt.format(low)} to {fmt.format(high)}]"


def _repeats_row(metric: str, found: list[Comparison]) -> str:
    """One metric over every pair of runners: the differences that hold, named, and what the rest would need."""
    verb, fmt = _ABOVE[metric]
    test = "McNemar exact" if metric == "pass rate" else "sign test"
    held = [c for c in found if c.distinguishable and c.higher is not None]
    repeats = max(c.repeats for c in found)
    clauses = []
    for c in held[:_NAMED_PAIRS]:
        lower = c.second if c.higher == c.first else c.first
        above, below = (c.counts.above, c.counts.below) if c.higher == c.first else (c.counts.below, c.counts.above)
        what = "pass rates" if metric == "pass rate" else "medians"
        clauses.append(
            f"{c.higher} {verb} {lower} in {above} of {c.counts.pairs} paired runs, the reverse in {below} "
            f"({test} {_p(c.p_value)}; {what} {_medians(c, fmt, c.higher == c.first)}{_by(c, fmt)})"
        )
    if len(held) > _NAMED_PAIRS:
        clauses.append(f"{len(held) - _NAMED_PAIRS} more pairs of runners likewise")
    rest = [c for c in found if c not in held]
    if all(c.counts.tied == c.counts.pairs for c in found):
        pairs = max(c.counts.pairs for c in found)
        who = f"{found[0].first} and {found[0].second}" if len(found) == 1 else f"all {len(found)} pairs of runners"
        return f"{metric}: {who} the same in all {pairs} paired runs over {repeats} repeats"
    if rest and len(found) == 1:
        c = rest[0]
        needed = c.repeats_needed
        tell = (
            f"about {needed} repeats would tell them apart if the spread held"
            if needed is not None
            else "no difference seen (as many pairs each way)"
        )
        values = "pass rates" if metric == "pass rate" else "medians"
        clauses.append(
            f"{c.first} and {c.second} {NOT_YET} after {repeats} repeats ({values} "
            f"{_medians(c, fmt, True)}; {test} {_p(c.p_value)}); {tell}"
        )
    elif rest:
        needed = [n for c in rest if (n := c.repeats_needed) is not None]
        tell = f"; the closest would need about {min(needed)} repeats" if needed else ""
        pairs = f"{len(rest)} of {len(found)} pairs of runners" if held else f"all {len(found)} pairs of runners"
        clauses.append(f"{pairs} {NOT_YET} after {repeats} repeats{tell}")
    return f"{metric}: " + "; ".join(clauses)


def over_repeats(doc: Any) -> list[Topic]:
    """With repeats, the runners compared over them: a `varies` row for each case whose runs differ from repeat to
    repeat, then one `over repeats` row a metric; nothing without repeats. (`compare` gives these among the rest;
    this is them alone, without the scorecard the rest reads.)"""
    document = results.load(doc)
    if repeats_of(document) < 2:
        return []
    runners = list(dict.fromkeys(c.runner for c in document.cells))
    rows = [Topic(VARIES, line, case) for case, line in _varies(runs_from(document)).items()]
    return rows + (_over_repeats(document, runners) if len(runners) > 1 else [])


def _over_repeats(document: Document, runners: Sequence[str]) -> list[Topic]:
    """The over-repeats rows: one a metric, runner against runner (`looplab.records.comparison`)."""
    by_metric: dict[str, list[Comparison]] = {}
    for c in compare_runners(document, runners):
        by_metric.setdefault(c.metric, []).append(c)
    return [Topic(REPEATS, _repeats_row(metric, found), holds=_holds(found)) for metric, found in by_metric.items()]


def _holds(found: list[Comparison]) -> tuple[str, ...]:
    """Each difference of `found` that holds at 95 %, in a few words: `langgraph spends more tokens than handrolled`."""
    said = []
    for c in found:
        if c.distinguishable and c.higher is not None:
            lower = c.second if c.higher == c.first else c.first
            said.append(f"{c.higher} {_ABOVE[c.metric][0]} {lower}")
    return tuple(said)


def topics(doc: Any, *, caps: CapsDoc | None = None) -> list[Topic]:
    """The ways the runners of a results document differ, each one row; a case where all agree is one row.

    `caps` is the caps measurement the "tools of the last call" row is read from (None: that row is left out).
    """
    return list(compare(doc, caps=caps).topics)


def compare(doc: Any, *, caps: CapsDoc | None = None) -> Differences:
    """How the runners of a results document differ: the rows both the terminal's closing screen and the HTML report
    show (as data; each view only lays them out), with the runners and cases they are over.

    `caps` is the caps measurement the "tools of the last call" row is read from (None: that row is left out).
    """
    document = results.load(doc)
    runs = runs_from(document)
    repeated = repeats_of(document) >= 2
    over = over_repeats(document)
    varies = {t.case for t in over if t.label == VARIES}
    # A case whose runs vary is compared over its repeats, not by its first runs.
    cases = {case: views for case, views in first_runs(runs).items() if case not in varies}
    runners = list(dict.fromkeys(v.runner for v in runs))
    capped = {case: line for case, views in cases.items() if (line := _at_cap(views)) is not None}
    rows: list[Topic] = [t for t in over if t.label == VARIES]
    diverging: list[Topic] = []
    not_run = {f"{v.runner} on {v.case}": v.error or "not run" for v in runs if v.result is None}
    for case, views in cases.items():
        if any(v.result is None for v in views.values()) or case in capped:
            continue  # a case the runners ended in different ways at the cap is said under "at the cap"
        if (
            describe_divergence({r: behaviour(v) for r, v in views.items()}).agree
            and len({_answer(v) for v in views.values()}) == 1
        ):
            # Agreeing on a failed check is no agreement to read past: it has a row of its own.
            label = RAN if len(runners) == 1 else FAILED if next(iter(views.values())).failed_checks else SAME
            rows.append(Topic(label, _same_line(views), case))
    card = scorecard.build(runners, scorecard.observed(document), caps)
    bad_calls = _bad_calls(card)
    for case, views in cases.items():
        # The case of malformed calls says who stopped, and where, under "bad call".
        if (line := _stops(views)) is not None and (bad_calls is None or case != bad_calls[0]):
            diverging.append(Topic(STOPS, line, case))
    if bad_calls is not None:
        diverging.append(Topic(BAD_CALLS, bad_calls[1], bad_calls[0]))
    diverging += [Topic(AT_CAP, line, case) for case, line in capped.items()]
    if caps is not None and (line := _last_tools(card)) is not None:
        diverging.append(Topic(LAST_TOOLS, line))
    if caps is not None:
        diverging += [Topic(TREE, line) for line in _tree_caps(card)]
    if (found := _first_request(cases)) is not None:
        diverging.append(Topic(FIRST_REQUEST, found[1], found[0]))
    if not repeated and (line := _time(runs)) is not None:
        diverging.append(Topic(TIME, line))
    diverging += [t for t in over if t.label == REPEATS]
    rows += diverging
    rows += [Topic(NOT_RUN, f"{who}: {' '.join(why.split())[:160]}") for who, why in not_run.items()]
    return Differences(
        runners=tuple(dict.fromkeys(c.runner for c in document.cells)),
        cases=tuple(dict.fromkeys(c.case for c in document.cells)),
        topics=tuple(rows),
    )
