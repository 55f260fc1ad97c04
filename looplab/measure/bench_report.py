"""The bench's tables: in the terminal (`print_tables`), as Markdown for the docs (`markdown`), and the lines under
them (`footer`)."""

from __future__ import annotations

from rich.console import Console

from looplab.measure.bench_merge import bench_line
from looplab.measure.bench_probe import HELP_REPEAT
from looplab.records.measurements import PROXY_TURN_TARGET_MS, TAX_TARGET, TURN_TARGET_MS, BenchResult, HarnessTax

__all__ = ["markdown", "print_tables"]

#: What the harness-tax table says for a runner whose adapter has no bare loop (`external`: a team's command).
NO_BARE_LOOP = "no bare loop"
#: What a runner's looplab run does that its bare loop does not, and what it costs: said under the tables.
TAX_NOTES: dict[str, str] = {
    "llamaindex": "llamaindex: its looplab run asks every streamed Chat Completions reply for usage "
    "(`stream_options.include_usage`; without it the reply carries no token counts, so the record and a cost "
    "budget would have only estimates), which its bare loop does not; LlamaIndex handles that extra chunk as it "
    "does every other, about 0.35 ms a reply of its added time",
}


def _x(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio:.2f}×"


def runner_rows(result: BenchResult) -> tuple[list[str], list[list[str]]]:
    """The per-runner table as header and rows of text (shared by the terminal and Markdown)."""
    header = [
        "runner",
        "version",
        "turns",
        "overhead/turn median ms",
        "p95 ms",
        "turn 1 median ms",
        "import s",
        "peak RSS MB",
        "median ×hand",
        "p95 ×hand",
        "import ×hand",
        "RSS ×hand",
    ]
    rows = [
        [
            r.runner,
            r.version,
            f"{r.turns_median:g}",
            f"{r.overhead_ms_median:.2f}",
            f"{r.overhead_ms_p95:.2f}",
            f"{r.first_turn_ms_median:.2f}",
            f"{r.import_s:.3f}",
            f"{r.peak_rss_mb:.0f}",
            _x(r.ratio_overhead_median),
            _x(r.ratio_overhead_p95),
            _x(r.ratio_import),
            _x(r.ratio_peak_rss),
        ]
        for r in result.runners
    ]
    return header, rows


def tax_rows(result: BenchResult) -> tuple[list[str], list[list[str]]]:
    """The harness-tax table as header and rows of text."""
    header = [
        "runner",
        "api",
        "turns bare/looplab",
        "excl. tools ms, bare",
        "excl. tools ms, looplab",
        "added ms/turn",
        "95% interval, ms",
        "target ms/turn",
        "harness tax (excl. tools)",
        "95% interval",
        "tax target",
        "verdict",
        "whole run ms, bare",
        "whole run ms, looplab",
        "whole run ratio",
    ]
    rows = [
        [
            t.runner,
            t.api or "—",
            f"{t.turns_bare:g}/{t.turns_looplab:g}",
            f"{t.bare_outside_tools_ms:.1f}",
            f"{t.looplab_outside_tools_ms:.1f}",
            f"{t.added_ms_per_turn:+.2f}",
            added_interval_text(t),
            turn_target_text(t),
            f"{t.tax_outside_tools:+.1%}",
            tax_interval_text(t),
            tax_target_text(t),
            t.verdict,
            f"{t.bare_wall_ms:.1f}",
            f"{t.looplab_wall_ms:.1f}",
            f"{t.tax_wall:+.1%}",
        ]
        for t in result.harness_tax
    ]
    rows += [[runner, NO_BARE_LOOP, *("—" for _ in header[2:])] for runner in result.no_bare_loop]
    return header, rows


def tax_interval_text(tax: HarnessTax) -> str:
    """`-1.2 % .. +3.4 %`, or a dash without an interval."""
    if tax.tax_interval is None:
        return "—"
    low, high = tax.tax_interval
    return f"{low:+.1%} .. {high:+.1%}"


def added_interval_text(tax: HarnessTax) -> str:
    """`+0.12 .. +0.19` (ms a turn), or a dash without an interval."""
    if tax.added_ms_interval is None:
        return "—"
    low, high = tax.added_ms_interval
    return f"{low:+.2f} .. {high:+.2f}"


def turn_target_text(tax: HarnessTax) -> str:
    """`0.25`, or `0.5 (proxy)` for a runner whose requests pass the model proxy."""
    return f"{tax.turn_target_ms:g}" + (" (proxy)" if tax.via_proxy else "")


def tax_target_text(tax: HarnessTax) -> str:
    """`5%`, or `not targeted` for the framework-less loop."""
    return f"{TAX_TARGET:.0%}" if tax.ratio_targeted else "not targeted"


def footer(result: BenchResult) -> list[str]:
    """The lines under the tables: what a runner's tax includes, the stand-in model's latency, --help time, what the
    numbers were measured on."""
    s = result.server
    return [
        *(TAX_NOTES[t.runner] for t in result.harness_tax if t.runner in TAX_NOTES),
        f"scripted model server: median {s.median_ms:.2f} ms, p95 {s.p95_ms:.2f} ms per request "
        f"({s.requests} first-turn Chat Completions requests, http.client, loopback); "
        f"median model latency per turn as recorded during the runs: {result.recorded_model_ms_median:.2f} ms",
        (
            f"through a run's recording model proxy: median {s.proxy_median_ms:.2f} ms, "
            f"{s.proxy_median_ms - s.median_ms:+.2f} ms per request over the server alone"
            if s.proxy_median_ms is not None
            else "through a run's recording model proxy: not measured"
        ),
        f"scripted model server, a {s.long_request_chars:,}-character request: "
        f"median {s.long_request_ms_median:.1f} ms ({s.long_requests} first-turn Responses requests whose input "
        "is one string: a run of word characters, then the task)",
        f"looplab --help: {result.help_s_median:.3f} s (median of {HELP_REPEAT} fresh processes)",
        *([bench_line(result.merge)] if result.merge else []),
        f"case {result.case}, {result.repeat} timed runs per runner after one warm-up, "
        f"import time median of {result.import_repeat} fresh interpreters; "
        f"{result.date}, Python {result.python}, {result.platform}, {result.cores} cores",
    ]


def print_tables(result: BenchResult, *, out: Console | None = None) -> None:
    """`looplab bench`: overhead per model turn, the harness tax, and what they were measured on."""
    from rich.text import Text

    from looplab.views.terminal import Col, Value, console, print_table, wrap_text

    out = out or console()
    rows: list[list[Value]] = [
        [
            r.runner,
            r.version,
            f"{r.turns_median:g}",
            f"{r.overhead_ms_median:.2f} {_x(r.ratio_overhead_median)}",
            f"{r.overhead_ms_p95:.1f} {_x(r.ratio_overhead_p95)}",
            f"{r.import_s:.2f} {_x(r.ratio_import)}",
            f"{r.peak_rss_mb:.0f} {_x(r.ratio_peak_rss)}",
        ]
        for r in result.runners
    ]
    cols = (
        Col("runner"),
        Col("version", fold="under"),
        Col("turns", right=True),
        Col("median ms", right=True),
        Col("p95 ms", right=True),
        Col("import s", right=True),
        Col("peak MB", right=True),
    )
    print_table(
        "bench: overhead per model turn, outside the model server and the tools",
        cols,
        rows,
        ["(×) ratio to handrolled, measured in the same run; the p95 is the first turn's setup (clients, agent)"],
        out=out,
    )
    tax: list[list[Value]] = [
        [
            t.runner,
            f"{t.turns_bare:g}/{t.turns_looplab:g}",
            f"{t.bare_outside_tools_ms:.1f} → {t.looplab_outside_tools_ms:.1f}",
            f"{t.added_ms_per_turn:+.2f}",
            added_interval_text(t),
            turn_target_text(t),
            f"{t.tax_outside_tools:+.1%}",
            tax_interval_text(t),
            tax_target_text(t),
            t.verdict,
            f"{t.bare_wall_ms:.0f} → {t.looplab_wall_ms:.0f}",
            f"{t.tax_wall:+.1%}",
        ]
        for t in result.harness_tax
    ]
    tax_cols = (
        Col("runner"),
        Col("turns", right=True),
        Col("excl. tools ms", short="excl. ms", means="excl. tools ms", right=True),
        Col("+ms/turn", right=True),
        Col("95% interval, ms", short="95% ms", means="95% interval of +ms/turn", right=True),
        Col("target ms/turn", short="≤ms", means="target ms/turn", fold="under"),
        Col("tax", right=True),
        Col("95% interval", short="95%", means="95% interval of the tax (bootstrap over the pairs)", right=True),
        Col("tax target", short="tax ≤", means="tax target", fold="under"),
        Col("verdict", prose=True),
        Col("whole run ms", short="run ms", means="whole run ms", right=True),
        Col("ratio", right=True),
    )
    print_table(
        "bench: harness tax, the same loop written bare → through looplab (medians per run)",
        tax_cols,
        tax,
        [
            "excl. tools: each run minus its tool calls (the model server's time stays in both); +ms/turn: what "
            f"looplab adds a model turn, at most {TURN_TARGET_MS:g} ms in process, {PROXY_TURN_TARGET_MS:g} ms through "
            f"the model proxy; the tax is targeted under {TAX_TARGET:.0%} where the bare loop is a framework's; the "
            "whole run includes pytest in run_tests, whose 200-400 ms varies more than the harness costs; a node "
            "runner's bare loop is its program pointed at the model directly, with plain tools",
            *([f"{NO_BARE_LOOP}: {', '.join(result.no_bare_loop)}"] if result.no_bare_loop else []),
        ],
        out=out,
    )
    for line in footer(result):
        for wrapped in wrap_text(Text(line, style="dim"), out.width, out):
            out.print(wrapped)


def markdown(result: BenchResult) -> str:
    """The tables and footer as Markdown, for the README."""

    def table(header: list[str], rows: list[list[str]]) -> str:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)

    return "\n\n".join(
        [table(*runner_rows(result)), table(*tax_rows(result)), "\n".join(f"- {line}" for line in footer(result))]
    )
