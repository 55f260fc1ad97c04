"""`looplab run`, `eval` (and `eval --estimate`) and `merge`: running cases through runners, and joining the results.

Also the exit-code rule of `run` and `eval`, the progress line's first words, and the status a terminal shows
while the modules a run needs are loaded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from looplab.cli._inputs import prepare_environments, ready_to_write, runners_taking, select
from looplab.cli._options import (
    EVERY_RUNNER,
    cases_option,
    isolation_options,
    model_options,
    otel_option,
    otel_ready,
    positive_int,
    sandbox_option,
    sandbox_ready,
    shard,
    width,
    write_otel,
)

if TYPE_CHECKING:
    from looplab.adapters.contract.errors import Interrupted
    from looplab.records.outcome import RunOutcome
    from looplab.run.options import RunOptions

#: What `looplab run` runs when no case is named: the investigation, bad tool calls, and a budget that runs out,
#: so its closing screen can show where the runners differ (stops, recovery, the cap) as well as where they agree.
FIRST_CASES = ("vip-compound", "sloppy-calls", "tight-budget")
#: The same with a provider's model: sloppy-calls' bad calls are how the scripted model plays it, so a real model
#: would only run the investigation again, at its price.
FIRST_CASES_REAL_MODEL = ("vip-compound", "tight-budget")
#: The most times `--repeat-until` repeats a cell when `--repeat` does not say.
REPEAT_UNTIL_MOST = 20


def exit_code(runs: Iterable[Any]) -> int:
    """The exit code of `run` and `eval` from the runs asked for (outcomes or cells, each with `passed`).

    0 when every one ran and did what its case expects (its checks passed); 1 when one errored (no result) or
    failed a check. Bad input is 2 before anything runs (`main`); SIGINT and SIGTERM end the command with 130
    and 143 (`looplab.run.interrupt`). A runner that cannot take the model is not among the runs
    (`looplab.cli._inputs.runners_taking`).
    """
    return 0 if all(run.passed for run in runs) else 1


def starting(total: int, runners: Sequence[str], jobs: int, concurrency: int | None, isolated: Any) -> str:
    """What a matrix's first seconds go to, for its progress line until the first run ends (the split of
    `looplab.run.matrix.run_matrix`: runner environments, worker processes, or this process)."""
    count = len(runners)
    what = f"{total} run{'s' * (total != 1)} of {count} runner{'s' * (count != 1)}"
    lanes = min(jobs, total, jobs if concurrency is None else concurrency)
    if isolated is not None:
        return f"starting {what} in their runner environments ({min(jobs, count)} at a time) ..."
    if lanes > 1:
        return f"starting {lanes} worker processes for {what} (each loads the runners' frameworks) ..."
    return f"starting {what} in this process (loading the runners' frameworks) ..."


@contextmanager
def loading(command: str) -> Iterator[None]:
    """On a terminal, one status line on stderr while `command` imports what it runs with; erased after.

    Those imports (the harness, the results document's models, the report) take about a second before the
    command can print anything. The line is written without rich, which is itself among them; it is cut to the
    terminal's width so that erasing it clears it all. Not on a terminal (a log, a pipe): nothing is written.
    """
    stream = sys.stderr
    shown = stream.isatty() and os.environ.get("TERM") != "dumb"
    if shown:
        width = shutil.get_terminal_size().columns  # COLUMNS, else stdout's terminal, else 80
        line = f"looplab {command}: loading the harness and the report ..."[: max(width - 1, 0)]
        dim, plain = ("", "") if os.environ.get("NO_COLOR") else ("\x1b[2m", "\x1b[0m")
        stream.write(f"{dim}{line}{plain}")
        stream.flush()
    try:
        yield
    finally:
        if shown:
            stream.write("\r\x1b[2K")  # back to the line's start and clear it: what follows is written there
            stream.flush()


def _add_run(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run cases through runners and print them side by side")
    run.add_argument("--runner", action="append", metavar="R", help=f"runner to use (repeatable; {EVERY_RUNNER})")
    cases_option(run)
    run.add_argument(
        "--case",
        action="append",
        metavar="C",
        help=f"case id (repeatable; default: {', '.join(FIRST_CASES)} (without sloppy-calls for a provider's "
        "model), or every case of --cases or looplab.toml)",
    )
    model_options(run)
    run.add_argument("--max-steps", type=positive_int, metavar="N", help="override the case's max_steps (model calls)")
    run.add_argument(
        "--max-tokens",
        type=positive_int,
        metavar="N",
        help="a token budget for each run (input plus output over every model call), in place of the case's",
    )
    run.add_argument("--json", metavar="PATH", help="also write the results document (results.json in --out) to PATH")
    otel_option(run)
    run.add_argument(
        "--out", metavar="DIR", help="folder for results.json and traces.jsonl (default: looplab-runs/<time>)"
    )
    run.add_argument("--steps", action="store_true", help="also print each run's steps and the per-case table")
    run.add_argument("--quiet", action="store_true", help="print only where the runners differ and where the files are")
    run.add_argument(
        "--native-caps", action="store_true", help="also print each runner's own cap and the value it ran with"
    )
    isolation_options(run)
    sandbox_option(run)


def _add_eval(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser("eval", help="the runner x case matrix: checks, completion rates, calls and cost")
    ev.add_argument("--runner", action="append", metavar="R", help=f"runner (repeatable; {EVERY_RUNNER})")
    cases_option(ev)
    ev.add_argument(
        "--case", action="append", metavar="C", help="case id (repeatable; default: every case of the suite)"
    )
    ev.add_argument(
        "--repeat",
        type=positive_int,
        metavar="K",
        help=f"run every cell K times (default 1; with --repeat-until, at most K times, default {REPEAT_UNTIL_MOST})",
    )
    ev.add_argument(
        "--repeat-until",
        type=width,
        metavar="WIDTH",
        help="repeat each cell until the 95%% interval of its pass rate is at most WIDTH wide (0.3 or 30%%), in "
        "rounds, so a real model is called no more than the verdict needs",
    )
    model_options(ev)
    ev.add_argument(
        "--json", metavar="PATH", help="write the results document (every run's record, the cells, the summary)"
    )
    ev.add_argument(
        "--estimate",
        action="store_true",
        help="with --model PROVIDER:NAME: run the matrix against the scripted model instead and print the tokens "
        "and what they would cost at that model's price, without calling it",
    )
    ev.add_argument("--html", metavar="PATH", help="write the side-by-side HTML report (one self-contained file)")
    otel_option(ev)
    ev.add_argument(
        "--jobs", type=positive_int, metavar="N", help="worker processes for the matrix (default: the cores)"
    )
    ev.add_argument(
        "--concurrency",
        type=positive_int,
        metavar="N",
        help="cells in flight at once, on threads in the workers (default: one per job); "
        "runs against a real model mostly wait on HTTP, so N can be far above the cores",
    )
    isolation_options(ev)
    ev.add_argument(
        "--shard",
        type=shard,
        metavar="I/N",
        help="run only slice I of N of the matrix (from hashes of the cells' identities: the same slice on "
        "every machine, each case's cells dealt over the shards); `looplab merge` joins the N documents",
    )
    ev.add_argument(
        "--resume",
        metavar="PATH",
        help="skip the cells PATH already holds with a result, run the rest and write old and new cells "
        "together (to --json, else back to PATH; a PATH that does not exist yet starts it)",
    )
    sandbox_option(ev)


def _add_merge(sub: argparse._SubParsersAction) -> None:
    merge = sub.add_parser("merge", help="merge results documents (shards, runs from other machines) into one")
    merge.add_argument(
        "results",
        nargs="+",
        metavar="RESULTS.json",
        help="written by `looplab eval --json`, `run` (results.json in its --out) or `merge`",
    )
    merge.add_argument("-o", "--output", metavar="PATH", help="the merged results document")
    merge.add_argument("--html", metavar="PATH", help="also write the merged report")


def _run(args: argparse.Namespace) -> int:
    with loading("run"):
        from pathlib import Path

        from looplab.records import results
        from looplab.records.document import Document
        from looplab.run import harness, interrupt, isolation, matrix, schedule
        from looplab.views import first_screen, render, terminal

    runners, cases = select(args, list(FIRST_CASES if args.model == harness.SCRIPTED else FIRST_CASES_REAL_MODEL))
    sandbox_ready(args.sandbox)
    otel_ready(args.otel)
    ready_to_write("--json", args.json)
    choice = harness.ModelChoice(
        args.model, args.base_url, args.api, args.price, args.retries, args.rpm, stream=_stream(args)
    )
    cases = choice.check_cases(cases)  # a case the scripted model cannot play is skipped, with one line
    choice.check_key()
    runners = runners_taking(choice, runners)
    out_dir = Path(args.out) if args.out else harness.default_out_dir()
    for name in ("results.json", "traces.jsonl"):
        ready_to_write("--out", str(out_dir / name))
    runners, isolated = prepare_environments(args, runners)  # last: the inputs above are checked before anything
    outcomes: list[RunOutcome] = []
    total = sum(matrix.applies(runner, case) for case in cases for runner in runners)

    def document(incomplete: str | None = None) -> Document:
        return _document(args, outcomes, runners, cases, incomplete)

    def save(stop: Interrupted | None = None) -> str:
        doc = document(stop.note(len(outcomes), total) if stop else None)
        results_path, traces_path = harness.write_outputs(doc, out_dir)
        if args.json:
            results.write(doc, Path(args.json))
        if args.otel:
            write_otel(args.otel, doc, announce=stop is None)
        return f"{results_path}, {traces_path}" + "".join(f", {p}" for p in (args.json, args.otel) if p)

    first_words = starting(total, runners, 1, 1, isolated)
    with interrupt.keep_finished(save):
        with harness.endpoint(choice) as where, render.matrix_progress(total, first_words) as advance:

            def done(_: int, outcome: RunOutcome) -> None:
                if args.steps:
                    render.run_detail(outcome)
                outcomes.append(outcome)
                advance(outcome)

            plan = [
                (runner, case.for_repeat(1)) for case in cases for runner in runners if matrix.applies(runner, case)
            ]
            scheduler = schedule.Here() if isolated is None else isolation.Isolated(isolated)
            scheduler.run(plan, where, _run_options(args), done)
    if args.steps:
        render.summary_table(outcomes)
    save()
    if args.json:
        terminal.console().print(f"JSON: {args.json}")
    first_screen.print_screen(
        document(), out_dir / "results.json", per_runner=not args.quiet, native_caps=args.native_caps
    )
    return exit_code(outcomes)


def _eval(args: argparse.Namespace) -> int:
    with loading("eval"):
        from pathlib import Path

        from looplab.adapters.contract.errors import LooplabError
        from looplab.records import identity, merge, results, summary
        from looplab.records.document import Document
        from looplab.run import harness, interrupt, matrix, rounds
        from looplab.views import eval_tables, first_screen, headline, render, report, terminal

    sandbox_ready(args.sandbox)
    runners, cases = select(args, None)
    jobs = matrix.default_jobs() if args.jobs is None else args.jobs  # both counts checked by the parser
    repeat = args.repeat or (REPEAT_UNTIL_MOST if args.repeat_until is not None else 1)
    if args.repeat_until is not None and (args.resume or args.shard):
        # Whether a cell needs another round is read off all its runs so far, which a shard or an older file
        # holds only some of.
        raise LooplabError("--repeat-until decides each round from every run of a cell: not with --resume or --shard")
    if args.estimate:
        runners, isolated = prepare_environments(args, runners)
        return _estimate(args, runners, cases, jobs, isolated)
    choice = harness.ModelChoice(
        args.model, args.base_url, args.api, args.price, args.retries, args.rpm, stream=_stream(args)
    )
    cases = choice.check_cases(cases)  # a case the scripted model cannot play is skipped, with one line
    choice.check_key()
    runners = runners_taking(choice, runners)
    resume_path = Path(args.resume) if args.resume else None
    # Read before anything runs: a file that cannot be resumed is refused now, not after the matrix.
    earlier = results.read_for_resume(resume_path, cases) if resume_path else None
    json_path = Path(args.json) if args.json else resume_path  # --resume alone writes back to its file
    otel_ready(args.otel)
    # Now, not after the whole matrix ran: a target that is not a regular file, a folder that cannot be made.
    ready_to_write("--json" if args.json else "--resume", str(json_path) if json_path else None)
    ready_to_write("--html", args.html)
    runners, isolated = prepare_environments(args, runners)  # last: the inputs above are checked before anything
    done_before = merge.finished(earlier) if earlier else set()

    def wanted(runner: str, case: str, repeat: int) -> bool:
        key = identity.CellKey(runner, case, repeat, args.model, args.api, _stream(args))
        in_shard = args.shard is None or identity.shard_of(key, args.shard[1], runners) == args.shard[0]
        return in_shard and key not in done_before

    width = args.repeat_until
    first = repeat if width is None else rounds.first_round(width, repeat)
    planned = matrix.plan(runners, cases, first, wanted)
    total = len(planned)
    finished: list[RunOutcome] = []

    def document(outcomes: list[RunOutcome], incomplete: str | None = None) -> Document:
        doc = _document(args, outcomes, runners, cases, incomplete)
        if earlier is None:
            return doc
        # The cells run again (they had no result) replace their old records; the rest are kept as they were.
        rerun = {c.key for c in doc.cells}
        merged = merge.merge([(str(resume_path), merge.without(earlier, rerun)), ("this run", doc)])
        merged.incomplete = incomplete  # the old file's interruption is what this run finished
        return merged

    def save(stop: Interrupted) -> str | None:
        if json_path is None and not args.otel:
            return None
        doc = document(finished, stop.note(len(finished), total))
        if json_path is not None:
            results.write(doc, json_path)
        if args.otel:
            write_otel(args.otel, doc, announce=False)
        return ", ".join(str(p) for p in (json_path, args.otel) if p)

    first_words = starting(total, runners, jobs, args.concurrency, isolated)
    with interrupt.keep_finished(save):
        with harness.endpoint(choice) as where:
            selected, most = wanted, first
            while True:  # one matrix; with --repeat-until, one a round until every cell is narrow enough
                with render.matrix_progress(total, first_words) as advance:

                    def on_done(outcome: RunOutcome) -> None:
                        finished.append(outcome)
                        advance(outcome)

                    matrix.run_matrix(
                        runners,
                        cases,
                        where,
                        repeat=most,
                        on_done=on_done,
                        jobs=jobs,
                        concurrency=args.concurrency,
                        select=selected,
                        isolated=isolated,
                        options=_run_options(args),
                    )
                goals = rounds.next_round(rounds.tally(finished), width, repeat) if width is not None else {}
                if not goals:
                    break
                ran = rounds.tally(finished)
                selected = _until(goals, ran)
                most, total = max(goals.values()), sum(goals[c] - ran[c][1] for c in goals)
                first_words = f"another round: {total} runs for {len(goals)} cells wider than {width:.0%} ..."
    order = {(r, c.id, k): i for i, (r, c, k) in enumerate(matrix.plan(runners, cases, repeat))}
    outcomes = sorted(finished, key=lambda o: order.get((o.runner, o.case, o.repeat or 1), len(order)))
    doc = document(outcomes)
    cells = [summary.Cell.model_validate(c.model_dump()) for c in doc.cells]
    eval_tables.matrix_table(cells, runners, [c.id for c in cases])
    eval_tables.runner_summary(doc.runner_summaries())
    first_screen.print_repeats(doc)
    headline.print_headline(doc)
    if json_path:
        results.write(doc, json_path)
        terminal.console().print(f"JSON: {json_path}")
    if args.html:
        report.write_html(doc, Path(args.html), source="looplab eval")
        terminal.console().print(f"HTML: {args.html}")
    if args.otel:
        write_otel(args.otel, doc)
    if width is not None:
        runs = [n for _, n in rounds.tally(outcomes).values()] or [0]
        terminal.console().print(
            f"--repeat-until {width:.0%}: {len(outcomes)} runs, {min(runs)} to {max(runs)} a cell (at most {repeat})"
        )
    if earlier is not None or args.shard:
        skipped = len(matrix.plan(runners, cases, repeat)) - total
        why = " or ".join(
            ([f"in another shard than {args.shard[0]}/{args.shard[1]}"] if args.shard else [])
            + ([f"already in {args.resume}"] if earlier is not None else [])
        )
        terminal.console().print(f"ran {total} of the matrix's cells; {skipped} were {why}")
    return exit_code(cells)


def _estimate(args: argparse.Namespace, runners: list[str], cases: list, jobs: int, isolated: Any) -> int:
    """`eval --estimate`: the matrix against the scripted model, priced at the named model's rates."""
    from looplab.adapters.contract.errors import LooplabError
    from looplab.measure import estimate
    from looplab.views import terminal

    if args.model == "scripted":
        raise LooplabError("--estimate needs --model PROVIDER:NAME: the model whose price the tokens are costed at")
    repeats = args.repeat or (REPEAT_UNTIL_MOST if args.repeat_until is not None else 1)
    found = estimate.estimate(
        cases, runners, args.model, args.price, jobs=jobs, isolated=isolated, sandbox=args.sandbox, repeats=repeats
    )
    out = terminal.console()
    out.print(estimate.render(found, width=out.width), highlight=False, markup=False)
    return 0


def _merge(args: argparse.Namespace) -> int:
    from pathlib import Path

    from looplab.adapters.contract.errors import LooplabError
    from looplab.records import results
    from looplab.views import report, terminal

    if not args.output and not args.html:
        raise LooplabError("merge needs -o PATH (the merged results) and/or --html PATH (its report)")
    ready_to_write("-o", args.output)
    ready_to_write("--html", args.html)
    doc = results.merge_files([Path(p) for p in args.results])
    if args.output:
        results.write(doc, Path(args.output))
    if args.html:
        report.write_html(doc, Path(args.html), source=", ".join(args.results))
    environments = len(doc.environments)
    terminal.console().print(
        f"merged {len(args.results)} documents: {len(doc.cells)} cells, {len(doc.results)} results, "
        f"{environments} environment{'s' * (environments != 1)}"
        + (f"; incomplete: {doc.incomplete}" if doc.incomplete else "")
    )
    for target in (args.output, args.html):
        if target:
            terminal.console().print(f"wrote {target}")
    return 0


#: How each command's parser is added to `looplab`'s subcommands.
PARSERS: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "run": _add_run,
    "eval": _add_eval,
    "merge": _add_merge,
}
#: What runs each command; it returns the exit code.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"run": _run, "eval": _eval, "merge": _merge}


def _until(goals: dict[tuple[str, str], int], ran: dict[tuple[str, str], tuple[int, int]]) -> Any:
    """The next round's `select`: each unsettled cell's repeats past those it ran, up to its goal."""

    def selected(runner: str, case: str, k: int) -> bool:
        goal = goals.get((runner, case))
        return goal is not None and ran[runner, case][1] < k <= goal

    return selected


def _run_options(args: argparse.Namespace) -> RunOptions:
    """The `RunOptions` of every run a command makes: `--max-steps`, `--max-tokens`, `--tools` and `--sandbox`
    where the command has them."""
    from looplab.run.options import RunOptions

    return RunOptions(
        max_steps=getattr(args, "max_steps", None),
        max_tokens=getattr(args, "max_tokens", None),
        tools=args.tools,
        sandbox=bool(args.sandbox),
    )


def _stream(args: argparse.Namespace) -> bool | None:
    """`--stream on|off` as the model choice takes it (None: each runner's own)."""
    return None if args.stream is None else args.stream == "on"


def _document(args: argparse.Namespace, outcomes: Any, runners: Any, cases: Any, incomplete: str | None) -> Any:
    """The results document of `outcomes`, run as `args` asked (model, wire API, stream)."""
    from looplab.records import results

    return results.build(
        outcomes,
        model=args.model,
        api=args.api,
        stream=_stream(args),
        runners=runners,
        cases=cases,
        incomplete=incomplete,
    )
