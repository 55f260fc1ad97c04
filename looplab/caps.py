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

import difflib
import inspect
import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

import adapters
from adapters import files
from adapters.base import Adapter, Limits, LooplabError, NativeEnd, Probe, RunResult
from looplab.harness import Endpoint, ModelChoice
from scenarios.cases import load_cases
from scenarios.scripted.probes import AnswersOnCall, NeverStops
from scenarios.scripted.server import ScriptedModelServer
from shared_tools import Guard, Workspace

SAFETY_STOP = 60  # model calls; where the boundary cuts off a cap that never fires (above every default seen)
UNIT_VALUES = (1, 2, 3, 5)
ANSWER_ON = 3  # the off-by-one probe answers on this model call
MAX_SEARCH = 8 * ANSWER_ON  # the largest knob value tried for it
DOCS = Path("docs")
#: Seconds one runner's measurement in its runner environment may take (about a minute is usual).
ENVIRONMENT_TIMEOUT_S = 900.0


class Ending(BaseModel):
    """How the framework ended a probe, in a line."""

    how: str
    exception: str | None = None
    message: str | None = None
    history: str | None = None

    @classmethod
    def of(cls, end: NativeEnd | None, model_calls: int) -> Ending:
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


class KnobReport(BaseModel):
    knob: str
    default: int | None
    default_source: str
    counts: str
    rows: list[Row]
    unset: Row
    smallest_value_to_answer_on_call_3: int | None


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


class CapsDoc(BaseModel):
    generated_by: str = "looplab caps"
    safety_stop: int = SAFETY_STOP
    runners: list[RunnerReport]


def cap_code(adapter: Adapter) -> str:
    """The lines that set the cap, between `cap:begin` and `cap:end` comment markers: in the adapter, or in the
    program it runs in another process (a runner whose loop is a JavaScript program says which: `program_source`)."""
    program = getattr(adapter, "program_source", None)
    source = program() if program else inspect.getsource(inspect.getmodule(adapter))  # type: ignore[arg-type]
    blocks = re.findall(r"^[ \t]*(?:#|//) cap:begin\n(.*?)^[ \t]*(?:#|//) cap:end", source, re.S | re.M)
    return "\n\n".join(inspect.cleandoc("\n" + b) if b.startswith(" ") else b.rstrip() for b in blocks)


class Prober:
    """Runs one runner against the probe policies, each run in a fresh workspace."""

    def __init__(self, servers: dict[str, ScriptedModelServer]) -> None:
        self.servers = servers
        case = load_cases()["vip-compound"]
        self.repo, self.task, self.system_prompt = case.repo_path, case.task, case.system_prompt

    def run(self, adapter: Adapter, policy: str, probe: Probe | None, max_steps: int = SAFETY_STOP) -> RunResult:
        server = self.servers[policy]
        urls = {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url}
        spec = Endpoint(ModelChoice(), urls).spec_for(adapter)
        with Workspace(self.repo) as ws:
            guard = Guard(ws, max_repeats=SAFETY_STOP + 1)
            limits = Limits(max_steps=max_steps, max_seconds=120)
            return adapter.run(self.task, guard, limits, spec, probe, system_prompt=self.system_prompt)

    def row(self, adapter: Adapter, probe: Probe | None, max_steps: int = SAFETY_STOP) -> Row:
        result = self.run(adapter, "never-stops", probe, max_steps)
        return Row(
            value=probe.value if probe else max_steps,
            setting=None if probe else result.native_cap.knob,
            model_calls=result.totals.model_calls,
            tool_calls=result.totals.tool_calls,
            ending=Ending.of(result.native_end, result.totals.model_calls),
            last_call_tools=_last_call_tools(result),
        )

    def smallest_to_finish(self, adapter: Adapter, knob: str) -> int | None:
        for value in range(1, MAX_SEARCH + 1):
            result = self.run(adapter, "answers-on-3", Probe(knob=knob, value=value))
            if result.answer == f"answered on model call {ANSWER_ON}":
                return value
        return None

    def knob(self, adapter: Adapter, knob: str, default: Any) -> KnobReport:
        rows = [self.row(adapter, Probe(knob=knob, value=v)) for v in UNIT_VALUES]
        return KnobReport(
            knob=knob,
            default=default.value,
            default_source=default.source,
            counts=_unit(rows),
            rows=rows,
            unset=self.row(adapter, Probe(knob=knob, value=None)),
            smallest_value_to_answer_on_call_3=self.smallest_to_finish(adapter, knob),
        )

    def runner(self, name: str) -> RunnerReport:
        adapter = adapters.load(name)
        defaults = adapter.knob_defaults()
        return RunnerReport(
            runner=name,
            distribution=adapter.distribution,
            version=adapter.version(),
            mapping=adapter.knobs[0],
            mapping_rows=[self.row(adapter, None, max_steps=n) for n in UNIT_VALUES],
            knobs=[self.knob(adapter, k, defaults[k]) for k in adapter.knobs],
            code=cap_code(adapter),
            code_language="javascript" if hasattr(adapter, "program_source") else "python",
        )


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


def measure(runners: list[str], on_runner: Callable[[str], None] | None = None, isolate: bool | None = None) -> CapsDoc:
    """Probe every runner in `runners`; the probe servers live for the whole measurement.

    `isolate` measures each in its runner environment (`measure_in_environment`); None (the default) does
    so for a runner whose framework cannot share this environment (`RunnerInfo.in_all` false) and is not
    installed here; False measures every one here.
    """
    with ExitStack() as stack:
        servers = {
            "never-stops": stack.enter_context(ScriptedModelServer(NeverStops())),
            "answers-on-3": stack.enter_context(ScriptedModelServer(AnswersOnCall(ANSWER_ON))),
        }
        prober = Prober(servers)
        reports = []
        for name in runners:
            if on_runner:
                on_runner(name)
            info = adapters.RUNNERS[name]
            elsewhere = isolate if isolate is not None else info.elsewhere()
            reports.append(measure_in_environment(name) if elsewhere else prober.runner(name))
    return CapsDoc(runners=reports)


def measure_in_environment(runner: str) -> RunnerReport:
    """`runner` measured by `python -m looplab.caps RUNNER` in its runner environment (created if missing)."""
    from adapters.child import run_bounded
    from looplab.environments import ensure, source_root, spec_for

    env = ensure(spec_for(runner))
    with tempfile.TemporaryDirectory(prefix="looplab-caps-") as folder:
        out = Path(folder) / "report.json"
        command = [str(env.python), "-m", "looplab.caps", runner, str(out)]
        code, stderr = run_bounded(command, env.child_env(), source_root(), ENVIRONMENT_TIMEOUT_S)
        if code != 0 or not out.is_file():
            how = "timed out" if code is None else f"exited {code}"
            last = stderr[-1] if stderr else "no output"
            raise LooplabError(f"measuring {runner} in its environment {env.path} {how}: {last}")
        return RunnerReport.model_validate_json(files.read_text(out))


def to_json(doc: CapsDoc) -> str:
    return json.dumps(doc.model_dump(), indent=2) + "\n"


# --- the Markdown, generated from the JSON -------------------------------------------------------------

PROSE = re.compile(r"<!-- prose:(?P<key>[\w-]+) -->\n(?P<text>.*?)<!-- /prose -->", re.S)
DEFAULT_PROSE = "(Notes on this runner go here; `looplab caps` keeps what stands between these markers.)\n"


def _prose(existing: str) -> dict[str, str]:
    return {m["key"]: m["text"] for m in PROSE.finditer(existing)}


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ending(e: Ending) -> str:
    if e.exception:
        return f"raises `{e.exception}`: {_cell(e.message)}"
    return e.how + (f": “{_cell(e.message)}”" if e.message else "")


def history_of(e: Ending) -> str:
    """Where the partial history is when the framework stopped as `e` says."""
    if e.history:
        return f"the exception carries it: `{e.history}`"
    if e.how.startswith("returns"):
        return "in what the framework returns (its final state or messages)"
    if e.exception:
        return "not in the exception; looplab's trace has it"
    return "the run did not stop"


ROW_HEADER = "model calls | tool calls | tools of the last call | how the framework ended |"
ROW_RULE = "|---|---|---|---|---|"


def _row(row: Row) -> str:
    last = row.last_call_tools or "not measured"
    return f"| {row.value} | {row.model_calls} | {row.tool_calls} | {last} | {_ending(row.ending)} |"


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


def version_label(r: RunnerReport) -> str:
    """`distribution version`, as the runner's section heading names it."""
    return r.version if r.version.startswith(r.distribution) else f"{r.distribution} {r.version}"


def to_markdown(doc: CapsDoc, existing: str = "") -> str:
    """The doc a person reads: a summary table, then a section per runner; prose blocks are kept."""
    prose = _prose(existing)

    def block(key: str) -> Iterator[str]:
        yield f"<!-- prose:{key} -->"
        yield (prose.get(key) or DEFAULT_PROSE).rstrip("\n")
        yield "<!-- /prose -->"

    out = ["# Iteration caps, measured", "", *block("intro"), ""]
    out += [
        "| runner | version | native knob for `max_steps=N` | default | counts | at the cap | "
        "unset, a runaway makes | smallest value to answer on call 3 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in doc.runners:
        k = r.knobs[0]
        version = version_label(r)
        default = "none" if k.default is None else k.default
        out.append(
            f"| `{r.runner}` | {version} | `{_cell(r.mapping)}` | {default} | {k.counts} | "
            f"{_ending(k.rows[0].ending)} | {k.unset.model_calls} model calls | "
            f"{k.smallest_value_to_answer_on_call_3} |"
        )
    out += [
        "",
        f"Safety stop for a cap that never fires: {doc.safety_stop} model calls (looplab's, not the framework's).",
        "",
    ]
    for r in doc.runners:
        out += [f"## `{r.runner}` ({version_label(r)})", "", *block(r.runner), ""]
        out += [f"looplab maps `max_steps=N` onto `{_cell(r.mapping)}`; measured:", ""]
        out += [f"| max_steps | {ROW_HEADER}", ROW_RULE, *map(_row, r.mapping_rows)]
        for k in r.knobs:
            default = "none (no limit)" if k.default is None else f"{k.default}"
            out += ["", f"### `{_cell(k.knob)}`", ""]
            out += [f"- default: {default}, read from `{k.default_source}`"]
            out += [f"- counts: {k.counts}"]
            out += [f"- unset, a runaway made {k.unset.model_calls} model calls: {_ending(k.unset.ending)}"]
            smallest = k.smallest_value_to_answer_on_call_3
            out += [f"- smallest value that lets a run answering on model call 3 finish: {smallest}"]
            native = history_of(k.rows[0].ending)
            out += [f"- partial history at the cap: {native}"]
            out += [f"- the tools the last model call asked for: {_last_tools(k.rows)}", ""]
            out += [f"| value | {ROW_HEADER}", ROW_RULE, *map(_row, k.rows)]
        out += ["", "The code that sets the cap:", "", f"```{r.code_language}", r.code, "```", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def diff(committed: str, fresh: str, name: str) -> str:
    """A unified diff from the committed file to what the installed libraries measure now."""
    return "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            fresh.splitlines(keepends=True),
            f"{name} (committed)",
            f"{name} (measured)",
        )
    )


def drift(fresh: CapsDoc, committed_json: str) -> str:
    """The diff between the committed measurements and fresh ones, for the runners measured ('' if none)."""
    committed = CapsDoc.model_validate_json(committed_json)
    measured = {r.runner for r in fresh.runners}
    committed.runners = [r for r in committed.runners if r.runner in measured]
    return diff(to_json(committed), to_json(fresh), "iteration-caps.json")


if __name__ == "__main__":  # `python -m looplab.caps RUNNER OUT`: one runner measured here, its report to OUT
    _, _runner, _out = sys.argv
    files.write_text(_out, measure([_runner], isolate=False).runners[0].model_dump_json())
