"""The behaviour scorecard: per runner, how its framework behaves, each cell read off a measurement.

Three sources, each optional, and a cell whose source is missing says "not measured":

- the caps measurement (`docs/iteration-caps.json`, `looplab caps`): the default cap (what stops a runaway when
  nothing is set: every knob with a default, the first to bite first, in model calls), what the framework does at
  the cap, where the partial history is, whether the tools of its last call run;
- a results document (`looplab eval --json`): the runs of the cases that exercise a behaviour
  (`sloppy-calls`: malformed arguments and an unknown tool; `parallel-reads`: two reads in one reply;
  `silent-read`: repetition; `injected-instruction`: the approval gate; `token-budget`: the token budget;
  `delegation`: a second agent under the same budget; `vip-compound`: the first request);
- a bench result (`looplab bench --json`): per-turn overhead and import time;
- a team's own cases (`looplab scorecard --cases PATH`, or any other case in the document): how many each runner
  passed, and its median model calls; with repeats (a case run twice or more) every repeat counts, and the pass
  rate and the median carry their 95 % intervals. This group is shown only when such runs exist.

Every other cell reads one run a case: the first repeat stands for the cell.

Every cell keeps its evidence (the file and the runner's section or case it was read from), so a reader can
check it; the terminal, Markdown and the HTML report show the same cells.

What a scorecard holds (its rows, cards and cells) is in `looplab.views.scorecard_rows`, and how the terminal and
Markdown show it in `looplab.views.scorecard_text`.
"""

from __future__ import annotations

import functools
import itertools
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from looplab.adapters import registry
from looplab.adapters.contract import files
from looplab.adapters.contract.agents import MAIN_AGENT, not_delegating
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import StopReason
from looplab.adapters.contract.result import RunResult
from looplab.adapters.contract.trace import ModelCall
from looplab.records.document import Document, case_descriptions
from looplab.records.intervals import median_interval, wilson
from looplab.records.measurements import (
    BenchResult,
    CapsDoc,
    Ending,
    KnobReport,
    RunnerReport,
    history_of,
    version_label,
)
from looplab.records.measurements import Row as CapsRow
from looplab.shared_tools.records import shorten
from looplab.views.eval_tables import pass_rate, spread
from looplab.views.markdown import counted, headline
from looplab.views.scorecard_rows import NOT_MEASURED, Cell, RunnerCard, Scorecard

__all__ = ["CASES", "build", "load_bench", "load_caps", "observed"]

CAPS_PATH = Path("docs") / "iteration-caps.json"
#: The scripted model's made-up tool in `sloppy-calls` (scenarios/scripted/policy.py MISTAKES).
UNKNOWN_TOOL = "run_shell"
#: The scorecard row of each delegation case: its key, the case, and the delegation shape it asks (None: one child).
DELEGATION_ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("delegation", "delegation", None),
    ("delegation_parallel", "delegation-parallel", "parallel"),
    ("delegation_nested", "delegation-nested", "nested"),
)


@dataclass(frozen=True)
class Observed:
    """One run of a case, as a results document holds it."""

    runner: str
    case: str
    result: RunResult
    passed: bool | None


def observed(document: Document) -> list[Observed]:
    """The runs in a results document, with their cells' verdicts."""
    out = []
    for cell in document.cells:
        result = document.result_of(cell)
        if result is not None:
            out.append(Observed(cell.runner, cell.case, result, cell.passed))
    return out


def load_caps(path: Path = CAPS_PATH) -> CapsDoc | None:
    """The committed caps measurement, if the file is there; one that cannot be read is a one-line error."""
    if not path.exists():
        return None
    try:
        return CapsDoc.model_validate_json(files.read_text(path))
    except ValueError as exc:
        raise LooplabError(f"{path}: not a looplab caps measurement: {str(exc).splitlines()[0]}") from None


def load_bench(path: Path) -> BenchResult:
    """A `looplab bench --json` file; a bad one is a one-line error."""
    try:
        return BenchResult.model_validate_json(files.read_text(path))
    except ValueError as exc:
        raise LooplabError(f"{path}: not a looplab bench result: {str(exc).splitlines()[0]}") from None


def build(
    runners: Sequence[str],
    runs: Iterable[Observed] = (),
    caps: CapsDoc | None = None,
    bench: BenchResult | None = None,
    *,
    sources: dict[str, str] | None = None,
) -> Scorecard:
    """The scorecard of `runners` from whatever was measured; a missing measurement is a "not measured" cell."""
    runs = list(runs)
    by_case: dict[tuple[str, str], Observed] = {}
    for run in runs:
        by_case.setdefault((run.runner, run.case), run)  # the first repeat stands for the cell
    reports = {r.runner: r for r in caps.runners} if caps else {}
    benched = {b.runner: b for b in bench.runners} if bench else {}
    first_bytes = {
        r: run.result.trace.steps[0].model_call.request_bytes
        for (r, case), run in by_case.items()
        if case == "vip-compound" and run.result.trace.steps
    }
    cards = []
    for name in runners:
        report = reports.get(name)
        runs_of = {case: run for (r, case), run in by_case.items() if r == name}
        cells = {
            **_cap_cells(report),
            "malformed": _malformed(runs_of.get("sloppy-calls")),
            "unknown_tool": _unknown_tool(runs_of.get("sloppy-calls")),
            "parallel": _parallel(runs_of.get("parallel-reads")),
            "guards": _guards(runs_of.get("silent-read"), runs_of.get("injected-instruction")),
            "token_budget": _token_budget(runs_of.get("token-budget")),
            **{key: _delegation(name, runs_of.get(case), shape) for key, case, shape in DELEGATION_ROWS},
            **_budget_cells(report),
            "streamed_cap": _streamed_cap(report),
            "first_request": _first_request(name, first_bytes),
            **_bench_cells(benched.get(name)),
            "apis": _apis(name),
            "own_cases": _own_cases([r for r in runs if r.runner == name and r.case not in built_in_cases()]),
        }
        version = report.version if report else next((r.result.runner_version for r in runs_of.values()), "")
        cards.append(RunnerCard(runner=name, version=version, cells=cells))
    return Scorecard(cards=cards, sources=sources or {})


# --- each cell, from its measurement ---------------------------------------------------------------------


def _not_measured() -> Cell:
    return Cell(text=NOT_MEASURED)


def _cap_cells(report: RunnerReport | None) -> dict[str, Cell]:
    keys = ("default_cap", "at_cap", "history", "last_tools")
    if report is None or not report.knobs:
        return {k: _not_measured() for k in keys}
    knob = report.knobs[0]
    where, section = f"caps: {report.runner}", caps_anchor(report)
    ending = knob.rows[0].ending
    at_cap = _at_cap(ending)
    seen = {r.last_call_tools for r in knob.rows if r.last_call_tools}
    last = seen.pop() if len(seen) == 1 else "depends on the value" if seen else None
    texts = {
        "default_cap": _default_cap(report),
        "at_cap": at_cap,
        "history": history_of(ending),
        "last_tools": last,
    }
    return {k: Cell(text=t, evidence=where, caps_section=section) if t else _not_measured() for k, t in texts.items()}


def _budget_cells(report: RunnerReport | None) -> dict[str, Cell]:
    """From the caps measurement: whose calls the cap counts when the agent delegates, and the framework's own
    token budget (each "not measured" in a caps doc from before they were)."""
    if report is None:
        return {
            k: _not_measured()
            for k in ("delegated_cap", "parallel_cap", "nested_cap", "child_default", "native_tokens")
        }
    where, section = f"caps: {report.runner}", caps_anchor(report)
    delegated = "cannot delegate" if report.delegation is None else headline(report.delegation.counts)
    info, shapes = registry.RUNNERS.get(report.runner), {}
    for shape, counts in (
        ("parallel", report.delegation.parallel_counts if report.delegation else None),
        ("nested", report.delegation.nested_counts if report.delegation else None),
    ):
        why = not_delegating(info.delegation, info.delegation_gaps, shape) if info is not None else None
        why = headline(why) if why else None  # the why is long: the declaration and the caps doc say it
        # The class only (not "passed by requests out at once"), which the children's race does not move.
        text = why or (headline(counts).split(",")[0] if counts else None)
        shapes[f"{shape}_cap"] = Cell(text=text, evidence=where, caps_section=section) if text else _not_measured()
    tokens = "none" if report.token_budget is None else headline(report.token_budget.counts)
    if report.token_budget is not None and report.token_budget.under_delegation_counts:
        tokens += f"; under delegation, {headline(report.token_budget.under_delegation_counts)}"
    at_default = report.delegation.child_default_counts if report.delegation else None
    shapes["child_default"] = (
        Cell(text=headline(at_default), evidence=where, caps_section=section)
        if at_default
        else Cell(text="cannot delegate", evidence="runner declaration")
        if report.delegation is None
        else _not_measured()
    )
    return {
        "delegated_cap": Cell(text=delegated, evidence=where, caps_section=section),
        **shapes,
        "native_tokens": Cell(text=tokens, evidence=where, caps_section=section),
    }


def _at_cap(ending: Ending) -> str:
    """How a run ended at the framework's cap, in a few words: what it raises, or how it returns."""
    if ending.exception:
        return _raises(ending.exception)
    if ending.how.startswith("returns, with a message"):
        return "returns a made-up final message"
    if ending.how.startswith("returns"):
        return "returns silently"
    return headline(ending.how)


def _streamed_cap(report: RunnerReport | None) -> Cell:
    """How the run ends at the cap with streamed replies, beside whole ones (caps doc: "Streamed at the cap")."""
    if report is None or report.streamed is None:
        return _not_measured()
    streamed, whole = report.streamed.streamed, report.streamed.whole
    if report.streamed.ends_alike:
        # The same ending either way: what the framework's own counters say differently is what is left to tell.
        differ = [f"{k} {a} whole, {b} streamed" for k, (a, b) in report.streamed.counters_differ.items()]
        only = [f"{k} reads {n}" for k, n in report.streamed.counters_only("streamed").items()]
        said = "; its counters differ: " + ", ".join(differ) if differ else ""
        said += f"; streamed, {', '.join(only)} after {streamed.model_calls} model calls" if only else ""
        text = "the same as with whole replies" + said
    elif _at_cap(streamed.ending) == _at_cap(whole.ending):
        text = f"{streamed.model_calls} model calls (whole: {whole.model_calls}), {_at_cap(streamed.ending)}"
    else:
        text = f"{_at_cap(streamed.ending)} (whole: {_at_cap(whole.ending)})"
    return Cell(text=text, evidence=f"caps: {report.runner}", caps_section=caps_anchor(report))


def _raises(exception: str) -> str:
    """The framework's exception at the cap, said as the framework's: its class and the module it comes from."""
    *module, name = exception.split(".")
    public = ".".join(part for part in module if not part.startswith("_"))
    return f"the framework raises {name}" + (f" (from {public})" if public else "")


@dataclass(frozen=True)
class _Bite:
    """Where a knob left at its default stops a run: after `calls` model calls (None: not measured); `exact`: read
    off the measurement rather than estimated from it."""

    knob: KnobReport
    calls: int | None
    exact: bool


def _default_cap(report: RunnerReport) -> str:
    """What stops a runaway when nothing is set: every knob with a default, the first to bite first, in model calls.

    A knob's model calls at its default come from the caps measurement: the run with nothing set when it stopped
    before looplab's safety stop, else the knob's measured rows (a row at the default, or the line through its two
    highest rows, an estimate when the knob does not count model calls).
    """
    bites = sorted(
        (_bite(k, k.default) for k in _defaults(report.knobs) if k.default is not None),
        key=lambda b: (b.calls is None, b.calls or 0),
    )
    if not bites:
        unset = report.knobs[0].unset
        if _kept_going(unset):
            return f"none (unbounded: still going at looplab's safety stop, {_calls(unset.model_calls)})"
        return f"no knob has a default; the run stopped after {_calls(unset.model_calls)}"
    first, *later = bites
    if not _kept_going(first.knob.unset):  # the run with nothing set measured where the first one bites
        first = _Bite(first.knob, first.knob.unset.model_calls, exact=True)
    return "; then ".join(_said(b) for b in [first, *later])


def _defaults(knobs: Sequence[KnobReport]) -> list[KnobReport]:
    """The knobs that apply when nothing is set: those with a default, once per default (several knobs can be ways
    of setting the same one), the one that counts model calls preferred."""
    chosen: dict[str, KnobReport] = {}
    for knob in knobs:
        if knob.default is None:
            continue
        held = chosen.get(knob.default_source)
        if held is None or (held.counts != MODEL_CALLS and knob.counts == MODEL_CALLS):
            chosen[knob.default_source] = knob
    return list(chosen.values())


def _bite(knob: KnobReport, value: int) -> _Bite:
    """Model calls a run makes before `knob` at `value` stops it: measured at that value, or from the rows."""
    calls_at = {r.value: r.model_calls for r in knob.rows if r.value is not None and not _kept_going(r)}
    if value in calls_at:
        return _Bite(knob, calls_at[value], exact=True)
    if knob.counts == MODEL_CALLS:
        return _Bite(knob, value, exact=True)
    if len(calls_at) < 2:
        return _Bite(knob, None, exact=False)
    (low, low_calls), (high, high_calls) = sorted(calls_at.items())[-2:]
    per_value = (high_calls - low_calls) / (high - low)
    # A knob that counts tool calls adds a fixed number of model calls to its value (measured); any other, such as
    # graph super-steps, is an estimate from the line through its rows.
    return _Bite(knob, int(high_calls + (value - high) * per_value + 0.5), exact=knob.counts == TOOL_CALLS)


def _said(bite: _Bite) -> str:
    """`26 model calls (Agent(max_iter=25))`; `about 5,004 model calls (recursion_limit = 10007)`."""
    knob, value = bite.knob.knob, bite.knob.default
    setting, filled = _EMPTY_SLOT.subn(f"={value}", knob, count=1)
    if not filled:
        setting = f"{knob} = {value}"
    if bite.calls is None:
        return f"{setting}, counting {bite.knob.counts} (model calls not measured)"
    return f"{'' if bite.exact else 'about '}{_calls(bite.calls)} ({setting})"


def _kept_going(row: CapsRow) -> bool:
    """The run did not stop by itself: looplab's safety stop ended it."""
    return row.ending.how.startswith("kept going")


def _calls(n: int) -> str:
    return counted(n, "model call")


#: What a knob counts, as the caps measurement says it (`KnobReport.counts`).
MODEL_CALLS, TOOL_CALLS = "model calls", "tool calls"
#: A knob's empty value in its name (`Runner.run(max_turns=)`), where its default is written in.
_EMPTY_SLOT = re.compile(r"=(?=[,)])")


#: How a record names a malformed call its framework kept instead of running it (the runner's stop detail, e.g.
#: `... (AIMessage.invalid_tool_calls): run_tests({"target": x}): <the framework's reason>`): the attribute the
#: framework kept it in, the call, and the framework's reason.
_KEPT_CALL = re.compile(r"\((?:\w+\.)*(?P<where>\w+)\): (?P<name>[\w.-]+)\((?P<args>.*?)\): (?P<reason>.+)", re.S)
#: How much of the framework's reason a cell quotes (cut between words).
REASON_CHARS = 80


def _evidence(run: Observed) -> str:
    return f"eval: {run.case}"


def _malformed(run: Observed | None) -> Cell:
    """Did the run go on after arguments that were not JSON or the wrong type?

    A run its framework ended on a call it kept rather than ran says where the framework kept it and why, as the
    record names them: `stops: error (invalid_tool_calls: <the framework's reason>)`.
    """
    if run is None:
        return _not_measured()
    result = run.result
    bad = [c for c in result.trace.tool_calls if c.outcome == "error" and "InvalidArguments" in c.result_preview]
    if result.stop_reason is StopReason.FINAL_ANSWER:
        how = "recovers" if bad else "recovers (the framework fixed them before the tools)"
    else:
        how = f"stops: {result.stop_reason}"
        if (kept := kept_call(result)) is not None:
            how += f" ({kept[0]}: {kept[1]})"
    return Cell(text=how, evidence=_evidence(run))


def kept_call(result: RunResult) -> tuple[str, str] | None:
    """Where the framework kept a malformed call it did not run, and its reason in brief, as the run's record
    names them (its stop detail, else the framework's own end); None when the record names no such call.

    The reason leaves out the call's arguments where it repeats them (the record quotes them before it).
    """
    native = result.native_end.message if result.native_end else None
    for said in (result.stop_detail, native):
        if said and (found := _KEPT_CALL.search(said)):
            reason = " ".join(found["reason"].split())
            args = " ".join(found["args"].split())
            if args:
                reason = reason.replace(args, "…")
            return found["where"], shorten(reason, REASON_CHARS)
    return None


def _unknown_tool(run: Observed | None) -> Cell:
    """Who answered the call to a tool that does not exist: the tools (looplab's Guard), the framework, or no one."""
    if run is None:
        return _not_measured()
    asked = any(UNKNOWN_TOOL in s.model_call.tool_calls_requested for s in run.result.trace.steps)
    reached = any(c.name == UNKNOWN_TOOL for c in run.result.trace.tool_calls)
    if not asked:
        return Cell(text="not reached (the run ended first)", evidence=_evidence(run))
    if reached:
        return Cell(text="reaches the tools", evidence=_evidence(run))
    if run.result.stop_reason is StopReason.FINAL_ANSWER:
        return Cell(text="answered by the framework", evidence=_evidence(run))
    return Cell(text=f"ends the run: {run.result.stop_reason}", evidence=_evidence(run))


def _parallel(run: Observed | None) -> Cell:
    """Two reads asked for in one reply: run in one step, and at the same time or one after the other."""
    if run is None:
        return _not_measured()
    both = next((s.tool_calls for s in run.result.trace.steps if len(s.tool_calls) >= 2), None)
    if both is None:
        return Cell(text="one tool a reply", evidence=_evidence(run))
    first, second = sorted(both, key=lambda c: c.started_at)[:2]
    overlap = second.started_at < first.started_at + first.duration_s
    return Cell(text="concurrently" if overlap else "one after another", evidence=_evidence(run))


def _guards(repetition: Observed | None, approval: Observed | None) -> Cell:
    """Did looplab's repetition stop and approval gate hold through this framework (both cases pass)?"""
    if repetition is None and approval is None:
        return _not_measured()
    parts, cases = [], []
    for label, run in (("repetition", repetition), ("approval", approval)):
        if run is None:
            parts.append(f"{label} {NOT_MEASURED}")
            continue
        cases.append(run.case)
        parts.append(f"{label} {'held' if run.passed else 'failed'}")
    return Cell(text=", ".join(parts), evidence="eval: " + ", ".join(cases))


def _token_budget(run: Observed | None) -> Cell:
    """Did looplab's token budget hold through this framework: stopped as `budget`, no call started past it?"""
    if run is None:
        return _not_measured()
    totals, limits = run.result.totals, run.result.limits
    spent, budget = totals.input_tokens + totals.output_tokens, limits.max_tokens if limits else None
    of = f" of {budget:,}" if budget is not None else ""
    verdict = "held" if run.passed else f"failed (stop: {run.result.stop_reason})"
    calls = counted(totals.model_calls, "call")
    return Cell(text=f"{verdict}: {spent:,} tokens{of}, {calls}", evidence=_evidence(run))


def _delegation(runner: str, run: Observed | None, shape: str | None) -> Cell:
    """Whether the run of a delegation case of `shape` passed (every agent's calls counted in one budget), and how
    many of its model calls the delegates made; where the framework cannot express the shape, why (its declaration).
    Delegates asked in one reply are said to run side by side when their requests were out at the same time."""
    info = registry.RUNNERS.get(runner)
    if info is not None and (why := not_delegating(info.delegation, info.delegation_gaps, shape)):
        return Cell(text=headline(why), evidence=f"runner declaration: {why}")  # the why is long: its source
    if run is None:
        return _not_measured()
    steps = run.result.trace.steps
    theirs = [s.model_call for s in steps if s.model_call.agent not in (None, MAIN_AGENT)]
    verdict = "passed" if run.passed else f"failed (stop: {run.result.stop_reason})"
    how = ""
    if shape == "parallel" and theirs:
        how = ", side by side" if _overlapping(theirs) else ", one after the other"
    return Cell(text=f"{verdict}: {len(theirs)} of {len(steps)} calls the delegates'{how}", evidence=_evidence(run))


def _overlapping(calls: list[ModelCall]) -> bool:
    """Whether two of `calls` were out at once: one sent before another's reply came back."""
    spans = sorted((c.started_at, c.started_at + c.latency_s) for c in calls)
    return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))


def _first_request(runner: str, first_bytes: dict[str, int]) -> Cell:
    """The first request's size, and what the framework adds over the smallest runner's (same task and tools)."""
    if runner not in first_bytes:
        return _not_measured()
    size, smallest = first_bytes[runner], min(first_bytes.values())
    extra = size - smallest
    return Cell(text=f"{size / 1000:.1f} kB (+{extra / 1000:.1f} kB)", evidence="eval: vip-compound")


def _own_cases(runs: list[Observed]) -> Cell:
    """How a runner did on the cases outside looplab's own suite: passed of run, and its median model calls; with
    repeats (a case run twice or more), over every repeat, each with its 95 % interval."""
    if not runs:
        return _not_measured()
    evidence = "eval: " + ", ".join(sorted({r.case for r in runs}))
    passed = sum(bool(r.passed) for r in runs)
    calls = [r.result.totals.model_calls for r in runs]
    repeats = max(Counter(r.case for r in runs).values())
    if repeats < 2:
        return Cell(text=f"{passed} of {len(runs)} passed; {statistics.median(calls):g} calls", evidence=evidence)
    rate = pass_rate(passed, len(runs), wilson(passed, len(runs)).ends)
    middle = spread(statistics.median(calls), median_interval(calls).ends)
    text = f"{rate} passed; {middle} calls (over {repeats} repeats; [low–high]: 95% intervals)"
    return Cell(text=text, evidence=evidence)


def _bench_cells(row: object | None) -> dict[str, Cell]:
    if row is None:
        return {"turn_overhead": _not_measured(), "import_time": _not_measured()}
    return {
        "turn_overhead": Cell(text=f"{row.overhead_ms_median:.1f} ms", evidence="bench"),  # type: ignore[attr-defined]
        "import_time": Cell(text=f"{row.import_s:.2f} s", evidence="bench"),  # type: ignore[attr-defined]
    }


def _apis(runner: str) -> Cell:
    try:
        apis = registry.load(runner).apis
    except LooplabError:
        return _not_measured()
    return Cell(text=", ".join(apis), evidence="runner registry, conformance-tested")


# --- what it reads ---------------------------------------------------------------------------

#: The cases whose runs the scorecard reads.
CASES = (
    "vip-compound",
    "sloppy-calls",
    "parallel-reads",
    "silent-read",
    "injected-instruction",
    "token-budget",
    "delegation",
    "delegation-parallel",
    "delegation-nested",
)


@functools.cache
def built_in_cases() -> frozenset[str]:
    """looplab's own cases: a run of any other is a team's, shown under "your cases" (read once, when first asked,
    so importing the scorecard loads no suite)."""
    return frozenset(case_descriptions()) | frozenset(CASES)


def caps_anchor(report: RunnerReport) -> str:
    """The GitHub anchor of a runner's section in docs/iteration-caps.md (`## `runner` (dist version)`)."""
    heading = f"{report.runner} ({version_label(report)})".lower()
    return "".join(ch for ch in heading if ch.isalnum() or ch in " -_").replace(" ", "-")
