"""How the runners of one case differ, in one line: what each run did as far as comparing runners goes
(`behaviour`), and the line that names the runners outside the largest group and what they did otherwise
(`divergence`), which the report shows above each case and the closing screen of `looplab run` reads."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from looplab.shared_tools.records import ToolCallRecord
from looplab.views.runs import RunView

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


def span(low: int, high: int) -> str:
    """`3`, or `3–5` where the two differ."""
    return str(low) if low == high else f"{low}–{high}"


def stop_phrase(stop: str, calls: tuple[int, int], *, short: str = "") -> str:
    """`answered in 5 model calls`; `short="verb"` drops the unit (`answered in 5`), `short="all"` the verb too."""
    count = span(*calls)
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
        what = stop_phrase(b.stop, (b.model_calls, b.model_calls))
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
            bits.append(stop_phrase(b.stop, calls_of(names), short="all" if b.stop == previous_stop else ""))
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
        tail.append(stop_phrase(usual.stop, calls_of(largest), short="verb"))
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
