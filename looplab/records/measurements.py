"""The documents measurement writes, which views read: the caps doc (`looplab caps`) and the bench result
(`looplab bench`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, computed_field

from looplab.adapters.contract.result import NativeEnd

__all__ = [
    "BenchResult",
    "CapsDoc",
    "CostReport",
    "CostRow",
    "DelegatedTokenRow",
    "DelegationReport",
    "DelegationRow",
    "Ending",
    "EndingByTool",
    "HarnessTax",
    "KnobReport",
    "MergeBench",
    "PROXY_TURN_TARGET_MS",
    "Row",
    "RunnerBench",
    "RunnerReport",
    "SAFETY_STOP",
    "ServerLatency",
    "StreamedCap",
    "TAX_TARGET",
    "TURN_TARGET_MS",
    "TokenReport",
    "TokenRow",
    "history_of",
    "version_label",
]

#: Model calls; where the boundary cuts off a cap that never fires (above every default seen).
SAFETY_STOP = 60
#: The harness tax looplab aims to stay under (outside the tools, as a fraction of the bare loop's time) for every
#: runner whose bare loop is a framework's; the framework-less loop's ratio is reported, not targeted (its time
#: outside the tools is little more than the scripted model's, so any cost is a large fraction of it).
TAX_TARGET = 0.05
#: What looplab may add a model turn outside the tools, in ms, for a runner whose model requests go to the model
#: server in process (through a recorded SDK client or transport).
TURN_TARGET_MS = 0.25
#: The same for a runner whose model requests pass looplab's recording model proxy: one more loopback hop a request.
PROXY_TURN_TARGET_MS = 0.5
#: Pairs below which the tax gets no verdict: a percentile bootstrap of a median from a handful of pairs is
#: about as wide as the pairs themselves, and three pairs that all fall under the target prove nothing.
MIN_VERDICT_PAIRS = 20

#: How one target came out: its whole interval on the right side of it, or not decided by these pairs.
Decision = Literal["under", "over", "undecided"]


# --- the caps doc ------------------------------------------------------------------------------------------


class Ending(BaseModel):
    """How the framework ended a probe, in a line."""

    how: str
    exception: str | None = None
    message: str | None = None
    history: str | None = None
    #: The framework's own counters as it left them, by where a user reads each (empty: it reports none looplab
    #: reads, or the doc predates them).
    counters: dict[str, int] = {}

    @classmethod
    def of(cls, end: NativeEnd | None, model_calls: int) -> Ending:
        ending = cls._how(end, model_calls)
        return ending if end is None else ending.model_copy(update={"counters": dict(end.counters)})

    @classmethod
    def _how(cls, end: NativeEnd | None, model_calls: int) -> Ending:
        if end is None or (end.kind == "refused by the model boundary" and model_calls >= SAFETY_STOP):
            return cls(how=f"kept going: stopped by looplab's safety stop at {SAFETY_STOP} model calls")
        if end.kind == "refused by the model boundary":  # under looplab's mapping: one call past max_steps
            return cls(how="asked for one more model call: refused by the model boundary", message=end.message)
        if end.kind == "raised":
            return cls(how="raises", exception=end.exception, message=end.message, history=end.history)
        if end.text:
            return cls(how="returns, with a message appended as the final text", message=end.text[:200])
        return cls(how="returns silently (no exception, no answer)")


class Row(BaseModel):
    value: int | None
    setting: str | None = None
    model_calls: int
    tool_calls: int
    ending: Ending
    #: Whether the tools the last model call asked for ran before the run ended (None: not measured).
    last_call_tools: Literal["ran", "did not run", "none asked for"] | None = None


class EndingByTool(BaseModel):
    """A run whose model call 3 asks for a tool the runner marks as ending the run with its result, the framework's
    own way (`mark`): the smallest knob value at which its result comes back, and the run at one less."""

    mark: str
    #: None: no value up to the search's end let the tool's result come back.
    smallest_value: int | None
    #: The run at `smallest_value - 1` (None: the smallest was 1, or none was found): did the tool run, how it ended.
    one_less: Row | None = None


class KnobReport(BaseModel):
    knob: str
    default: int | None
    default_source: str
    counts: str
    rows: list[Row]
    unset: Row
    smallest_value_to_answer_on_call_3: int | None
    #: The same question when call 3 asks for a tool that ends the run instead of answering (None: the runner
    #: marks no such tool, or the doc predates it).
    ending_by_tool: EndingByTool | None = None


class DelegationRow(BaseModel):
    """A run whose parent hands one question to a child that never stops (the delegating probe), the cap at `value`."""

    value: int | None
    model_calls: int
    parent_calls: int
    child_calls: int
    ending: Ending
    #: What the parent's delegating tool returned once the child ended (None: the run ended before the parent
    #: saw anything).
    parent_saw: str | None = None
    #: Which of the run's model calls (every agent's, counted from 1) was the child's last: with `child_calls`, what
    #: each counter held when the child stopped (None: the child made no call, or the doc predates it).
    child_last_call: int | None = None
    #: In a nested run, the calls of the agent the child handed its question on to, and which of the run's calls was
    #: its last (None: not a nested run; the last also when it made none).
    grandchild_calls: int | None = None
    grandchild_last_call: int | None = None


class DelegationReport(BaseModel):
    """The `max_steps` knob when the run's agent delegates, measured with the delegating probe: one child, two
    children asked in one reply, and three levels (a child that hands its question on)."""

    #: How the runner delegates (its declaration's `delegation`).
    how: str
    knob: str
    #: Whose model calls the knob counts, read off the rows.
    counts: str
    rows: list[DelegationRow]
    #: Which calls each of the framework's own counters held when the run ended, read off `rows` (None: it reports
    #: none, or the doc predates them).
    counters_hold: str | None = None
    #: The parent asks two children in one reply (`child_calls`: both children's together); empty where the
    #: framework cannot (its `delegation_gaps`) or the doc predates it.
    parallel: list[DelegationRow] = []
    #: How far the run passed the value with two children at once, read off `parallel`.
    parallel_counts: str | None = None
    #: What thread timing decides in `parallel` (its declaration's `delegation_races`; None: nothing).
    parallel_races: str | None = None
    #: The child hands its question on to a third agent that never stops; empty as `parallel` is.
    nested: list[DelegationRow] = []
    #: Whether the knob reaches the third level, read off `nested`.
    nested_counts: str | None = None
    #: The parent's knob at `CHILD_DEFAULT_VALUE`, the child's left at the framework's default (None: the doc
    #: predates it).
    child_default: DelegationRow | None = None
    #: What the child did at its default under the parent's cap, read off `child_default` and `rows`.
    child_default_counts: str | None = None


class TokenRow(BaseModel):
    """A runaway run with the framework's token budget at `value`."""

    value: int
    model_calls: int
    #: Input plus output tokens over the run's calls, as the endpoint reported them.
    tokens: int
    #: The call whose reply took the run's total past the budget (None: no call did).
    passed_on_call: int | None
    ending: Ending


class DelegatedTokenRow(TokenRow):
    """A run whose parent hands one question to a child that never stops, the framework's token budget at `value`:
    `tokens` and `passed_on_call` are the run's, both agents' together."""

    parent_calls: int
    child_calls: int
    #: The child's input plus output tokens.
    child_tokens: int


class TokenReport(BaseModel):
    """The framework's own run-wide token budget, measured with a runaway."""

    knob: str
    default: int | None
    default_source: str
    #: What it counts and when it stops, read off the rows.
    counts: str
    rows: list[TokenRow]
    #: The budget when the agent delegates to a child that never stops (empty: it cannot delegate, or the doc
    #: predates it), and whose tokens it counts, read off those rows.
    under_delegation: list[DelegatedTokenRow] = []
    under_delegation_counts: str | None = None


class CostRow(BaseModel):
    """A run with the framework's own dollar budget at `value_usd`: a runaway, or (with `parent_calls` and
    `child_calls`) a parent handing one question to a child that never stops."""

    value_usd: float
    model_calls: int
    parent_calls: int | None = None
    child_calls: int | None = None
    ending: Ending
    #: Whether the run went on until looplab's deadline cut it (`COST_DEADLINE_S` after it began): the framework
    #: waited on after its last model call instead of ending.
    held_to_deadline: bool


class CostReport(BaseModel):
    """The framework's own dollar budget for a run, priced by the framework, measured with a runaway and with the
    delegating probe."""

    knob: str
    #: Where it stops a runaway, read off `rows`.
    counts: str
    rows: list[CostRow]
    under_delegation: list[CostRow] = []
    #: Whether it reaches the child's calls, and how the run ended, read off `under_delegation`.
    under_delegation_counts: str | None = None


class RunnerReport(BaseModel):
    runner: str
    distribution: str
    version: str
    mapping: str
    mapping_rows: list[Row]
    knobs: list[KnobReport]
    code: str
    #: The language of `code`: the adapter's, or the program's it runs in another process.
    code_language: str = "python"
    #: Its cap when its agent delegates (None: it cannot delegate).
    delegation: DelegationReport | None = None
    #: Its framework's run-wide token budget (None: it has none).
    token_budget: TokenReport | None = None
    #: Its framework's own dollar budget (None: it has none, or the doc predates it).
    cost_budget: CostReport | None = None
    #: Its first knob at the cap with whole and with streamed replies (None: it runs one of the two only, or the
    #: doc predates it).
    streamed: StreamedCap | None = None


class StreamedCap(BaseModel):
    """The framework's own cap at one value, run with whole replies and with streamed ones (`--stream on`): a
    framework may end differently, or count differently, when it reads a stream."""

    knob: str
    value: int
    whole: Row
    streamed: Row

    @property
    def same(self) -> bool:
        """Whether streaming changed nothing measured: the calls made, the tools run, how the run ended (an
        exception's message aside: it may quote a reply, whose form is the mode's) and every counter the framework
        reports either way."""
        return self.ends_alike and not self.counters_differ

    @property
    def counters_differ(self) -> dict[str, tuple[int, int]]:
        """The framework's counters that read differently streamed, whole value first: those it reports either way."""
        whole, streamed = self.whole.ending.counters, self.streamed.ending.counters
        return {k: (whole[k], streamed[k]) for k in whole.keys() & streamed.keys() if whole[k] != streamed[k]}

    def counters_only(self, mode: Literal["whole", "streamed"]) -> dict[str, int]:
        """The framework's counters that `mode`'s run reports and the other's does not (a streamed result's turn)."""
        row, other = (self.whole, self.streamed) if mode == "whole" else (self.streamed, self.whole)
        return {k: n for k, n in row.ending.counters.items() if k not in other.ending.counters}

    @property
    def ends_alike(self) -> bool:
        """Whether the calls made, the tools run and how the run ended are the same either way, the framework's
        counters aside."""
        leave_out = {"setting": True, "ending": {"message", "counters"}}
        return self.whole.model_dump(exclude=leave_out) == self.streamed.model_dump(exclude=leave_out)


class CapsDoc(BaseModel):
    generated_by: str = "looplab caps"
    safety_stop: int = SAFETY_STOP
    runners: list[RunnerReport]


def history_of(e: Ending) -> str:
    """Where the partial history is when the framework stopped as `e` says."""
    if e.history:
        return f"the exception carries it: `{e.history}`"
    if e.how.startswith("returns"):
        return "in what the framework returns (its final state or messages)"
    if e.exception:
        return "not in the exception; looplab's trace has it"
    return "the run did not stop"


def version_label(r: RunnerReport) -> str:
    """`distribution version`, as the runner's section heading names it."""
    return r.version if r.version.startswith(r.distribution) else f"{r.distribution} {r.version}"


# --- the bench result --------------------------------------------------------------------------------------


class MergeBench(BaseModel):
    """How long merging a sharded full matrix takes: read and validate every shard, merge, write the result."""

    shards: int
    cells: int
    runners: int
    cases: int
    seconds: float


class RunnerBench(BaseModel):
    """One runner's numbers, and their ratios to the hand-rolled runner's."""

    runner: str
    version: str
    runs: int
    stop_reasons: dict[str, int]
    turns_median: float
    overhead_ms_median: float
    overhead_ms_p95: float
    first_turn_ms_median: float
    model_ms_median: float
    wall_ms_median: float
    import_s: float
    peak_rss_mb: float
    ratio_overhead_median: float | None = None
    ratio_overhead_p95: float | None = None
    ratio_import: float | None = None
    ratio_peak_rss: float | None = None


class HarnessTax(BaseModel):
    """The same framework loop, bare and through looplab: medians per run, what looplab adds a turn, their verdict.

    Two targets: `added_ms_per_turn` at most `turn_target_ms` (every runner), and `tax_outside_tools` under
    `TAX_TARGET` (a runner whose bare loop is a framework's: `ratio_targeted`). A target is met or missed only when
    its whole 95 % interval is on one side of it, from at least `MIN_VERDICT_PAIRS` pairs.
    """

    runner: str
    turns_bare: float
    turns_looplab: float
    bare_wall_ms: float
    looplab_wall_ms: float
    tax_wall: float
    bare_outside_tools_ms: float
    looplab_outside_tools_ms: float
    tax_outside_tools: float
    #: The median over the pairs of (looplab's run minus its bare twin's, both outside the tools) per model turn, ms.
    added_ms_per_turn: float
    #: The 95 % bootstrap interval of `tax_outside_tools` (the median of the paired ratios); None under 2 pairs.
    tax_interval: tuple[float, float] | None = None
    #: The paired runs behind the tax and its interval.
    pairs: int = 0
    #: The 95 % bootstrap interval of `added_ms_per_turn`, ms; None under 2 pairs.
    added_ms_interval: tuple[float, float] | None = None
    #: The wire API both loops spoke (None: not recorded).
    api: str | None = None
    #: Whether looplab's run sent its model requests through the recording model proxy (`adapters/boundary/proxy.py`).
    via_proxy: bool = False
    #: Whether the ratio has a target: False for the framework-less loop, whose ratio is only reported.
    ratio_targeted: bool = True

    @computed_field  # type: ignore[prop-decorator]
    @property
    def turn_target_ms(self) -> float:
        """The most looplab may add a model turn, ms: more through the model proxy."""
        return PROXY_TURN_TARGET_MS if self.via_proxy else TURN_TARGET_MS

    @property
    def turn_decision(self) -> Decision:
        """Whether `added_ms_per_turn` is at most `turn_target_ms`, over it, or not decided by these pairs."""
        return _decide(self.added_ms_interval, self.turn_target_ms, self.pairs, meets_at_target=True)

    @property
    def ratio_decision(self) -> Decision | None:
        """Whether the tax is under `TAX_TARGET`, over it, or undecided; None where the ratio is not targeted."""
        if not self.ratio_targeted:
            return None
        return _decide(self.tax_interval, TAX_TARGET, self.pairs, meets_at_target=False)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> str:
        """`passes` when every target that applies is met; else which target was missed, or what leaves it open."""
        if self.pairs < MIN_VERDICT_PAIRS or self.added_ms_interval is None or self.tax_interval is None:
            return f"undecided: {self.pairs} pairs, a verdict needs {MIN_VERDICT_PAIRS}"
        decided = [(f"{self.turn_target_ms:g} ms/turn", self.turn_decision)]
        if self.ratio_decision is not None:
            decided.append((f"{TAX_TARGET:.0%}", self.ratio_decision))
        missed = [target for target, decision in decided if decision == "over"]
        if missed:
            return f"fails: over {' and '.join(missed)}"
        open_ = [target for target, decision in decided if decision == "undecided"]
        if open_:
            return f"undecided: more pairs needed ({' and '.join(open_)})"
        return "passes"


def _decide(interval: tuple[float, float] | None, target: float, pairs: int, *, meets_at_target: bool) -> Decision:
    """`under` when the whole interval is under `target` (or at it, when `meets_at_target`), `over` when the whole
    interval is above it, else `undecided` (also under `MIN_VERDICT_PAIRS` pairs or without an interval)."""
    if interval is None or pairs < MIN_VERDICT_PAIRS:
        return "undecided"
    low, high = interval
    if high < target or (meets_at_target and high == target):
        return "under"
    if low > target:
        return "over"
    return "undecided"


class ServerLatency(BaseModel):
    """The scripted model server alone: one first-turn Chat Completions request at a time, on loopback; and a
    long first-turn request (Responses, `input` one string of `long_request_chars` characters)."""

    requests: int
    median_ms: float
    p95_ms: float
    long_request_chars: int
    long_requests: int
    long_request_ms_median: float
    #: The same first-turn requests through a run's recording model proxy (`adapters/boundary/proxy.py`) in front of it.
    proxy_median_ms: float | None = None


class BenchResult(BaseModel):
    """Everything `looplab bench` measured, with what it ran on."""

    date: str
    case: str
    repeat: int
    import_repeat: int
    python: str
    platform: str
    cores: int
    runners: list[RunnerBench]
    harness_tax: list[HarnessTax]
    #: Runners with no bare loop (`external`, a team's command): no harness tax.
    no_bare_loop: list[str] = []
    server: ServerLatency
    recorded_model_ms_median: float
    help_s_median: float
    #: Seconds to read, validate, merge and write 10 shard documents of the full matrix (`looplab.records.results`).
    merge: MergeBench | None = None
