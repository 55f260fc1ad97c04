"""`looplab caps` and `looplab bench`: measuring the runners' native iteration caps and the frameworks' overhead.

`bench` has three other measurements behind its options: `--concurrency` (the matrix at several concurrencies),
`--isolation` (what a runner environment adds) and `--shards` (one process against N shards and a merge).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from looplab.cli._inputs import ready_to_write, select
from looplab.cli._options import API_CHOICES, levels, positive_int


def _add_caps(sub: argparse._SubParsersAction) -> None:
    caps = sub.add_parser("caps", help="measure each runner's native iteration cap; write docs/iteration-caps.*")
    caps.add_argument(
        "--runner",
        action="append",
        metavar="R",
        help="runner (repeatable; default: every installed one but external, and those in their own environments)",
    )
    caps.add_argument(
        "--check",
        action="store_true",
        help="compare with the committed docs instead of writing them: exit 1 naming the runner, knob and value "
        "when a measured behaviour changed; versions that moved with the same behaviour pass, and are named",
    )
    caps.add_argument(
        "--api",
        choices=API_CHOICES,
        help="with --check: measure on this wire API (the docs are measured on each runner's first) and compare; "
        "the runners that do not speak it are left out",
    )
    caps.add_argument(
        "--docs", default="docs", metavar="DIR", help="where iteration-caps.json and .md live (default: docs)"
    )
    caps.add_argument(
        "--measured",
        metavar="PATH",
        help="write what was measured to PATH (as iteration-caps.json holds it) instead of the docs; with --check, "
        "as well as comparing: what `looplab history record --caps` keeps",
    )
    caps.add_argument(
        "--isolate",
        action="store_true",
        help="measure every runner in its own runner environment (those that cannot share this one always are)",
    )
    caps.add_argument(
        "--versions",
        action="append",
        default=[],
        metavar="RUNNER=SPEC",
        help="measure RUNNER on that version of its framework (e.g. langgraph=1.0.10), in an environment of its own; "
        "one a runner. Needs --measured PATH (or --check): an older release is measured without touching the docs, "
        "for `looplab history record` to keep",
    )


def _add_bench(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="framework overhead per model turn, import time and memory, vs handrolled")
    bench.add_argument(
        "--runner", action="append", metavar="R", help="runner (repeatable; default: every installed one)"
    )
    bench.add_argument(
        "--case", metavar="C", help="the case to run (default: vip-compound; with --concurrency: every case)"
    )
    bench.add_argument("--repeat", type=int, default=20, metavar="K", help="timed runs per runner (default 20)")
    bench.add_argument(
        "--import-repeat", type=int, default=3, metavar="K", help="fresh interpreters per runner for import time"
    )
    bench.add_argument("--json", metavar="PATH", help="also write every measurement as JSON")
    bench.add_argument("--markdown", action="store_true", help="also print the tables as Markdown (for the docs)")
    bench.add_argument(
        "--concurrency",
        type=levels,
        metavar="N,M,...",
        help="instead: the whole matrix (every case, or --case) against a model that takes 1 s a reply, "
        "at each eval --concurrency given, e.g. 1,32",
    )
    bench.add_argument(
        "--isolation",
        action="store_true",
        help="instead: what a cached runner environment adds to a one-cell `eval --isolate`, per runner",
    )
    bench.add_argument(
        "--shards",
        type=positive_int,
        metavar="N",
        help="instead: the whole matrix in one process, then as N shard processes at once plus `merge`",
    )


def _caps(args: argparse.Namespace) -> int:
    from pathlib import Path

    from looplab.adapters.contract import files
    from looplab.adapters.contract.errors import LooplabError
    from looplab.adapters.registry import RUNNERS
    from looplab.measure import caps, caps_drift
    from looplab.records import measurements
    from looplab.views import terminal

    args.case = ["vip-compound"]
    if args.api and not args.check:
        raise LooplabError("--api needs --check: the docs are measured on each runner's first wire API")
    from looplab.run.environments import parse_pins

    pins = parse_pins(args.versions)
    if twice := [r for r, specs in pins.items() if len(specs) > 1]:
        raise LooplabError(f"--versions names {', '.join(twice)} more than once: caps measures one version a runner")
    if pins and not (args.measured or args.check):
        raise LooplabError("--versions needs --measured PATH (or --check): the docs are of the versions installed here")
    args.runner = [*(args.runner or []), *(r for r in pins if r not in (args.runner or []))] if pins else args.runner
    runners, _ = select(args, None, own_environments=True)
    if args.api:
        silent = [r for r in args.runner or [] if args.api not in RUNNERS[r].apis]
        if silent:
            raise LooplabError(f"{', '.join(silent)} cannot use the {args.api} API")
        runners = [r for r in runners if args.api in RUNNERS[r].apis]
    docs = Path(args.docs)
    json_path, md_path = docs / "iteration-caps.json", docs / "iteration-caps.md"
    if not args.check and not args.measured:
        for path in (json_path, md_path):
            ready_to_write("--docs", str(path))
    # Read before measuring: a FIFO or folder there is one line now, not a wait or a traceback after the runs.
    committed_md = files.read_text(md_path) if md_path.exists() else ""
    ready_to_write("--measured", args.measured)
    if args.check and not json_path.exists():
        raise LooplabError(f"{json_path} does not exist: run `looplab caps` to write it")
    # Read too when writing after `--runner`: the runners not measured keep their sections.
    committed_json = files.read_text(json_path) if args.check or (args.runner and json_path.exists()) else ""
    out = terminal.console()
    began: dict[str, float] = {}  # when each runner's measurement began, on the monotonic clock

    def on_runner(name: str) -> None:
        began[name] = time.monotonic()
        out.print(f"measuring {name} ...", style="dim")

    doc = caps.measure(
        runners,
        on_runner=on_runner,
        isolate=args.isolate or None,
        api=args.api,
        versions={r: specs[0] for r, specs in pins.items()},
    )
    out.print(_measured_in(began, time.monotonic()), style="dim")
    if args.measured:
        files.write_text(args.measured, caps.to_json(doc))
        if not args.check:
            out.print(f"wrote {args.measured}")
            return 0
    if args.check:
        changes = caps_drift.drift(doc, committed_json, across_apis=args.api is not None)
        fresh_md = caps.to_markdown(measurements.CapsDoc.model_validate_json(committed_json), committed_md)
        stale_md = md_path.exists() and fresh_md != committed_md
        if changes or stale_md:
            found = str(changes) or caps_drift.diff(committed_md, fresh_md, "iteration-caps.md")
            print(caps_drift.for_terminal(found, out.width))  # the terminal's width: a diff line goes on under its mark
            why = (
                f"on the {args.api} API the caps measure otherwise than the docs, measured on each runner's first "
                "(the lines above name the runner, knob and value)"
                if args.api
                else "a library changed what its cap does (the lines above name the runner, knob and value); run "
                "`looplab caps` to regenerate them"
            )
            out.print(f"the measured caps differ from the committed docs: {why}", style="red")
            return 1
        for line in changes.moved_lines():
            out.print(line)
        out.print(f"{json_path} and {md_path} match the installed libraries", style="green")
        return 0
    if committed_json:
        doc = caps.merged(doc, committed_json)
    files.write_text(json_path, caps.to_json(doc))
    files.write_text(md_path, caps.to_markdown(doc, committed_md))
    out.print(f"wrote {json_path} and {md_path}")
    return 0


def _measured_in(began: dict[str, float], ended: float) -> str:
    """How long the measurement took, and its slowest runner: each runner's time runs to the next one's start."""
    if not began:
        return "measured no runner"
    starts = sorted(began.items(), key=lambda item: item[1])
    took = {name: end - start for (name, start), end in zip(starts, [s for _, s in starts[1:]] + [ended], strict=True)}
    slowest = max(took, key=took.__getitem__)
    total = ended - starts[0][1]
    return f"measured {len(took)} runner(s) in {total:.0f} s; the slowest, {slowest}, in {took[slowest]:.0f} s"


def _bench(args: argparse.Namespace) -> int:
    from looplab.adapters.contract import files
    from looplab.adapters.contract.errors import LooplabError
    from looplab.measure import bench, bench_report

    ready_to_write("--json", args.json)
    if args.repeat < 1 or args.import_repeat < 1:
        raise LooplabError("--repeat and --import-repeat take a whole number of 1 or more")
    if args.concurrency:
        return _bench_concurrency(args)
    if args.isolation or args.shards:
        return _bench_matrix(args)
    runners, [case] = select(argparse.Namespace(runner=args.runner, case=[args.case or "vip-compound"]), None)
    result = bench.run_bench(runners, case, repeat=args.repeat, import_repeat=args.import_repeat)
    bench_report.print_tables(result)
    if args.markdown:
        print(bench_report.markdown(result))
    if args.json:
        files.write_text(args.json, result.model_dump_json(indent=2) + "\n")
    return 0


def _bench_matrix(args: argparse.Namespace) -> int:
    """`bench --isolation` and `bench --shards`."""
    from looplab.measure import bench_matrix
    from looplab.views import terminal

    runners, _ = select(argparse.Namespace(runner=args.runner, case=None), None)
    if args.isolation:
        terminal.markdown_lines(bench_matrix.isolation_table(bench_matrix.isolation(runners)))
    if args.shards:
        terminal.markdown_lines(bench_matrix.shard_table(bench_matrix.shards(args.shards, args.runner or ())))
    return 0


def _bench_concurrency(args: argparse.Namespace) -> int:
    """`bench --concurrency N,M,...`."""
    import json

    from looplab.adapters.contract import files
    from looplab.measure import bench_concurrency
    from looplab.run import matrix
    from looplab.views import terminal

    named = [args.case] if args.case else None  # the whole matrix unless a case was named
    runners, cases = select(argparse.Namespace(runner=args.runner, case=named), None)
    rows = bench_concurrency.measure(runners, cases, args.concurrency, jobs=matrix.default_jobs())
    terminal.markdown_lines(bench_concurrency.table(rows))
    if args.json:
        files.write_text(args.json, json.dumps([r.model_dump() for r in rows], indent=2) + "\n")
    return 0


#: How each command's parser is added to `looplab`'s subcommands.
PARSERS: dict[str, Callable[[argparse._SubParsersAction], None]] = {"caps": _add_caps, "bench": _add_bench}
#: What runs each command; it returns the exit code.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"caps": _caps, "bench": _bench}
