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
- first request: the bytes of the first model request (the task plus what the framework adds);
- time: wall seconds over the document's runs.

A case on which every runner behaved the same (stop, model calls, tool calls, checks, answer) is one line, under
`same`, or under `all failed` when they agree on failing a check of the case.

The comparison underneath lives here too: a run as the views see it (`RunView`), what it did as far as comparing
runners goes (`behaviour`), and the one line on how a case's runners differ (`divergence`), which the report shows
above each case.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from looplab.adapters.contract.result import RunResult
from looplab.records import results
from looplab.records.measurements import CapsDoc
from looplab.shared_tools.records import ToolCallRecord
from looplab.views import scorecard

__all__ = [
    "LINE_ARG_CHARS",
    "MOST_VARIANTS",
    "Behaviour",
    "Differences",
    "Divergence",
    "RunView",
    "Topic",
    "behaviour",
    "compare",
    "describe_divergence",
    "divergence",
    "first_runs",
    "runner_names",
    "runs_from",
    "slug",
    "topics",
]


@dataclass
class RunView:
    """One run (or one cell that did not run) as the report shows it."""

    runner: str
    case: str
    repeat: int
    result: RunResult | None
    passed: bool | None = None
    failed_checks: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def anchor(self) -> str:
        """The HTML id of this run's details, linked from the matrix."""
        return slug(f"run-{self.runner}-{self.case}-{self.repeat}")

    @property
    def stop(self) -> str:
        """The stop reason, or 'not run'."""
        return str(self.result.stop_reason) if self.result else "not run"

    @property
    def why(self) -> str:
        """A short reason for the tooltip: the first failed check, the stop detail or the error."""
        if self.error:
            return self.error
        if self.failed_checks:
            return "failed: " + ", ".join(self.failed_checks)
        return (self.result.stop_detail or "") if self.result else ""


def slug(text: str) -> str:
    """An HTML id from free text."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")


def runs_from(doc: Any) -> list[RunView]:
    """The runs in a results document (a `results.Document`, or its parsed JSON of any readable schema).

    Each result is paired with its cell (pass/fail and failed checks); cells that did not run stay
    as rows without a result. Schema 1 `run` output has no checks, so `passed` stays None there.
    """
    document = results.load(doc)
    return [
        RunView(c.runner, c.case, c.repeat, document.result_of(c), c.passed, c.failed_checks, c.error)
        for c in document.cells
    ]


#: How much of a tool call's first argument a divergence line quotes.
LINE_ARG_CHARS = 32
#: Past this many behaviours in one case, a divergence line compares model calls and stops only, then stops only.
MOST_VARIANTS = 4


@dataclass(frozen=True)
class Behaviour:
    """What one run did, as far as comparing runners goes (tokens and bytes differ by framework by design)."""

    stop: str  # the stop reason, or "not run"
    model_calls: int
    #: Each step's tool calls as `name(first argument)`, sorted within the step: the calls of one model
    #: reply may run at once, so their order within a step is the scheduler's, not the runner's.
    steps: tuple[tuple[str, ...], ...] = ()
    failed_checks: tuple[str, ...] = ()


def _call_label(call: ToolCallRecord) -> str:
    first = call.first_arg if call.args else ""
    return f"{call.name}({first if len(first) <= LINE_ARG_CHARS else first[: LINE_ARG_CHARS - 1] + '…'})"


def behaviour(view: RunView) -> Behaviour:
    """The behaviour of one run: how it stopped, its model calls, its tool calls a step, the checks it failed."""
    if view.result is None:
        return Behaviour("not run", 0, (), tuple(view.failed_checks))
    return Behaviour(
        stop=str(view.result.stop_reason),
        model_calls=view.result.totals.model_calls,
        steps=tuple(tuple(sorted(_call_label(c) for c in step.tool_calls)) for step in view.result.trace.steps),
        failed_checks=tuple(view.failed_checks),
    )


@dataclass(frozen=True)
class Divergence:
    """How a case's runners differ, in one line; `differs` names the runners outside the largest group."""

    agree: bool
    line: str
    differs: tuple[str, ...] = ()


def divergence(views: Sequence[RunView]) -> Divergence:
    """One line saying how the runners of one case differ (or that they agree), from their first runs."""
    firsts: dict[str, RunView] = {}
    for view in views:
        if view.runner not in firsts or (firsts[view.runner].result is None and view.result is not None):
            firsts[view.runner] = view
    return describe_divergence({runner: behaviour(view) for runner, view in firsts.items()})


def _span(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}–{high}"


def _stop_phrase(stop: str, calls: tuple[int, int], *, short: str = "") -> str:
    """`answered in 5 model calls`; `short="verb"` drops the unit (`answered in 5`), `short="all"` the verb too."""
    count = _span(*calls)
    unit = "" if short else (" model call" if calls == (1, 1) else " model calls")
    if stop == "not run":
        return "did not run"
    if stop == "final_answer":
        return f"in {count}{unit}" if short == "all" else f"answered in {count}{unit}"
    head = {"max_steps": "stopped at max_steps", "rejected": "stopped on a rejection"}.get(stop, f"stopped on {stop}")
    return f"after {count}{unit}" if short == "all" else f"{head} after {count}{unit}"


def runner_names(runners: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`; past four, `a, b, c and 3 others`."""
    if len(runners) > 4:
        return f"{', '.join(runners[:3])} and {len(runners) - 3} others"
    return " and ".join([", ".join(runners[:-1]), runners[-1]]) if len(runners) > 1 else "".join(runners)


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n}×")


def _most_a_step(b: Behaviour) -> int:
    return max((len(step) for step in b.steps), default=0)


def _tool_phrase(b: Behaviour, usual: Behaviour) -> tuple[str, str, str]:
    """How `b`'s tool calls differ from `usual`'s: (kind, finite phrase, participle phrase); kind "" if alike."""
    if b.steps == usual.steps or "not run" in (b.stop, usual.stop):
        return "", "", ""
    mine = Counter(c for step in b.steps for c in step)
    theirs = Counter(c for step in usual.steps for c in step)
    if mine != theirs:
        extra, missing = mine - theirs, theirs - mine
        if sum(extra.values()) == sum(missing.values()) == 1:  # one call swapped for another
            swap = f"{next(iter(extra))} instead of {next(iter(missing))}"
            return "tools", f"called {swap}", f"calling {swap}"
        diffs = []
        for label in dict.fromkeys([*mine, *theirs]):
            x, y = mine[label], theirs[label]
            if x == y:
                continue
            if y == 0:
                more = "" if x == 1 else f" {_times(x)}"
                diffs.append((f"also called {label}{more}", f"also calling {label}{more}"))
            elif x == 0:
                diffs.append((f"never called {label}", f"never calling {label}"))
            else:
                times = f"{_times(x)} (not {_times(y)})"
                diffs.append((f"called {label} {times}", f"calling {label} {times}"))
        more = f" and {len(diffs) - 2} more" if len(diffs) > 2 else ""
        return "tools", ", ".join(d[0] for d in diffs[:2]) + more, ", ".join(d[1] for d in diffs[:2]) + more
    most, usual_most = _most_a_step(b), _most_a_step(usual)
    if most == 1 and usual_most > 1:
        return "grouping", "made its tool calls one a step", "making its tool calls one a step"
    if most > 1 and most != usual_most:
        return "grouping", f"batched up to {most} tool calls in a step", f"batching up to {most} tool calls in a step"
    mine_steps, their_steps = [s for s in b.steps if s], [s for s in usual.steps if s]
    if mine_steps == their_steps:
        # The same tool calls step for step; only model calls that asked for no tool differ, which the
        # model-call count says (or, with the same count, where they fell).
        if len(b.steps) != len(usual.steps):
            return "", "", ""
        return "spread", "answered without tool calls at other steps", "answering without tool calls at other steps"
    if [len(s) for s in mine_steps] != [len(s) for s in their_steps]:
        return "spread", "spread the same tool calls over its steps differently", "spreading its tool calls differently"
    return "order", "made the same tool calls in another order", "making the same tool calls in another order"


def describe_divergence(behaviours: dict[str, Behaviour]) -> Divergence:
    """One line on how the runners' behaviours differ, or that they agree (runners in the dict's order).

    The runners are grouped by behaviour and the largest group (the first, on a tie) is the yardstick:
    each other group is named with what it did differently (stop and model calls first, then its tool
    calls, then its checks), and the line ends with what the largest group did. Past `MOST_VARIANTS`
    behaviours the line compares only stops and model calls, then only stops, so it stays one line.
    """
    if not behaviours:
        return Divergence(True, "No runs.")
    runners = list(behaviours)
    fine: dict[Behaviour, list[str]] = {}
    for runner, b in behaviours.items():
        fine.setdefault(b, []).append(runner)
    if len(fine) == 1:
        b = next(iter(fine))
        calls = sum(len(step) for step in b.steps)
        what = _stop_phrase(b.stop, (b.model_calls, b.model_calls))
        if b.stop != "not run":
            same = {0: "no tool calls", 1: "the same tool call"}.get(calls, f"the same {calls} tool calls")
            what += f", {same}"
        if b.failed_checks:
            what += f", failing {', '.join(b.failed_checks)}"
        if len(runners) == 1:
            return Divergence(True, f"Only {runners[0]} ran this case: it {what}.")
        return Divergence(True, f"All {len(runners)} runners agree: {what}.")

    # The level of detail: whole behaviours, else (stop, model calls), else the stop alone.
    levels = (lambda b: b, lambda b: (b.stop, b.model_calls), lambda b: b.stop)
    for level, key in enumerate(levels):
        groups: dict[Any, list[str]] = {}
        for runner, b in behaviours.items():
            groups.setdefault(key(b), []).append(runner)
        if len(groups) <= MOST_VARIANTS or level == len(levels) - 1:
            break
    largest = max(groups.values(), key=len)  # max keeps the first of equals: the earlier runner wins a tie
    usual = behaviours[largest[0]]

    def calls_of(names: list[str]) -> tuple[int, int]:
        counts = [behaviours[n].model_calls for n in names]
        return min(counts), max(counts)

    clauses: list[str] = []
    kinds: set[str] = set()
    previous_stop = None
    for names in groups.values():
        if names is largest:
            continue
        b = behaviours[names[0]]
        bits: list[str] = []
        stop_differs = b.stop != usual.stop or calls_of(names) != calls_of(largest)
        if stop_differs:
            kinds.add("stop")
            # Runs of clauses with the same stop say it once: "a stopped on error after 1 model call; b after 3".
            bits.append(_stop_phrase(b.stop, calls_of(names), short="all" if b.stop == previous_stop else ""))
            previous_stop = b.stop
        if level == 0:
            kind, finite, participle = _tool_phrase(b, usual)
            if kind:
                kinds.add(kind)
                bits.append(participle if bits else finite)
            if b.failed_checks != usual.failed_checks:
                kinds.add("checks")
                failing = f"failing {', '.join(b.failed_checks)}" if b.failed_checks else "passing its checks"
                bits.append(failing if bits else failing.replace("failing", "failed").replace("passing", "passed"))
        if not bits:  # a recorded run's count matches its steps; this guards hand-made records
            bits.append("ran otherwise step by step")
        clauses.append(f"{runner_names(names)} {', '.join(bits)}")

    tail: list[str] = []
    if "stop" in kinds:
        tail.append(_stop_phrase(usual.stop, calls_of(largest), short="verb"))
    if "grouping" in kinds:
        most = _most_a_step(usual)
        if most > 1:
            tail.append(f"{'batching' if tail else 'batched'} up to {most} tool calls in a step")
        else:
            tail.append("one tool call a step" if tail else "made one tool call a step")
    if "checks" in kinds:
        verb = "failing" if tail else "failed"
        tail.append(f"{verb} {', '.join(usual.failed_checks)}" if usual.failed_checks else verb.replace("fail", "pass"))
    if not tail:  # only tool calls differ: "a also called X; the other 11 did not"
        tail.append("did not" if len(clauses) == 1 else "ran alike")
    variants = len({behaviours[n] for n in largest})
    if variants > 1:
        tail.append(f"with {variants} different sets of tool calls")
    others = len(largest)
    who = runner_names(largest) if others <= 2 else f"the other {others}"
    clauses.append(f"{who} {', '.join(tail)}")
    differs = tuple(r for r in runners if r not in largest)
    return Divergence(False, "; ".join(clauses) + ".", differs)


@dataclass(frozen=True)
class Topic:
    """One way the runners differ (or one case on which they agree): a short label, the case, one sentence."""

    label: str
    #: What differs (or what all did), naming the runners outside the largest group; without the case.
    text: str
    #: The case the row is about; None when it is about every case of the document.
    case: str | None = None

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
        return any(t.label not in (SAME, TIME) for t in self.topics)

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
SAME, FAILED, RAN, STOPS, BAD_CALLS, AT_CAP, LAST_TOOLS, FIRST_REQUEST, TIME, NOT_RUN = (
    "same",
    "all failed",
    "ran",
    "stops",
    "bad call",
    "at the cap",
    "last call",
    "1st request",
    "time",
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


def first_runs(runs: Sequence[RunView]) -> dict[str, dict[str, RunView]]:
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


def _same_line(views: dict[str, RunView]) -> str:
    """`all 12 answered in 5 model calls, the same answer` (one case's runs, which agree); for one runner, what it
    did."""
    first = next(iter(views.values()))
    result = first.result
    assert result is not None  # a case where every runner agrees and one did not run is under "not run"
    calls = result.totals.model_calls
    what = _stop_phrase(str(result.stop_reason), (calls, calls))
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
    after = _span(calls[0], calls[-1])
    return f"after {after} model call{'' if calls == [1] * len(calls) else 's'}, {_grouped_line(ways)}"


def _verdict(cell: scorecard.Cell) -> str:
    """A bad-call cell's verdict: `stops: error` without the framework's reason the scorecard adds in brackets."""
    return cell.text.split(" (", 1)[0] if cell.text.startswith("stops: ") else cell.text


def _bad_call_phrase(malformed: scorecard.Cell, unknown: scorecard.Cell) -> str:
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


def _bad_calls(card: scorecard.Scorecard) -> tuple[str, str] | None:
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


def _last_tools(card: scorecard.Scorecard) -> str | None:
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
    cases = first_runs(runs)
    runners = list(dict.fromkeys(v.runner for v in runs))
    capped = {case: line for case, views in cases.items() if (line := _at_cap(views)) is not None}
    rows: list[Topic] = []
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
    if (found := _first_request(cases)) is not None:
        diverging.append(Topic(FIRST_REQUEST, found[1], found[0]))
    if (line := _time(runs)) is not None:
        diverging.append(Topic(TIME, line))
    rows += diverging
    rows += [Topic(NOT_RUN, f"{who}: {' '.join(why.split())[:160]}") for who, why in not_run.items()]
    return Differences(
        runners=tuple(dict.fromkeys(c.runner for c in document.cells)),
        cases=tuple(dict.fromkeys(c.case for c in document.cells)),
        topics=tuple(rows),
    )
