"""The caps doc's budgets beyond one agent's steps: the `max_steps` knob when the agent delegates, and the
framework's own run-wide token budget, each measured as `looplab caps` measures a knob.

Under delegation, the parent hands one question to a child that never stops (`DelegatesToOneThatNeverStops`) and
answers with whatever its delegating tool returns; the rows say how many of the run's calls were each agent's (the
record names the agent of every call), how the run ended, and what the parent was handed back. A token budget is
measured with the runaway probe at a few budgets: how many tokens the run spent, and on which call it stopped
against the call whose reply took the total past the budget.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from looplab.adapters.contract.agents import MAIN_AGENT
from looplab.adapters.contract.limits import StopReason
from looplab.adapters.contract.runner import KnobDefault, Probe
from looplab.records.caps_changes import RACE_SLACK
from looplab.records.measurements import (
    SAFETY_STOP,
    CapsDoc,
    CostReport,
    CostRow,
    DelegatedTokenRow,
    DelegationReport,
    DelegationRow,
    Ending,
    TokenReport,
    TokenRow,
)
from looplab.scenarios.cases import load_cases
from looplab.scenarios.scripted.probes import PARENT_SAW
from looplab.views.markdown import cell, counted, ending_text, headline

if TYPE_CHECKING:
    from looplab.adapters.contract.agents import Delegate
    from looplab.adapters.contract.result import RunResult
    from looplab.adapters.session import Runner

#: One probe run, as `caps.Prober.run` makes it: `(adapter, probe server, probe, delegate=...) -> RunResult`.
ProbeRun = Callable[..., "RunResult"]

#: The probe server whose parent delegates to a child that never stops.
DELEGATING_PROBE = "delegates-to-never-stops"
#: The probe server whose parent asks two children, each never stopping, in one reply.
PARALLEL_PROBE = f"{DELEGATING_PROBE}:2"
#: The `max_steps` knob's values under delegation (None: unset, the framework's own defaults).
DELEGATION_VALUES: tuple[int | None, ...] = (None, 3, 5)
#: Its values with two children at once and three levels deep.
SHAPE_VALUES = (3, 5)
#: The parent's value when its child is left at the framework's default.
CHILD_DEFAULT_VALUE = 3
#: Token budgets tried: a few of the runaway's calls each (its first request is some 500 tokens).
TOKEN_VALUES = (1500, 4000)
#: The dollar budgets a framework's own cost budget is measured at (priced by the framework's table).
COST_VALUES_USD = (0.02, 0.05)
#: Seconds a cost-budget run may take before looplab's deadline cuts it: a run that ends takes a few.
COST_DEADLINE_S = 20.0
#: How much of what the parent was handed back the doc keeps.
SAW_CHARS = 160


def delegation(run: ProbeRun, adapter: Runner) -> DelegationReport | None:
    """The runner's `max_steps` knob measured with the delegating probe (one child; two asked in one reply; three
    levels, each where the framework can express it); None for a runner that cannot delegate."""
    if adapter.delegation is None:
        return None
    child, knob = _child(), adapter.knobs[0]

    def rows_of(server: str, values: tuple[int | None, ...], tree: Delegate) -> list[DelegationRow]:
        """The delegating probe `server` run at each of `values`, handing its question to `tree`."""
        return [_delegation_row(run(adapter, server, Probe(knob=knob, value=v), delegate=tree), v, tree)
                for v in values]  # fmt: skip

    rows = rows_of(DELEGATING_PROBE, DELEGATION_VALUES, child)
    report = DelegationReport(
        how=adapter.delegation, knob=knob, counts=_whose(rows), rows=rows, counters_hold=counters_hold(rows)
    )
    if "parallel" not in adapter.delegation_gaps:
        report.parallel = rows_of(PARALLEL_PROBE, SHAPE_VALUES, child)
        report.parallel_counts = _past_the_value(report.parallel, "two children asked in one reply")
        report.parallel_races = adapter.delegation_races.get("parallel")
    value = CHILD_DEFAULT_VALUE
    probe = Probe(knob=knob, value=value, child_default=True)
    report.child_default = _delegation_row(run(adapter, DELEGATING_PROBE, probe, delegate=child), value, child)
    default = adapter.knob_defaults().get(knob)
    report.child_default_counts = _at_its_default(report.child_default, rows, default)
    if "nested" not in adapter.delegation_gaps:
        report.nested = rows_of(DELEGATING_PROBE, SHAPE_VALUES, _child("delegation-nested"))
        report.nested_counts = _third_level(report.nested)
    return report


def _delegation_row(result: RunResult, value: int | None, child: Delegate) -> DelegationRow:
    """A delegating probe run at `value`: each agent's calls (the child's name counts every child; a nested tree's
    third agent is the grandchild), how it ended, and what the parent was handed back."""
    agents = [s.model_call.agent for s in result.trace.steps]
    child_calls = [n for n, agent in enumerate(agents, 1) if agent == child.name]
    answer = result.answer or ""
    # What the parent was handed, when it answered as the probe does (else the run ended before it saw it). A
    # framework that strips its final answer drops the prefix's space when the child handed back nothing.
    answered = result.stop_reason == StopReason.FINAL_ANSWER and answer.startswith(PARENT_SAW.rstrip())
    below, calls = child.delegate, result.totals.model_calls
    third = [n for n, agent in enumerate(agents, 1) if below is not None and agent == below.name]
    return DelegationRow(
        value=value,
        model_calls=calls,
        parent_calls=agents.count(MAIN_AGENT),
        child_calls=len(child_calls),
        ending=Ending(how="the parent answered", counters=result.native_end.counters if result.native_end else {})
        if answered
        else Ending.of(result.native_end, result.totals.model_calls),
        parent_saw=_short(answer.removeprefix(PARENT_SAW.rstrip())) if answered else None,
        child_last_call=child_calls[-1] if child_calls else None,
        grandchild_calls=len(third) if below is not None else None,
        grandchild_last_call=third[-1] if third else None,
    )


def _at_its_default(row: DelegationRow, rows: list[DelegationRow], default: KnobDefault | None) -> str:
    """What a child left at its framework's default did under its parent's cap (`row`), beside the run with both at
    that value (`rows`): on to looplab's safety stop, the same calls (it is on the parent's counter), or its own."""
    parent, made = f"under a parent's cap of {row.value}", counted(row.child_calls, "call")
    same = next((r for r in rows if r.value == row.value), None)
    alike = same is not None and same.child_calls == row.child_calls
    if row.model_calls >= SAFETY_STOP:
        also = ", as when its knob is set too" if alike else ""
        return f"uncapped: {parent} the child ran on to looplab's safety stop ({made}{also})"
    if alike:
        return f"the parent's cap holds it: {parent} the child made {made}, as when capped too"
    said = "" if default is None or default.value is None else f"; the knob's default is {default.value}"
    return f"its own default: {parent} the child made {made}{said}"


def _past_the_value(rows: list[DelegationRow], shape: str) -> str:
    """How far a run of `shape` went past the knob's value, read off its rows: not at all (the knob holds the whole
    tree), by no more than the children's requests out at once (`RACE_SLACK`), or further."""
    over = [(r.value or 0, r.model_calls - (r.value or 0)) for r in rows]
    if all(by <= 0 for _, by in over):
        return f"the whole tree's calls: with {shape}, at cap N the run made at most N"
    at = ", ".join(f"at {v}, {v + by} calls ({by:+d})" for v, by in over)
    if all(by <= RACE_SLACK for _, by in over):
        return f"the whole tree's calls, passed by requests out at once: with {shape}, {at}"
    return f"not the whole tree's: with {shape}, the run passed the value: {at}"


def _third_level(rows: list[DelegationRow]) -> str:
    """Whether the knob reaches a nested tree's third agent, read off the rows: the run stays within the value; the
    third agent is stopped on the run's N-th call, the levels above going on; it is stopped near the value on a
    counter of its own; or it is not stopped by it at all."""
    if all(r.model_calls <= (r.value or 0) for r in rows):
        return "the whole tree's calls: three levels deep, at cap N the run made at most N"
    if all(r.grandchild_last_call == r.value for r in rows):
        went_on = ", ".join(f"at {r.value}, {r.model_calls} calls" for r in rows)
        return (
            "the whole tree's calls, to the third level: at cap N its last call was the run's N-th, and the levels "
            f"above went on to answer: {went_on}"
        )
    third = [(r.value or 0, r.grandchild_calls or 0) for r in rows]
    if all(abs(calls - v) <= 1 for v, calls in third):
        return "each level's own: the third agent runs on a counter of its own, " + ", ".join(
            f"at {v} it made {calls}" for v, calls in third
        )
    return "not the third level's: " + ", ".join(f"at {v} the third agent made {calls} calls" for v, calls in third)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SAW_CHARS else text[: SAW_CHARS - 1] + "…"


def _whose(rows: list[DelegationRow]) -> str:
    """Whose model calls the knob counts, read off the capped rows from what each counter held when the child made
    its last call: the run's calls so far (`child_last_call`, the parent's before it included), or the child's own
    (`child_calls`, off the value by the same 0 or 1 at every value); or the child is not stopped by it at all.
    """
    capped = [(r, r.value) for r in rows if r.value is not None]
    together = "both agents' model calls, together: at cap N the child's last call was the run's N-th"
    if capped and all((r.child_last_call or r.model_calls) == v for r, v in capped):
        return f"{together}, the parent's counted"
    over = {r.child_calls - v for r, v in capped}
    if len(capped) > 1 and len(over) == 1 and over <= {-1, 0, 1} and all(r.parent_calls <= v + 1 for r, v in capped):
        own = {0: "N", 1: "N + 1", -1: "N - 1"}[over.pop()]
        counter = "each agent's own: the child runs on a counter of its own at the same value"
        return f"{counter}, and at cap N made {own} calls of its own"
    if all(r.parent_calls <= v + 1 for r, v in capped):
        return "the parent's model calls only: the child's are not counted against it"
    return "neither agent's alone: " + ", ".join(f"{v} -> {r.parent_calls} + {r.child_calls}" for r, v in capped)


def cost_budget(run: ProbeRun, adapter: Runner) -> CostReport | None:
    """The framework's own dollar budget measured with the runaway and (where it delegates) the delegating probe, each
    run cut at `COST_DEADLINE_S`; None when it has none."""
    if adapter.cost_knob is None:
        return None
    knob, child = adapter.cost_knob, _child()

    def row(server: str, usd: float, delegate: Delegate | None = None) -> CostRow:
        probe = Probe(knob=adapter.knobs[0], value=None, budget_usd=usd)
        result = run(adapter, server, probe, delegate=delegate, max_seconds=COST_DEADLINE_S)
        shares = {k: v for k, v in _agents(result, child.name).items() if k != "child_tokens"} if delegate else {}
        return CostRow(
            value_usd=usd,
            model_calls=result.totals.model_calls,
            ending=Ending.of(result.native_end, result.totals.model_calls),
            held_to_deadline=result.totals.wall_s >= COST_DEADLINE_S,
            **shares,
        )

    rows = [row("never-stops", usd) for usd in COST_VALUES_USD]
    report = CostReport(knob=knob, counts=_cost_when(rows), rows=rows)
    if adapter.delegation is not None:
        report.under_delegation = [row(DELEGATING_PROBE, usd, child) for usd in COST_VALUES_USD]
        report.under_delegation_counts = _whose_cost(report.under_delegation, rows)
    return report


def _cost_when(rows: list[CostRow]) -> str:
    """Where the budget stops a runaway, read off the rows (the framework prices its calls by its own table)."""
    if all(r.model_calls >= SAFETY_STOP for r in rows):
        return f"not a runaway's calls: it ran on to looplab's safety stop at {SAFETY_STOP} model calls"
    stops = ", ".join(f"at ${r.value_usd:g} after {r.model_calls} model calls" for r in rows)
    return f"its own prices of the calls: it stopped a runaway {stops}"


def _whose_cost(delegated: list[CostRow], alone: list[CostRow]) -> str:
    """Whose calls the budget counts when the agent delegates, against a runaway's calls at the same budget; and
    whether the run then ended or waited on until looplab's deadline."""
    pairs = list(zip(delegated, alone, strict=True))
    if all(d.model_calls <= a.model_calls + 1 for d, a in pairs):
        said = "both agents' calls, together: the run stopped within the calls a runaway made at the same budget"
    elif all((d.child_calls or 0) > a.model_calls for d, a in pairs):
        made = ", ".join(f"{d.child_calls} at ${d.value_usd:g} (a runaway: {a.model_calls})" for d, a in pairs)
        said = f"not the child's: the child alone made more calls than a runaway at the same budget, {made}"
    else:
        said = "neither agent's alone: " + ", ".join(
            f"${d.value_usd:g} -> parent {d.parent_calls} + child {d.child_calls} calls" for d in delegated
        )
    if any(d.held_to_deadline for d in delegated):
        said += f"; the query then waited until looplab's deadline ({COST_DEADLINE_S:g} s) cut it"
    return said


def counters_hold(rows: list[DelegationRow]) -> str | None:
    """Which model calls each of the framework's own counters held when the run ended, read against the calls the
    recorder saw each agent make: both agents' together, the parent's only, or the child's only, the same at every
    value set; else what it read beside them. None where the runner reads no counter that every capped row has (the
    unset row ends at looplab's safety stop, where a framework may report nothing)."""
    rows = [r for r in rows if r.value is not None]
    named = set.intersection(*(set(r.ending.counters) for r in rows)) if rows else set()
    holds: list[tuple[str, Callable[[DelegationRow], int]]] = [
        ("both agents' model calls, together", lambda r: r.model_calls),
        ("the parent's model calls only", lambda r: r.parent_calls),
        ("the child's model calls only", lambda r: r.child_calls),
    ]
    said = []
    for where in sorted(named):
        read = [(r.ending.counters[where], r) for r in rows]
        held = next((what for what, calls in holds if all(n == calls(r) for n, r in read)), None)
        beside = ", ".join(f"{n} (parent {r.parent_calls} + child {r.child_calls} calls)" for n, r in read)
        said.append(f"`{where}` held {held}" if held else f"`{where}` read {beside}")
    return "; ".join(said) or None


def token_budget(run: ProbeRun, adapter: Runner, default: KnobDefault | None) -> TokenReport | None:
    """The framework's run-wide token budget measured with the runaway probe; None when it has none."""
    if adapter.token_knob is None:
        return None
    knob = adapter.token_knob
    rows = [_token_row(run(adapter, "never-stops", Probe(knob=knob, value=v)), v) for v in TOKEN_VALUES]
    delegated: list[DelegatedTokenRow] = []
    if adapter.delegation is not None:  # does it reach the child's tokens?
        child = _child()
        for value in TOKEN_VALUES:
            result = run(adapter, DELEGATING_PROBE, Probe(knob=knob, value=value), delegate=child)
            delegated.append(DelegatedTokenRow(**_token_row(result, value).model_dump(), **_agents(result, child.name)))
    return TokenReport(
        knob=knob,
        default=None if default is None else default.value,
        default_source="" if default is None else default.source,
        counts=_when(rows),
        rows=rows,
        under_delegation=delegated,
        under_delegation_counts=_whose_tokens(delegated) if delegated else None,
    )


def _child(case: str = "delegation") -> Delegate:
    """The child the delegating probe's parent hands its question to: the built-in delegation case's (or another
    built-in case's, with the agent below it)."""
    spec = load_cases()[case].delegate
    assert spec is not None  # the built-in delegation cases have their delegate
    return spec.agent()


def _token_row(result: RunResult, value: int) -> TokenRow:
    """A run at token budget `value`: the tokens its calls spent, the call whose reply took them past it."""
    spent = [s.model_call.input_tokens + s.model_call.output_tokens for s in result.trace.steps]
    passed = next((i for i, total in enumerate(itertools.accumulate(spent), 1) if total > value), None)
    ending = Ending.of(result.native_end, result.totals.model_calls)
    return TokenRow(
        value=value, model_calls=result.totals.model_calls, tokens=sum(spent), passed_on_call=passed, ending=ending
    )


def _agents(result: RunResult, child: str) -> dict[str, int]:
    """Each agent's share of a delegating run: the parent's calls, the child's calls and the child's tokens."""
    calls = [s.model_call for s in result.trace.steps]
    return {
        "parent_calls": sum(c.agent == MAIN_AGENT for c in calls),
        "child_calls": sum(c.agent == child for c in calls),
        "child_tokens": sum(c.input_tokens + c.output_tokens for c in calls if c.agent == child),
    }


def _whose_tokens(rows: list[DelegatedTokenRow]) -> str:
    """Whose tokens the budget counts when the agent delegates, read off the rows: the run stopped with the call
    that took both agents' total past it (or before one would), or the child ran on past it."""
    if all(r.passed_on_call is not None and r.model_calls == r.passed_on_call for r in rows):
        return "both agents' tokens, together: the run stopped on the call that took the two agents' total past it"
    if all(r.passed_on_call is None and r.tokens <= r.value for r in rows):
        return "both agents' tokens, together: no request went out that would take the two agents' total past it"
    if all(r.child_tokens > r.value for r in rows):
        return "not the child's: the child ran on past the budget on its own tokens"
    return "neither agent's alone: " + ", ".join(
        f"{r.value} -> parent {r.parent_calls} + child {r.child_calls} calls, {r.tokens} tokens" for r in rows
    )


def _when(rows: list[TokenRow]) -> str:
    """When the budget stops a run, read off the rows: after the reply that passes it, or before the request."""
    if all(r.passed_on_call is not None and r.model_calls == r.passed_on_call for r in rows):
        return "input plus output tokens, checked after each reply: the reply that passes the budget is the last"
    if all(r.passed_on_call is None and r.tokens <= r.value for r in rows):
        return "input plus output tokens, checked before each request: no request goes out that would pass it"
    return "not input plus output tokens alone: " + ", ".join(
        f"{r.value} -> {r.model_calls} calls, {r.tokens} tokens" for r in rows
    )


def sizeless(doc: CapsDoc) -> CapsDoc:
    """`doc` with its token-budget rows' numbers left out (tokens, calls, the call that passed the budget, the
    message that quotes them, the framework's counters): what stays the same on every wire API."""
    doc = doc.model_copy(deep=True)
    for report in doc.runners:
        budget = report.token_budget
        for row in [*budget.rows, *budget.under_delegation] if budget else []:
            row.model_calls, row.tokens, row.passed_on_call, row.ending.message = 0, 0, None, None
            row.ending.counters = {}  # the framework's count of those calls
        for delegated in budget.under_delegation if budget else []:
            delegated.parent_calls = delegated.child_calls = delegated.child_tokens = 0
    return doc


# --- the caps doc --------------------------------------------------------------------------------------------


def delegation_cell(report: DelegationReport | None) -> str:
    """The summary table's cell: whose calls the knob counts under delegation (the section says how it stopped)."""
    return "cannot delegate" if report is None else headline(report.counts)


def token_cell(report: TokenReport | None) -> str:
    """The summary table's cell: the framework's own token budget, if any."""
    return "none" if report is None else f"`{report.knob}`"


def _cost_markdown(cost: CostReport | None, runner: str) -> list[str]:
    """A runner section's part on its framework's own dollar budget, where it has one."""
    if cost is None:
        return []
    out = ["", "### Dollar budget", "", f"`{cell(cost.knob)}`, measured with a runaway:", ""]
    out += [f"- counts: {cost.counts}", "", *_cost_table(cost.rows)]
    if cost.under_delegation:
        held = any(r.held_to_deadline for r in cost.under_delegation)
        cited = [f"- reproduces {issue}" for name, issue in COST_REPORTED if name == runner and held]
        out += ["", "When the agent delegates to a child that never stops (the delegating probe):", ""]
        out += [f"- counts: {cost.under_delegation_counts}", *cited, "", *_cost_table(cost.under_delegation)]
    return out


def _cost_table(rows: list[CostRow]) -> list[str]:
    shares = any(r.parent_calls is not None for r in rows)
    calls = "model calls (parent + child)" if shares else "model calls"
    out = [f"| budget | {calls} | ended at looplab's deadline | how the framework ended |", "|---|---|---|---|"]
    for r in rows:
        made = f"{r.model_calls} ({r.parent_calls} + {r.child_calls})" if shares else f"{r.model_calls}"
        deadline = "yes" if r.held_to_deadline else "no"
        out.append(f"| ${r.value_usd:g} | {made} | {deadline} | {ending_text(r.ending)} |")
    return out


#: The issues users report that a dollar-budget measurement reproduces where a delegating run waited on to the
#: deadline: the runner and the issue in words.
COST_REPORTED = (
    ("claude_agent_sdk", "claude-agent-sdk-python #1273: a budget tripping inside a subagent hangs the query"),
)


def markdown(
    delegated: DelegationReport | None, tokens: TokenReport | None, runner: str = "", cost: CostReport | None = None
) -> list[str]:
    """A runner section's two parts: its cap under delegation, and its token budget; the issues users report that
    `runner`'s measurement reproduces named where it shows them."""
    out = ["", "### Under delegation", ""]
    if delegated is None:
        out += ["It cannot delegate here (its declaration names no `delegation`)."]
    else:
        out += [
            f"How it delegates: {delegated.how}. The parent hands one question to a child that never stops, "
            f"`{cell(delegated.knob)}` at each value (unset: the framework's own defaults):",
            "",
            f"- counts: {delegated.counts}",
            *([f"- its own counters at the end: {delegated.counters_hold}"] if delegated.counters_hold else []),
            "",
            *_delegation_table(delegated.rows),
        ]
        shown = {k: [f"- reproduces {issue}" for issue in reproduces(runner, k, delegated)] for k in SECTIONS}
        raced = [f"- timing decides: {delegated.parallel_races}"] if delegated.parallel_races else []
        out += _shape(
            delegated.parallel, delegated.parallel_counts, PARALLEL_HEAD, "parallel", raced + shown["parallel"]
        )
        out += _shape(delegated.nested, delegated.nested_counts, NESTED_HEAD, "nested", shown["nested"])
        if delegated.child_default is not None:
            out += [
                "",
                "The child left at its framework's default, the parent's knob set:",
                "",
                f"- counts: {delegated.child_default_counts}",
                *shown["child_default"],
                "",
                *_delegation_table([delegated.child_default]),
            ]
    out += _cost_markdown(cost, runner)
    out += ["", "### Token budget", ""]
    if tokens is None:
        out += ["None of its own: looplab's `max_tokens` gates each request at the model boundary."]
        return out
    default = "none (no limit)" if tokens.default is None else f"{tokens.default}"
    out += [
        f"`{cell(tokens.knob)}`, measured with a runaway:",
        "",
        f"- default: {default}, read from `{tokens.default_source}`",
        f"- counts: {tokens.counts}",
        "",
        "| budget | model calls | tokens spent | the call that passed it | how the framework ended |",
        "|---|---|---|---|---|",
    ]
    out += map(_token_line, tokens.rows)
    if tokens.under_delegation:
        out += [
            "",
            "When the agent delegates to a child that never stops (the delegating probe):",
            "",
            f"- counts: {tokens.under_delegation_counts}",
            "",
            "| budget | model calls (parent + child) | tokens (the child's) | the call that passed it | how it ended |",
            "|---|---|---|---|---|",
            *map(_token_line, tokens.under_delegation),
        ]
    return out


@dataclass(frozen=True)
class Reported:
    """A user-reported issue a runner's delegation measurement reproduces: its section (`parallel`, `nested` or
    `child_default`), the issue in words, and what the measurement must show for the doc to name it."""

    runner: str
    section: str
    issue: str
    shows: Callable[[DelegationReport], bool]


def _passed(report: DelegationReport) -> bool:
    return any(r.model_calls > (r.value or 0) for r in report.parallel)


def _uncapped_child(report: DelegationReport) -> bool:
    return report.child_default is not None and report.child_default.model_calls >= SAFETY_STOP


def _ten_turns(report: DelegationReport) -> bool:
    return report.child_default is not None and report.child_default.child_calls == 10  # noqa: PLR2004 - the issue's


def _child_past_parent(report: DelegationReport) -> bool:
    row = report.child_default
    return row is not None and row.child_calls > (row.value or 0)


def _own_levels(report: DelegationReport) -> bool:
    return (report.nested_counts or "").startswith("each level's own")


_FAN_OUT = "pydantic-ai-harness #588, #696: subagents fanned out in parallel pass a shared limit"
_SUBAGENT_TURNS = "claude-code #41143, #79303: a subagent's turns are not held by its parent's limit"
_AGENT_AS_TOOL = "openai-agents-js #444: agents as tools stay at their own 10 turns"
_OUTER_LIMIT = "agent-spec #261: a nested agent ignores the outer recursion limit"
#: The issues users report that a measurement reproduces, each named in the caps doc where the rows show it.
REPORTED = (
    Reported("pydantic_ai", "parallel", _FAN_OUT, _passed),
    Reported("claude_agent_sdk", "child_default", _SUBAGENT_TURNS, _uncapped_child),
    Reported("ts_openai_agents", "child_default", _AGENT_AS_TOOL, _ten_turns),
    Reported("openai_agents", "child_default", f"{_AGENT_AS_TOOL} (in the Python SDK too)", _ten_turns),
    Reported("langchain", "child_default", "LangChain deepagents #1698: subagents ignore the parent's limit",
             _child_past_parent),
    Reported("google_adk", "nested", "adk-js #484: the LLM-call limit starts again at each sub-agent (in ADK for "
             "Python too)", _own_levels),
    Reported("langgraph", "nested", _OUTER_LIMIT, _own_levels),
    Reported("ts_langgraph", "nested", _OUTER_LIMIT, _own_levels),
)  # fmt: skip


def reproduces(runner: str, section: str, report: DelegationReport) -> list[str]:
    """The user-reported issues `report`'s `section` reproduces (`REPORTED`), for the caps doc to name."""
    return [r.issue for r in REPORTED if (r.runner, r.section) == (runner, section) and r.shows(report)]


#: The parts of a delegation report an issue may be reproduced in.
SECTIONS = ("parallel", "nested", "child_default")
#: What each delegation shape's rows are, as the caps doc introduces them.
PARALLEL_HEAD = (
    "Two children asked in one reply (the parent's two questions, each to a child that never stops; the children's "
    "calls together):"
)
NESTED_HEAD = "Three levels (the child hands its question on to a third agent that never stops, built the same way):"


def _shape(rows: list[DelegationRow], counts: str | None, head: str, shape: str, cited: list[str]) -> list[str]:
    """A delegation shape's part of a runner's section: its rows, or that it was not measured."""
    if not rows:
        return ["", f"No {shape} rows: the framework cannot express the shape here (its `delegation_gaps`), or the "
                "measurement predates them."]  # fmt: skip
    return ["", head, "", f"- counts: {counts}", *cited, "", *_delegation_table(rows)]


def _delegation_table(rows: list[DelegationRow]) -> list[str]:
    """Delegating probe runs as the caps doc's table, with a column for the third agent's calls where they ran three
    levels deep."""
    third = " the third agent's |" if any(r.grandchild_calls is not None for r in rows) else ""
    return [
        f"| value | model calls | the parent's | the child's |{third} how the run ended | what the parent was handed |",
        "|---|---|---|---|---|---|" + ("---|" if third else ""),
        *map(_delegation_line, rows),
    ]


def _delegation_line(r: DelegationRow) -> str:
    """A delegating probe run's row in the caps doc (a nested run's with its third agent's calls)."""
    saw = "nothing: the run ended first" if r.parent_saw is None else f"“{cell(r.parent_saw)}”"
    value = "unset" if r.value is None else r.value
    third = f" {r.grandchild_calls} |" if r.grandchild_calls is not None else ""
    return (
        f"| {value} | {r.model_calls} | {r.parent_calls} | {r.child_calls} |{third} {ending_text(r.ending)} | {saw} |"
    )


def _token_line(row: TokenRow) -> str:
    """A token budget's row in the caps doc; a delegating run's with each agent's share in brackets."""
    passed = "none" if row.passed_on_call is None else row.passed_on_call
    calls, spent = f"{row.model_calls}", f"{row.tokens}"
    if isinstance(row, DelegatedTokenRow):
        calls, spent = f"{calls} ({row.parent_calls} + {row.child_calls})", f"{spent} ({row.child_tokens})"
    return f"| {row.value} | {calls} | {spent} | {passed} | {ending_text(row.ending)} |"
