"""`looplab scorecard`, `report` and `otel`: what measurements and results documents show.

The scorecard (each framework's behaviour, cell by cell), the side-by-side HTML report, and a document's runs
as OpenTelemetry traces.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from looplab.cli._inputs import case_sources, check_runners, ready_to_write
from looplab.cli._options import cases_option, write_otel

if TYPE_CHECKING:
    from rich.console import Console


def _add_scorecard(sub: argparse._SubParsersAction) -> None:
    card = sub.add_parser("scorecard", help="how each framework behaves, cell by cell, from measurements")
    card.add_argument("--runner", action="append", metavar="NAME", help="only these runners (repeatable)")
    card.add_argument(
        "--results",
        metavar="PATH",
        help="read the runs from this results document (default: the newest under looplab-runs/ that holds the "
        "scorecard's cases, else run them now)",
    )
    card.add_argument(
        "--rerun", action="store_true", help="run the scorecard's cases now, even when a results document holds them"
    )
    card.add_argument("--caps", metavar="PATH", default="docs/iteration-caps.json", help="the caps measurement")
    card.add_argument("--bench", metavar="PATH", help="a `looplab bench --json` file (per-turn overhead, import time)")
    card.add_argument("--markdown", metavar="PATH", help="also write the scorecard as Markdown")
    card.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="J",
        help="worker processes when running the cases (default: the cores)",
    )
    cases_option(card)


def _add_otel(sub: argparse._SubParsersAction) -> None:
    otel = sub.add_parser("otel", help="a results document's runs as OpenTelemetry traces (OTLP/JSON)")
    otel.add_argument("results", metavar="RESULTS.json", help="written by `looplab eval`, `run` or `merge`")
    otel.add_argument("output", metavar="OUT.json", help="the OTLP/JSON file to write")


def _add_report(sub: argparse._SubParsersAction) -> None:
    rep = sub.add_parser("report", help="the side-by-side HTML report from a results JSON (eval, run or merge output)")
    rep.add_argument(
        "results",
        metavar="RESULTS.json",
        help="written by `looplab eval --json`, `run` (results.json in its --out) or `merge`",
    )
    rep.add_argument("-o", "--output", metavar="PATH", help="the HTML file (default: RESULTS with .html)")


def _scorecard(args: argparse.Namespace) -> int:
    from pathlib import Path

    from looplab.adapters.contract import files
    from looplab.adapters.contract.errors import LooplabError
    from looplab.adapters.registry import RUNNERS
    from looplab.records import results
    from looplab.run import matrix
    from looplab.views import scorecard, scorecard_text, terminal

    ready_to_write("--markdown", args.markdown)
    known = [n for n, info in RUNNERS.items() if info.by_default]
    check_runners(args.runner)
    caps_path = Path(args.caps)
    caps = scorecard.load_caps(caps_path)
    sources = {"caps": str(caps_path) if caps else f"{caps_path} (missing: not measured)"}
    out = terminal.console()
    from_file = args.results
    if not from_file and not args.rerun:
        from_file = _newest_holding(args, out)
    if from_file:
        document = results.read(Path(from_file))
        sources["eval"] = str(from_file)
        runners = args.runner or [n for n in known if n in document.runners]
    else:
        from looplab.run.harness import ModelChoice
        from looplab.scenarios.cases import load_cases

        runners = args.runner or known
        here = [r for r in runners if RUNNERS[r].installed()]  # the others' eval cells stay "not measured"
        jobs = matrix.default_jobs() if args.jobs is None else args.jobs
        sources_named = case_sources(args)
        own = list(load_cases(sources_named).values()) if sources_named else []
        own = ModelChoice().check_drivable(own)
        if clash := [c.id for c in own if c.id in scorecard.CASES]:
            raise LooplabError(f"case {clash[0]!r}: the scorecard runs looplab's own case of that id; rename yours")
        wanted = [*scorecard.CASES, *own]
        # Said before it starts: the run takes minutes, and the reader may have a document to give instead.
        runs = len(wanted) * len(here)
        out.print(
            f"running {len(wanted)} cases × {len(here)} runners against the scripted model: {runs} runs, "
            f"{_roughly(runs, jobs)} on {jobs} worker{'s' * (jobs != 1)} (--results PATH reads a document instead)",
            style="dim",
        )
        with out.status(f"running {len(wanted)} cases through {len(here)} runners"):
            document = matrix.run_scripted(here, wanted, jobs=jobs)
        ran = [*scorecard.CASES, *(c.id for c in own)]
        sources["eval"] = f"{', '.join(ran)} run now against the scripted model"
    bench = scorecard.load_bench(Path(args.bench)) if args.bench else None
    sources["bench"] = args.bench or "none given (--bench PATH from `looplab bench --json`): not measured"
    card = scorecard.build(runners, scorecard.observed(document), caps, bench, sources=sources)
    scorecard_text.print_terminal(card)
    if args.markdown:
        files.write_text(args.markdown, scorecard_text.markdown(card))
        terminal.console().print(f"Markdown: {args.markdown}")
    return 0


#: About how long one run of a case against the scripted model takes a worker (measured: a whole eval on 2 cores).
_SECONDS_A_RUN = 2.5


def _roughly(runs: int, jobs: int) -> str:
    """How long `runs` runs take `jobs` workers, roughly, as people say it."""
    seconds = runs * _SECONDS_A_RUN / max(jobs, 1)
    return f"roughly {max(round(seconds), 1)} s" if seconds < 90 else f"roughly {round(seconds / 60)} min"


def _newest_holding(args: argparse.Namespace, out: Console) -> str | None:
    """The newest kept results document when it holds every case (and named runner) the scorecard reads, saying
    so in one line; else None, with one line saying why the cases are run instead."""
    from looplab.adapters.contract.errors import LooplabError
    from looplab.records import results
    from looplab.run.harness import RUNS_DIR, SCRIPTED, newest_results
    from looplab.scenarios.cases import load_cases
    from looplab.views import scorecard

    newest = newest_results()
    if newest is None:
        out.print(f"no results document under {RUNS_DIR}/: the scorecard's cases run now", style="dim")
        return None
    try:
        document = results.read(newest)
    except LooplabError as exc:  # one of another looplab, say: run instead of failing
        out.print(f"{newest} (the newest results document) cannot be read ({exc}): the cases run now", style="dim")
        return None
    named = case_sources(args)
    own = list(load_cases(named)) if named else []
    # The scorecard's cells are the scripted model's behaviour: a real model's runs of a case do not stand in.
    held = {c.case for c in document.cells if c.model == SCRIPTED}
    lacking = [c for c in [*scorecard.CASES, *own] if c not in held]
    lacking += [r for r in args.runner or [] if r not in document.runners]
    if lacking:
        out.print(
            f"{newest}, the newest results document, lacks {', '.join(lacking)} (against the scripted model): "
            "the scorecard's cases run now",
            style="dim",
        )
        return None
    # One line at 80 columns: the document read, and how to run afresh instead.
    out.print(f"newest results: {newest} (--rerun runs anew)", style="dim")
    return str(newest)


def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from looplab.views import headline, report, terminal

    source = Path(args.results)
    doc = report.read_document(source)  # a file that is not one, or holds no runs: one line naming it
    out_path = Path(args.output) if args.output else source.with_suffix(".html")
    out = report.write_html(doc, out_path, source=str(source))  # the target checked before the charts are drawn
    headline.print_headline(doc)
    terminal.console().print(f"HTML: {out}")
    return 0


def _otel(args: argparse.Namespace) -> int:
    """`looplab otel RESULTS.json OUT.json`: a results document's runs as traces.

    Runs recorded without a start time are placed to end when the document was last written.
    """
    from datetime import UTC, datetime
    from pathlib import Path

    from looplab.views import otel, report

    otel.require()
    source = Path(args.results)
    doc = report.read_document(source)  # a file that is not one, or holds no runs: one line naming it
    write_otel(args.output, doc, anchor=datetime.fromtimestamp(source.stat().st_mtime, UTC))
    return 0


#: How each command's parser is added to `looplab`'s subcommands.
PARSERS: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "scorecard": _add_scorecard,
    "otel": _add_otel,
    "report": _add_report,
}
#: What runs each command; it returns the exit code.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "scorecard": _scorecard,
    "report": _report,
    "otel": _otel,
}
