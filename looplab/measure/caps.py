"""`looplab caps`: each runner's native iteration cap, measured on the installed library.

Every number comes from running the framework against the scripted model
with looplab's normalization out of the way (the model boundary's own stop
is moved to a safety limit far above the values probed): what the knob
counts, what it does at the cap, where its default comes from and what an
unset cap lets a runaway do. `docs/iteration-caps.json` holds the
measurements; `docs/iteration-caps.md` is generated from it, keeping the
prose between its `<!-- prose:... -->` markers.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Literal

from looplab.adapters import registry
from looplab.adapters.contract import files
from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import Api
from looplab.adapters.contract.result import RunResult
from looplab.adapters.contract.runner import Probe
from looplab.adapters.session import Runner
from looplab.measure import caps_budgets
from looplab.records.measurements import (
    SAFETY_STOP,
    CapsDoc,
    Ending,
    EndingByTool,
    KnobReport,
    Row,
    RunnerReport,
    StreamedCap,
    history_of,
    version_label,
)
from looplab.run.harness import Endpoint, ModelChoice
from looplab.scenarios.cases import load_cases
from looplab.scenarios.scripted.probes import (
    REPORT,
    REPORTED,
    AnswersOnCall,
    DelegatesToOneThatNeverStops,
    EndsByToolOnCall,
    NeverStops,
)
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Guard, Workspace, default_tools
from looplab.views.markdown import cell, ending_text

__all__ = ["measure", "merged", "to_json", "to_markdown"]

UNIT_VALUES = (1, 2, 3, 5)
ANSWER_ON = 3  # the off-by-one probe answers on this model call
MAX_SEARCH = 8 * ANSWER_ON  # the largest knob value tried for it
#: Seconds a probe run may take before looplab's deadline cuts it (a run takes a few at most).
PROBE_DEADLINE_S = 120.0
#: The probe policy whose call `ANSWER_ON` asks for the tool that ends the run.
ENDS_BY_TOOL = "ends-by-tool-on-3"
#: The value a runner's first knob is run at with whole replies and with streamed ones.
STREAMED_VALUE = 3
DOCS = Path("docs")
#: Seconds one runner's measurement in its runner environment may take (about a minute is usual).
ENVIRONMENT_TIMEOUT_S = 900.0


class Prober:
    """Runs one runner against the probe policies, each run in a fresh workspace."""

    def __init__(self, servers: dict[str, ScriptedModelServer], api: Api | None = None) -> None:
        self.servers = servers
        #: The wire API every run speaks (None: each runner's first).
        self.api = api
        case = load_cases()["vip-compound"]
        self.repo, self.task, self.system_prompt = case.repo_path, case.stated_task, case.system_prompt

    def run(
        self,
        adapter: Runner,
        policy: str,
        probe: Probe | None,
        max_steps: int = SAFETY_STOP,
        *,
        delegate: Delegate | None = None,
        stream: bool | None = None,
        max_seconds: float = PROBE_DEADLINE_S,
    ) -> RunResult:
        """One run of `adapter` against the probe policy `policy`; `stream` asks for streamed or whole replies (None:
        the runner's first); looplab's deadline cuts it at `max_seconds`."""
        server = self.servers[policy]
        urls = server.base_urls
        spec = Endpoint(ModelChoice(api=self.api, stream=stream), urls).spec_for(adapter)
        # A probe that asks for the tool ending the run offers it beside the shared ones (else the tools stay as
        # every other probe's, whose requests, and so tokens, they shape).
        tools = [*default_tools(), REPORT] if probe is not None and probe.ending_tool else default_tools()
        with Workspace(self.repo) as ws:
            guard = Guard(ws, tools=tools, max_repeats=SAFETY_STOP + 1)
            limits = Limits(max_steps=max_steps, max_seconds=max_seconds)
            return adapter.run(
                self.task, guard, limits, spec, probe, system_prompt=self.system_prompt, delegate=delegate
            )

    def row(
        self, adapter: Runner, probe: Probe | None, max_steps: int = SAFETY_STOP, stream: bool | None = None
    ) -> Row:
        result = self.run(adapter, "never-stops", probe, max_steps, stream=stream)
        return _row_of(result, probe.value if probe else max_steps, None if probe else result.native_cap.knob)

    def smallest_to_finish(self, adapter: Runner, knob: str) -> int | None:
        for value in range(1, MAX_SEARCH + 1):
            result = self.run(adapter, "answers-on-3", Probe(knob=knob, value=value))
            if result.answer == f"answered on model call {ANSWER_ON}":
                return value
        return None

    def ending_by_tool(self, adapter: Runner, knob: str) -> EndingByTool | None:
        """The smallest value of `knob` at which a run whose call `ANSWER_ON` asks for the tool the runner marks as
        ending the run gets that tool's result back as its answer, and the run at one less; None for a runner
        that marks no such tool."""
        if adapter.ending_tool is None:
            return None
        below: RunResult | None = None  # the run at one less than the value tried
        for value in range(1, MAX_SEARCH + 1):
            result = self.run(adapter, ENDS_BY_TOOL, Probe(knob=knob, value=value, ending_tool=REPORT.name))
            if _ended_by_the_tool(result):
                one_less = None if below is None else _row_of(below, value - 1)
                return EndingByTool(mark=adapter.ending_tool, smallest_value=value, one_less=one_less)
            below = result
        return EndingByTool(mark=adapter.ending_tool, smallest_value=None)

    def knob(self, adapter: Runner, knob: str, default: Any) -> KnobReport:
        rows = [self.row(adapter, Probe(knob=knob, value=v)) for v in UNIT_VALUES]
        return KnobReport(
            knob=knob,
            default=default.value,
            default_source=default.source,
            counts=_unit(rows),
            rows=rows,
            unset=self.row(adapter, Probe(knob=knob, value=None)),
            smallest_value_to_answer_on_call_3=self.smallest_to_finish(adapter, knob),
            ending_by_tool=self.ending_by_tool(adapter, knob),
        )

    def streamed(self, adapter: Runner) -> StreamedCap | None:
        """Its first knob at `STREAMED_VALUE`, with whole replies and with streamed ones; None for a runner that
        runs only one of the two (on this wire API)."""
        if not self._takes_both(adapter):
            return None
        probe = Probe(knob=adapter.knobs[0], value=STREAMED_VALUE)
        whole, streamed = (self.row(adapter, probe, stream=stream) for stream in (False, True))
        return StreamedCap(knob=probe.knob, value=STREAMED_VALUE, whole=whole, streamed=streamed)

    def _takes_both(self, adapter: Runner) -> bool:
        """Whether the runner takes whole replies and streamed ones on this wire API: some stream only on some APIs
        (their `stream_for` refuses the other mode in one line)."""
        urls = self.servers["never-stops"].base_urls
        try:
            modes = {
                adapter.stream_for(Endpoint(ModelChoice(api=self.api, stream=s), urls).spec_for(adapter))
                for s in (False, True)
            }
        except LooplabError:
            return False
        return modes == {False, True}

    def runner(self, name: str) -> RunnerReport:
        adapter = registry.load(name)
        defaults = adapter.knob_defaults()
        return RunnerReport(
            runner=name,
            distribution=adapter.distribution,
            version=adapter.version(),
            mapping=adapter.knobs[0],
            mapping_rows=[self.row(adapter, None, max_steps=n) for n in UNIT_VALUES],
            knobs=[self.knob(adapter, k, defaults[k]) for k in adapter.knobs],
            code=adapter.cap_code(),
            code_language=adapter.cap_language,
            delegation=caps_budgets.delegation(self.run, adapter),
            token_budget=caps_budgets.token_budget(self.run, adapter, defaults.get(adapter.token_knob or "")),
            cost_budget=caps_budgets.cost_budget(self.run, adapter),
            streamed=self.streamed(adapter),
        )


def _row_of(result: RunResult, value: int | None, setting: str | None = None) -> Row:
    """A probe run as a row of the caps doc: its calls, how the framework ended it, and the last call's tools."""
    return Row(
        value=value,
        setting=setting,
        model_calls=result.totals.model_calls,
        tool_calls=result.totals.tool_calls,
        ending=_ending_of(result),
        last_call_tools=_last_call_tools(result),
    )


def _ended_by_the_tool(result: RunResult) -> bool:
    """Whether the framework ended the run with the ending tool's result as its answer, on the call that asked."""
    end = result.native_end
    text = (end.text or "") if end is not None and end.kind == "returned" else ""
    return text.startswith(REPORTED) and result.totals.model_calls == ANSWER_ON


#: How a run the ending tool ended is said (its result is the probe's, so the row does not quote it).
ENDED_BY_THE_TOOL = "returns the ending tool's result as its answer"


def _ending_of(result: RunResult) -> Ending:
    ending = Ending.of(result.native_end, result.totals.model_calls)
    if _ended_by_the_tool(result):
        return Ending(how=ENDED_BY_THE_TOOL, counters=ending.counters)
    return ending


def _last_call_tools(result: RunResult) -> Literal["ran", "did not run", "none asked for"] | None:
    """Read off the trace: did the tools of the run's last model call run before it ended?"""
    if not result.trace.steps:
        return None
    last = result.trace.steps[-1]
    if not last.model_call.tool_calls_requested:
        return "none asked for"
    return "ran" if last.tool_calls else "did not run"


def _unit(rows: list[Row]) -> str:
    """What a knob counts, read off the rows: model calls if value N always made N calls."""
    pairs = [(r.value, r.model_calls) for r in rows]
    if all(v == m for v, m in pairs):
        return "model calls"
    if all(v == t for v, t in ((r.value, r.tool_calls) for r in rows)):
        return "tool calls"
    return "not model calls: " + ", ".join(f"{v} -> {m} model calls" for v, m in pairs)


def measure(
    runners: list[str],
    on_runner: Callable[[str], None] | None = None,
    isolate: bool | None = None,
    api: Api | None = None,
    versions: Mapping[str, str] | None = None,
) -> CapsDoc:
    """Probe every runner in `runners`, on `api` (None: each runner's first wire API, as the docs are measured); the
    probe servers live for the whole measurement.

    `isolate` measures each in its runner environment (`measure_in_environment`); None (the default) does
    so for a runner whose framework cannot share this environment (`Declaration.in_all` false) and is not
    installed here; False measures every one here. A runner in `versions` is measured in an environment with that
    version of its framework (`spec_for`'s pin: `1.0.10`, `>=1.0,<1.1`), whatever `isolate` says.
    """
    pins = versions or {}
    with ExitStack() as stack:
        prober = Prober(probe_servers(stack), api)
        reports = []
        for name in runners:
            if on_runner:
                on_runner(name)
            info = registry.RUNNERS[name]
            elsewhere = name in pins or (isolate if isolate is not None else info.elsewhere())
            reports.append(measure_in_environment(name, api, pins.get(name)) if elsewhere else prober.runner(name))
    return CapsDoc(runners=reports)


def probe_servers(stack: ExitStack) -> dict[str, ScriptedModelServer]:
    """A scripted model server for each probe policy the measurement runs, by the policy's name, each closed with
    `stack`."""
    policies = {
        "never-stops": NeverStops(),
        "answers-on-3": AnswersOnCall(ANSWER_ON),
        ENDS_BY_TOOL: EndsByToolOnCall(ANSWER_ON),
        caps_budgets.DELEGATING_PROBE: DelegatesToOneThatNeverStops(),
        caps_budgets.PARALLEL_PROBE: DelegatesToOneThatNeverStops(2),
    }
    return {name: stack.enter_context(ScriptedModelServer(policy)) for name, policy in policies.items()}


def measure_in_environment(runner: str, api: Api | None = None, pin: str | None = None) -> RunnerReport:
    """`runner` measured by `python -m looplab.measure caps-runner` in its runner environment (created if missing),
    with `pin`'s version of its framework when given."""
    from looplab.adapters.boundary.processes import run_bounded
    from looplab.run.environments import ensure, source_root, spec_for

    env = ensure(spec_for(runner, pin))
    with tempfile.TemporaryDirectory(prefix="looplab-caps-") as folder:
        out = Path(folder) / "report.json"
        command = [str(env.python), "-m", "looplab.measure", "caps-runner", runner, str(out)]
        command += ["--api", api] if api else []
        code, stderr = run_bounded(command, env.child_env(), source_root(), ENVIRONMENT_TIMEOUT_S)
        if code != 0 or not out.is_file():
            how = "timed out" if code is None else f"exited {code}"
            last = stderr[-1] if stderr else "no output"
            raise LooplabError(f"measuring {runner} in its environment {env.path} {how}: {last}")
        return RunnerReport.model_validate_json(files.read_text(out))


def to_json(doc: CapsDoc) -> str:
    return json.dumps(doc.model_dump(), indent=2) + "\n"


def merged(fresh: CapsDoc, committed_json: str) -> CapsDoc:
    """The committed document with the runners `fresh` measured replaced (or added), every other runner kept as it
    was: measuring some runners updates their sections and leaves the rest of the docs alone."""
    committed = CapsDoc.model_validate_json(committed_json)
    by_runner = {r.runner: r for r in committed.runners} | {r.runner: r for r in fresh.runners}
    order = {name: n for n, name in enumerate(registry.RUNNERS)}
    runners = sorted(by_runner.values(), key=lambda r: order.get(r.runner, len(order)))
    return fresh.model_copy(update={"runners": runners})


# --- the Markdown, generated from the JSON -------------------------------------------------------------

PROSE = re.compile(r"<!-- prose:(?P<key>[\w-]+) -->\n(?P<text>.*?)<!-- /prose -->", re.S)
DEFAULT_PROSE = "(Notes on this runner go here; `looplab caps` keeps what stands between these markers.)\n"


def _prose(existing: str) -> dict[str, str]:
    return {m["key"]: m["text"] for m in PROSE.finditer(existing)}


ROW_HEADER = "model calls | tool calls | tools of the last call | how the framework ended |"
ROW_RULE = "|---|---|---|---|---|"


def _row(row: Row, first: object = None) -> str:
    """A row of the table under `ROW_HEADER`, its first column the row's value unless `first` is given."""
    last = row.last_call_tools or "not measured"
    head = row.value if first is None else first
    return f"| {head} | {row.model_calls} | {row.tool_calls} | {last} | {ending_text(row.ending)} |"


#: A streamed result's turn counter, in the TypeScript Agents SDK.
_TS_TURN = "StreamedRunResult.currentTurn"
#: The issues users report that a streamed measurement reproduces: the runner, the issue in words, and what the
#: measurement must show for the doc to name it.
STREAMED_REPORTED: tuple[tuple[str, str, Callable[[StreamedCap], bool]], ...] = (
    (
        "ts_openai_agents",
        "openai-agents-js #1480: the streamed result's turn counter reads 0",
        lambda s: s.streamed.ending.counters.get(_TS_TURN) == 0 < s.streamed.model_calls,
    ),
)


def _streamed_markdown(report: StreamedCap | None, runner: str = "") -> list[str]:
    """A runner section's part on streamed replies at the cap, beside whole ones; the issues users report that
    `runner`'s measurement reproduces named where it shows them."""
    out = ["", "### Streamed at the cap", ""]
    if report is None:
        return [*out, "Not measured: it takes one of whole or streamed replies only."]
    if report.same:
        verdict = "the same either way"
    elif report.ends_alike:
        verdict = "the same ending, but its own counters read differently"
    else:
        verdict = "not the same: streaming changes how it stops"
    out += [f"`{cell(report.knob)}` = {report.value}, with whole replies and with streamed ones: {verdict}.", ""]
    out += [f"| replies | {ROW_HEADER} its own counters at the end |", ROW_RULE + "---|"]
    out += [f"{_row(row, mode)} {_counters(row.ending.counters)} |" for mode, row in _modes(report)]
    cited = [f"- reproduces {issue}" for name, issue, shows in STREAMED_REPORTED if name == runner and shows(report)]
    return [*out, *_counters_beside(report), *(["", *cited] if cited else [])]


def _modes(report: StreamedCap) -> list[tuple[Literal["whole", "streamed"], Row]]:
    return [("whole", report.whole), ("streamed", report.streamed)]


def _counters(counters: Mapping[str, int]) -> str:
    """The framework's own counters in a cell: each where a user reads it, and its value."""
    return ", ".join(f"`{cell(where)}` {n}" for where, n in counters.items()) or "none read"


def _counters_beside(report: StreamedCap) -> list[str]:
    """Lines under the streamed table on the framework's counters that one mode has and the other lacks, or that
    read differently: what a user of the other mode would not see."""
    lines = []
    for mode, row in _modes(report):
        if only := report.counters_only(mode):
            read = ", ".join(f"`{cell(k)}` = {n}" for k, n in only.items())
            lines.append(f"Read only {mode}: {read}, after {row.model_calls} model calls.")
    for where, (whole, streamed) in report.counters_differ.items():
        lines.append(f"Read differently: `{cell(where)}` is {whole} whole and {streamed} streamed.")
    return ["", *lines] if lines else []


def _ending_by_tool_lines(knob: KnobReport, runner: str) -> list[str]:
    """A knob's lines on a run whose model call 3 asks for the tool that ends it, instead of answering."""
    ending = knob.ending_by_tool
    if ending is None:
        return []
    line = (
        f"- smallest value that lets a run whose model call 3 asks for a tool ending the run (`{cell(ending.mark)}`) "
        f"end with that tool's result: {ending.smallest_value if ending.smallest_value is not None else 'none'}"
    )
    below = ending.one_less
    if below is not None:
        lost = " (the tool ran; its result did not come back)" if _result_lost(below) else ""
        line += (
            f"; at {below.value}: {below.model_calls} model calls, the last call's tools: {below.last_call_tools}; "
            f"it {ending_text(below.ending)}{lost}"
        )
    cited = [f"- reproduces {issue}" for name, at, issue in ENDING_REPORTED if (name, at) == (runner, knob.knob)]
    return [line, *(cited if below is not None and _result_lost(below) else [])]


def _result_lost(row: Row) -> bool:
    """Whether the ending tool, asked for on the run's last call, ran without its result ending the run."""
    return row.model_calls == ANSWER_ON and row.last_call_tools == "ran" and row.ending.how != ENDED_BY_THE_TOOL


#: The issues users report that an ending-tool measurement reproduces where the tool ran and its result was lost:
#: the runner, the knob and the issue in words.
ENDING_REPORTED = (
    ("langchain", "recursion_limit", "langgraph #8204: a return_direct tool at the last step ends without its result"),
)


def _last_tools(rows: list[Row]) -> str:
    """What the framework does natively with the tools of the call its cap lets be the last."""
    seen = {r.last_call_tools for r in rows if r.last_call_tools}
    if not seen:
        return "not measured"
    if len(seen) == 1:
        how = seen.pop()
        return f"{how} at every value measured" + (
            " (looplab's normalization runs none: no model call is left to read their results)" if how == "ran" else ""
        )
    return "; ".join(f"{r.value}: {r.last_call_tools or 'not measured'}" for r in rows)


def to_markdown(doc: CapsDoc, existing: str = "") -> str:
    """The doc a person reads: the results in two summary tables, how they were measured (the intro prose), then a
    section per runner; prose blocks are kept."""
    prose = _prose(existing)

    def block(key: str) -> Iterator[str]:
        yield f"<!-- prose:{key} -->"
        yield (prose.get(key) or DEFAULT_PROSE).rstrip("\n")
        yield "<!-- /prose -->"

    # The results first, in two tables narrow enough for a page (the long text in each one's last column); how they
    # were measured after them.
    out = [
        "# Iteration caps, measured",
        "",
        "What each runner's own cap counts and does, measured by `looplab caps` on the versions named (each runner's "
        "section has every value measured and the code that sets the cap; [how these were measured]"
        "(#how-these-were-measured) follows the tables).",
        "",
        "| runner | version | native knob for `max_steps=N` | default | counts | at the cap |",
        "|---|---|---|---|---|---|",
    ]
    for r in doc.runners:
        k = r.knobs[0]
        default = "none" if k.default is None else k.default
        out.append(
            f"| `{r.runner}` | {version_label(r)} | `{cell(r.mapping)}` | {default} | {k.counts} | "
            f"{ending_text(k.rows[0].ending)} |"
        )
    out += [
        "",
        "| runner | unset, a runaway makes | smallest value to answer on call 3 | token budget | under delegation |",
        "|---|---|---|---|---|",
    ]
    for r in doc.runners:
        k = r.knobs[0]
        out.append(
            f"| `{r.runner}` | {k.unset.model_calls} model calls | {k.smallest_value_to_answer_on_call_3} | "
            f"{caps_budgets.token_cell(r.token_budget)} | {caps_budgets.delegation_cell(r.delegation)} |"
        )
    out += [
        "",
        f"Safety stop for a cap that never fires: {doc.safety_stop} model calls (looplab's, not the framework's).",
        "",
        "## How these were measured",
        "",
        *block("intro"),
        "",
    ]
    for r in doc.runners:
        out += [f"## `{r.runner}` ({version_label(r)})", "", *block(r.runner), ""]
        out += [f"looplab maps `max_steps=N` onto `{cell(r.mapping)}`; measured:", ""]
        out += [f"| max_steps | {ROW_HEADER}", ROW_RULE, *map(_row, r.mapping_rows)]
        for k in r.knobs:
            default = "none (no limit)" if k.default is None else f"{k.default}"
            out += ["", f"### `{cell(k.knob)}`", ""]
            out += [f"- default: {default}, read from `{k.default_source}`"]
            out += [f"- counts: {k.counts}"]
            out += [f"- unset, a runaway made {k.unset.model_calls} model calls: {ending_text(k.unset.ending)}"]
            smallest = k.smallest_value_to_answer_on_call_3
            out += [f"- smallest value that lets a run answering on model call 3 finish: {smallest}"]
            out += _ending_by_tool_lines(k, r.runner)
            native = history_of(k.rows[0].ending)
            out += [f"- partial history at the cap: {native}"]
            out += [f"- the tools the last model call asked for: {_last_tools(k.rows)}", ""]
            out += [f"| value | {ROW_HEADER}", ROW_RULE, *map(_row, k.rows)]
        out += _streamed_markdown(r.streamed, r.runner)
        out += caps_budgets.markdown(r.delegation, r.token_budget, r.runner, r.cost_budget)
        out += ["", "The code that sets the cap:", "", f"```{r.code_language}", r.code, "```", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m looplab.measure caps-runner RUNNER OUT [--api API]`: one runner measured in this interpreter, its
    report written to OUT (`looplab caps` starts it in the runner's environment)."""
    import argparse
    import typing

    parser = argparse.ArgumentParser(prog="python -m looplab.measure caps-runner")
    parser.add_argument("runner", metavar="RUNNER", choices=list(registry.RUNNERS))
    parser.add_argument("out", type=Path, help="where the runner's report (JSON) is written")
    parser.add_argument("--api", choices=typing.get_args(Api), help="the wire API the runner is measured over")
    args = parser.parse_args(argv)
    report = measure([args.runner], isolate=False, api=args.api).runners[0]
    files.write_text(args.out, report.model_dump_json())
    return 0
