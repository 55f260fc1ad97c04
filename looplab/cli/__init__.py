"""The `looplab` command. Imports stay inside the subcommands so `--help` loads no framework."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NoReturn

API_CHOICES = ("chat", "responses", "messages")
#: What `looplab run` runs when no case is named: the investigation, bad tool calls, and a budget that runs out,
#: so its closing screen can show where the runners differ (stops, recovery, the cap) as well as where they agree.
_FIRST_CASES = ("vip-compound", "sloppy-calls", "tight-budget")


def _fit(*lines: str) -> str:
    """The first of `lines` that fits the terminal (or COLUMNS) after `looplab: `; else the last, the shortest."""
    import shutil

    room = shutil.get_terminal_size().columns - len("looplab: ")
    return next((line for line in lines if len(line) <= room), lines[-1])


def _shown(word: str, limit: int = 40) -> str:
    """A word the user typed, quoted, and cut to `limit` characters so that a pasted paragraph stays one short line."""
    return repr(word if len(word) <= limit else word[: limit - 3] + "...")


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`; did you mean X?` for the closest of `choices`, or '' when none is close."""
    from looplab.scenarios.strict import nearest  # on an error's path only: --help imports no pydantic

    return nearest(word, choices)


def unknown(kind: str, word: str, known: Sequence[str], listed_by: str) -> str:
    """The one line for a name that is not one of `known`: the nearest if one is close, and `listed_by`, the
    command that lists them, where the terminal has room; on a narrow one the nearest name alone."""
    near = _did_you_mean(word, known)
    line = f"unknown {kind} {_shown(word)}{near}"
    return _fit(f"{line} (`{listed_by}` lists them)", line, f"unknown {kind}{near}" if near else line)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other looplab error.

    argparse's own `error` prints the whole usage block first (several lines of
    option soup that bury the one that matters); this prints `looplab: ...` and
    where to find the usage instead (where the terminal has room), and exits 2 as argparse
    does. A value that is not one of the choices, or an option no command has, gets the
    nearest one instead of the whole list. Subcommand parsers are built from this class
    too (`add_subparsers` uses the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())
        self.exit(2, f"looplab: {_fit(f'{line} (see `{self.prog} --help`)', line)}\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        choices = [str(c) for c in action.choices]
        near = _did_you_mean(str(value), choices)
        if isinstance(action, argparse._SubParsersAction):
            raise argparse.ArgumentError(None, f"unknown command {_shown(str(value))}{near}")
        # A short list is the answer itself; the nearest alone when one is close.
        offered = near or f"; one of {', '.join(choices)}"
        raise argparse.ArgumentError(action, f"unknown value {_shown(str(value))}{offered}")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        """As argparse's, but an option the command does not have is named with the nearest one it has."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            options = _options_of(self, getattr(parsed, "command", None))
            near = next((_did_you_mean(w.partition("=")[0], options) for w in extra if w.startswith("-")), "")
            self.error(f"unrecognized arguments: {' '.join(extra)}{near}")
        return parsed


def _options_of(parser: argparse.ArgumentParser, command: str | None) -> list[str]:
    """The option strings of `command`'s parser (the top level's when there is none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            parser = action.choices[command]
    return [option for action in parser._actions for option in action.option_strings]


def _at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of `minimum` or more (a count: model calls, repeats, workers, retries)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number of {minimum} or more, got {text!r}")
        return value

    return parse


_positive_int = _at_least(1)


def _shard(text: str) -> tuple[int, int]:
    """An argparse type: `I/N`, slice I of N (1 <= I <= N)."""
    index, _, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = 0, 0
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"expected I/N with whole numbers 1 <= I <= N, got {text!r}")
    return i, n


def _levels(text: str) -> list[int]:
    """An argparse type: a comma-separated list of whole numbers of 1 or more (`1,32`)."""
    return [_positive_int(part.strip()) for part in text.split(",")]


def _price(text: str) -> object:
    """An argparse type: `IN,OUT[,CACHED]` dollars per million tokens, as a Pricing."""
    from looplab.adapters.contract.pricing import parse_price

    try:
        return parse_price(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _Version(argparse.Action):
    """`--version`: print `looplab X.Y.Z` and exit 0; the version is read only when the option is given."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        from looplab import __version__

        sys.stdout.write(f"looplab {__version__}\n")
        parser.exit(0)


#: Which runners a command takes when none is named (`_select`).
_EVERY_RUNNER = "default: every installed one but external; with --isolate, also those in their own environments"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="looplab",
        description="Run one ReAct investigation through several agent runners and compare their loops.",
    )
    parser.add_argument("--version", action=_Version, help="print looplab's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run cases through runners and print them side by side")
    run.add_argument("--runner", action="append", metavar="R", help=f"runner to use (repeatable; {_EVERY_RUNNER})")
    _cases_option(run)
    run.add_argument(
        "--case",
        action="append",
        metavar="C",
        help=f"case id (repeatable; default: {', '.join(_FIRST_CASES)}, or every case of --cases or looplab.toml)",
    )
    _model_options(run)
    run.add_argument("--max-steps", type=_positive_int, metavar="N", help="override the case's max_steps (model calls)")
    run.add_argument("--json", metavar="PATH", help="also write the results document (results.json in --out) to PATH")
    _otel_option(run)
    run.add_argument(
        "--out", metavar="DIR", help="folder for results.json and traces.jsonl (default: looplab-runs/<time>)"
    )
    run.add_argument("--steps", action="store_true", help="also print each run's steps and the per-case table")
    run.add_argument("--quiet", action="store_true", help="print only where the runners differ and where the files are")
    _isolation_options(run)

    ev = sub.add_parser("eval", help="the runner x case matrix: checks, completion rates, calls and cost")
    ev.add_argument("--runner", action="append", metavar="R", help=f"runner (repeatable; {_EVERY_RUNNER})")
    _cases_option(ev)
    ev.add_argument(
        "--case", action="append", metavar="C", help="case id (repeatable; default: every case of the suite)"
    )
    ev.add_argument("--repeat", type=_positive_int, default=1, metavar="K", help="run every cell K times (default 1)")
    _model_options(ev)
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
    _otel_option(ev)
    ev.add_argument(
        "--jobs", type=_positive_int, metavar="N", help="worker processes for the matrix (default: the cores)"
    )
    ev.add_argument(
        "--concurrency",
        type=_positive_int,
        metavar="N",
        help="cells in flight at once, on threads in the workers (default: one per job); "
        "runs against a real model mostly wait on HTTP, so N can be far above the cores",
    )
    _isolation_options(ev)
    ev.add_argument(
        "--shard",
        type=_shard,
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
        "--docs", default="docs", metavar="DIR", help="where iteration-caps.json and .md live (default: docs)"
    )
    caps.add_argument(
        "--isolate",
        action="store_true",
        help="measure every runner in its own runner environment (those that cannot share this one always are)",
    )

    sub.add_parser("runners", help="list runners, whether each is installed, and the extra that enables it")
    card = sub.add_parser("scorecard", help="how each framework behaves, cell by cell, from measurements")
    card.add_argument("--runner", action="append", metavar="NAME", help="only these runners (repeatable)")
    card.add_argument(
        "--results", metavar="PATH", help="read the runs from this results document (default: run the cases now)"
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
    _cases_option(card)
    _cases_option(sub.add_parser("cases", help="list the cases"))
    otel = sub.add_parser("otel", help="a results document's runs as OpenTelemetry traces (OTLP/JSON)")
    otel.add_argument("results", metavar="RESULTS.json", help="written by `looplab eval`, `run` or `merge`")
    otel.add_argument("output", metavar="OUT.json", help="the OTLP/JSON file to write")
    _report_bench_parsers(sub)

    serve = sub.add_parser("serve-model", help="serve the scripted model over HTTP for other tools")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument(
        "--policy",
        default="investigator",
        metavar="P",
        help="investigator (default), never-stops, or answers-on:K (probes for iteration caps)",
    )
    _cases_option(serve)

    tools = sub.add_parser("serve-tools", help="serve a case's Guard over MCP to a runner in another process")
    _cases_option(tools)
    tools.add_argument(
        "--case", metavar="C", help="whose tools (default: vip-compound, or the first case of --cases or looplab.toml)"
    )
    where = tools.add_mutually_exclusive_group()
    where.add_argument("--stdio", action="store_true", help="over stdin and stdout instead of streamable HTTP")
    where.add_argument("--port", type=int, default=0, help="the HTTP port on 127.0.0.1 (default: a free one)")
    tools.add_argument("--records", metavar="PATH", help="write the tool records here as JSON lines (default: stderr)")
    new = sub.add_parser("new-suite", help="write a suite folder for your own repo and test, ready for --cases")
    new.add_argument("dir", metavar="DIR", help="the suite folder to write (new, or without a suite in it)")
    new.add_argument("--repo", required=True, metavar="PATH", help="the repository to investigate (a folder)")
    new.add_argument("--target", required=True, metavar="TEST", help="the failing test, e.g. tests/test_x.py::test_y")
    new.add_argument("--id", dest="case_id", metavar="ID", help="the case's id (default: from the test's name)")
    return parser


def _cases_option(parser: argparse.ArgumentParser) -> None:
    """`--cases PATH` on a command that takes cases (read by `looplab.cli.sources`)."""
    parser.add_argument(
        "--cases",
        action="append",
        metavar="PATH",
        help="a case file or a suite folder (repeatable; default: `cases` in ./looplab.toml, else looplab's own suite)",
    )


def _case_sources(args: argparse.Namespace) -> list[Any]:
    """The case files and suite folders the command runs (see `looplab.cli.sources`)."""
    from looplab.cli import sources

    return sources.case_sources(args)


def _isolation_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--isolate",
        action="store_true",
        help="run each runner in a virtual environment of its own (looplab's dependencies plus the runner's extra; "
        "created on first use, with uv where it is installed, then cached): for frameworks that cannot be "
        "installed beside the others",
    )
    parser.add_argument(
        "--versions",
        action="append",
        metavar="RUNNER=SPEC",
        help="with --isolate (implied): that version of the runner's framework, e.g. langgraph=1.0.0; "
        "repeatable, also for one runner, whose versions then run side by side as RUNNER@SPEC",
    )
    parser.add_argument(
        "--tools",
        choices=("in-process", "mcp"),
        default="in-process",
        help="how in-process runners reach the tools: called here (default) or as MCP clients of a tool server",
    )


def _otel_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--otel",
        metavar="PATH",
        help="also write every run as OpenTelemetry GenAI traces to PATH (OTLP/JSON); with OTEL_EXPORTER_OTLP_ENDPOINT "
        "(or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set, send them to that collector too",
    )


def _otel_ready(path: str | None) -> None:
    """Before anything runs: with --otel, the `otel` extra is installed and PATH may be written, its folder made."""
    if not path:
        return
    from looplab.views import otel

    otel.require()
    _ready_to_write("--otel", path)


def _ready_to_write(option: str, path: str | None) -> None:
    """Before anything runs: `path` may be written by `adapters.files`' rule and its folder exists.

    If not, one line naming `option` and the path.
    """
    if not path:
        return
    from looplab.adapters.contract import files
    from looplab.adapters.contract.errors import LooplabError

    try:
        files.ready_to_write(path)
    except files.FileRefused as exc:
        raise LooplabError(f"{option} {exc}") from None


def _write_otel(path: str, doc: Any, *, announce: bool = True, anchor: Any = None) -> None:
    """Write `doc`'s runs to `path` as OTLP/JSON, and send them to a collector if one is named.

    A collector that does not take them is a one-line warning; the file is written first either way.
    """
    from pathlib import Path

    from looplab.views import otel, render

    done = otel.export(doc.run_results(), Path(path), anchor=anchor)
    if done.warning:
        print(f"looplab: warning: {done.warning}", file=sys.stderr)
    if announce:
        sent = f", sent to {done.endpoint}" if done.endpoint and not done.warning else ""
        render.console().print(f"OpenTelemetry: {path} ({done.spans} spans{sent})")


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
    _write_otel(args.output, doc, anchor=datetime.fromtimestamp(source.stat().st_mtime, UTC))
    return 0


def _environments(args: argparse.Namespace, runners: list[str]) -> tuple[list[str], Any]:
    """With --isolate or --versions: the runner labels and a lookup of their environments, created now if new."""
    from looplab.run import environments
    from looplab.views import render

    if not (args.isolate or args.versions):
        return runners, None
    labels = environments.labels(runners, environments.parse_pins(args.versions or []))
    out = render.console()

    def created(env: environments.RunnerEnv) -> None:
        out.print(f"created the {env.spec.label} environment in {env.created_s:.1f} s (first use, kept in {env.path})")

    def creating(spec: environments.EnvSpec, path: Any) -> None:
        out.print(environments.creating_line(spec, path))

    everyone = getattr(args, "isolate_everyone", bool(args.isolate))
    with out.status("preparing runner environments ..."):
        return labels, environments.prepare(labels, created, everyone=everyone, on_creating=creating)


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default="scripted",
        metavar="PROVIDER:NAME",
        help="'scripted' (default, offline) or e.g. openai:gpt-4.1, anthropic:claude-sonnet-4-5",
    )
    parser.add_argument(
        "--base-url", metavar="URL", help="send the --model provider's requests to this compatible endpoint"
    )
    parser.add_argument(
        "--api",
        choices=API_CHOICES,
        help="wire API, where a runner speaks several: messages for anthropic models, chat or responses for openai",
    )
    parser.add_argument(
        "--price",
        type=_price,
        metavar="IN,OUT[,CACHED]",
        help="the model's dollars per million input, output (and cached input) tokens; "
        "overrides the shipped table, which prices current OpenAI and Anthropic models",
    )
    parser.add_argument(
        "--cmd",
        metavar="'COMMAND ...'",
        help="the program --runner external runs, split like a shell line (not run by a shell), in this "
        "directory; it gets the run's contract in LOOPLAB_* variables and writes its outcome to LOOPLAB_RESULT",
    )
    parser.add_argument(
        "--rpm",
        type=_positive_int,
        metavar="N",
        help="at most N model requests a minute over every run in flight (a 429's retry-after holds them all back)",
    )
    parser.add_argument(
        "--retries",
        type=_at_least(0),
        default=2,  # contract.model.DEFAULT_RETRIES, not imported here: --help loads no more than it needs
        metavar="N",
        help="retries of a failed model request (5xx, 429, broken connection) in every runner's SDK (default 2)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 0
    from looplab.adapters.contract.errors import LooplabError

    try:
        commands = {
            "run": _run,
            "eval": _eval,
            "caps": _caps,
            "runners": _runners,
            "scorecard": _scorecard,
            "cases": _cases,
            "serve-model": _serve,
            "serve-tools": _serve_tools,
            "report": _report,
            "merge": _merge,
            "bench": _bench,
            "otel": _otel,
            "new-suite": _new_suite,
        }
        return commands[args.command](args)
    except LooplabError as exc:
        print(f"looplab: {exc}", file=sys.stderr)
        return 2


def _scorecard(args: argparse.Namespace) -> int:
    from pathlib import Path

    from looplab.adapters.contract import files
    from looplab.adapters.contract.errors import LooplabError
    from looplab.adapters.registry import RUNNERS
    from looplab.records import results
    from looplab.run import matrix
    from looplab.views import render, scorecard

    _ready_to_write("--markdown", args.markdown)
    known = [n for n, info in RUNNERS.items() if info.by_default]
    _check_runners(args.runner)
    caps_path = Path(args.caps)
    caps = scorecard.load_caps(caps_path)
    sources = {"caps": str(caps_path) if caps else f"{caps_path} (missing: not measured)"}
    if args.results:
        document = results.read(Path(args.results))
        sources["eval"] = args.results
        runners = args.runner or [n for n in known if n in document.runners]
    else:
        from looplab.run.harness import ModelChoice
        from looplab.scenarios.cases import load_cases

        runners = args.runner or known
        here = [r for r in runners if RUNNERS[r].installed()]  # the others' eval cells stay "not measured"
        jobs = matrix.default_jobs() if args.jobs is None else args.jobs
        sources_named = _case_sources(args)
        own = list(load_cases(sources_named).values()) if sources_named else []
        ModelChoice().check_drivable(own)
        if clash := [c.id for c in own if c.id in scorecard.CASES]:
            raise LooplabError(f"case {clash[0]!r}: the scorecard runs looplab's own case of that id; rename yours")
        wanted = [*scorecard.CASES, *own]
        with render.console().status(f"running {len(wanted)} cases through {len(here)} runners"):
            document = matrix.run_scripted(here, wanted, jobs=jobs)
        ran = [*scorecard.CASES, *(c.id for c in own)]
        sources["eval"] = f"{', '.join(ran)} run now against the scripted model"
    bench = scorecard.load_bench(Path(args.bench)) if args.bench else None
    sources["bench"] = args.bench or "none given (--bench PATH from `looplab bench --json`): not measured"
    card = scorecard.build(runners, scorecard.observed(document), caps, bench, sources=sources)
    scorecard.print_terminal(card)
    if args.markdown:
        files.write_text(args.markdown, scorecard.markdown(card))
        render.console().print(f"Markdown: {args.markdown}")
    return 0


def _runners(args: argparse.Namespace) -> int:
    from looplab.adapters.registry import RUNNERS
    from looplab.views.render import runners_table

    runners_table(RUNNERS.values())
    return 0


def _cases(args: argparse.Namespace) -> int:
    from looplab.scenarios.cases import load_cases
    from looplab.views.render import cases_table

    cases_table(load_cases(_case_sources(args)).values())
    return 0


def _new_suite(args: argparse.Namespace) -> int:
    from looplab.cli import suite

    return suite.main(args)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from looplab.adapters.contract.errors import LooplabError
    from looplab.scenarios.scripted.probes import policy_named
    from looplab.scenarios.scripted.server import GRACEFUL_SHUTDOWN_S, create_app

    try:
        policy = policy_named(args.policy)
    except ValueError as exc:
        raise LooplabError(str(exc)) from None
    sources = _case_sources(args)
    if sources and args.policy == "investigator":  # the cases the server is for: checked now, named below
        from looplab.run.harness import ModelChoice
        from looplab.scenarios.cases import load_cases

        cases = load_cases(sources)
        ModelChoice().check_drivable(cases.values())
        print(f"cases: {', '.join(cases)}", flush=True)
    url = f"http://{args.host}:{args.port}"
    print(f"scripted model ({args.policy}) on {url}: OpenAI base_url {url}/v1, Anthropic base_url {url}", flush=True)
    app = create_app(policy)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
    return 0


def _serve_tools(args: argparse.Namespace) -> int:
    """A fresh workspace of the case's repo and its Guard over MCP, until the client leaves or a signal comes."""
    import threading

    from looplab.adapters.boundary.tool_server import ToolServer, serve_stdio
    from looplab.adapters.contract import files
    from looplab.run.harness import case_guard
    from looplab.run.interrupt import keep_finished
    from looplab.scenarios.cases import load_cases
    from looplab.shared_tools import Workspace

    sources = _case_sources(args)
    cases = load_cases(sources)
    wanted = args.case or (next(iter(cases)) if sources else "vip-compound")
    _check_cases([wanted], cases, args)
    case = cases[wanted]
    _ready_to_write("--records", args.records)

    def save(_: object = None) -> str:
        lines = "".join(record.model_dump_json() + "\n" for record in guard.records)
        if args.records:
            files.write_text(args.records, lines)
        else:
            sys.stderr.write(lines)
        return f"{len(guard.records)} tool record{'s' * (len(guard.records) != 1)} in {args.records or 'stderr'}"

    with Workspace(case.repo_path, overlay=case.overlay_path) as ws:
        guard = case_guard(case, ws)  # no approver: effects are denied
        with keep_finished(save):
            if args.stdio:
                serve_stdio(guard)
            else:
                with ToolServer(guard, port=args.port) as server:
                    print(server.url, server.token, sep="\n", flush=True)
                    threading.Event().wait()  # until SIGINT or SIGTERM
    save()
    return 0


def _check_runners(named: Sequence[str] | None) -> None:
    """A runner name that is not one: one line with the nearest name."""
    from looplab.adapters.contract.errors import LooplabError
    from looplab.adapters.registry import RUNNERS

    for name in named or []:
        if name not in RUNNERS:
            raise LooplabError(unknown("runner", name, list(RUNNERS), "looplab runners"))


def _check_cases(named: Sequence[str], cases: Mapping[str, Any], args: argparse.Namespace) -> None:
    """A case id that is not one of `cases`: one line with the nearest id."""
    from looplab.adapters.contract.errors import LooplabError

    lister = "looplab cases" + "".join(f" --cases {p}" for p in getattr(args, "cases", None) or [])
    for name in named:
        if name not in cases:
            raise LooplabError(unknown("case", name, list(cases), lister))


def exit_code(runs: Iterable[Any]) -> int:
    """The exit code of `run` and `eval` from the runs asked for (outcomes or cells, each with `passed`).

    0 when every one ran and did what its case expects (its checks passed); 1 when one errored (no result) or
    failed a check. Bad input is 2 before anything runs (`main`); SIGINT and SIGTERM end the command with 130
    and 143 (`looplab.run.interrupt`). A runner that cannot take the model is not among the runs (`_runners_taking`).
    """
    return 0 if all(run.passed for run in runs) else 1


def _starting(total: int, runners: Sequence[str], jobs: int, concurrency: int | None, isolated: Any) -> str:
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


def _runners_taking(choice: Any, runners: list[str]) -> list[str]:
    """The `runners` that can take `choice`'s model (and `--api`); the others are skipped, before anything runs,
    with one line naming them. None left is bad input: the first one's reason, in one line."""
    from looplab.adapters.contract.errors import LooplabError
    from looplab.adapters.contract.model import PROVIDER_OF_API, ModelSpec, parse_model
    from looplab.adapters.contract.runner import Runner
    from looplab.adapters.registry import RUNNERS
    from looplab.run.harness import SCRIPTED
    from looplab.views import render

    if choice.model == SCRIPTED:
        if choice.api is None:
            return runners  # the scripted model speaks every runner's first API
        spec = ModelSpec(PROVIDER_OF_API[choice.api], SCRIPTED, api=choice.api)  # type: ignore[arg-type]
        target = f"--api {choice.api}"
    else:
        provider, name = parse_model(choice.model)
        spec = ModelSpec(provider, name, api=choice.api)  # type: ignore[arg-type]
        target = choice.model + (f" over --api {choice.api}" if choice.api else "")
    kept, refused = [], {}
    for runner in runners:
        try:
            # The rule each runner's `run` applies, read off its declaration: no framework is imported for it.
            Runner.api_for(RUNNERS[runner], spec)  # type: ignore[arg-type]
        except LooplabError as exc:
            refused[runner] = exc
        else:
            kept.append(runner)
    if refused and not kept:
        raise next(iter(refused.values()))
    if refused:
        speak = sorted({", ".join(RUNNERS[r].apis) for r in refused})
        who = "it" if len(refused) == 1 else "they"
        render.console().print(
            f"skipping {', '.join(refused)}: {who} cannot take {target} (APIs: {'; '.join(speak)})",
            style="yellow",
        )
    return kept


def _select(
    args: argparse.Namespace, default_cases: list[str] | None, own_environments: bool = False
) -> tuple[list[str], list]:
    """The runners and cases asked for; unknown names are one-line errors listing the known ones."""
    from looplab.adapters.contract.errors import LooplabError
    from looplab.adapters.registry import RUNNERS
    from looplab.scenarios.cases import load_cases

    sources = _case_sources(args)
    cases = load_cases(sources)
    wanted_cases = args.case or (None if sources else default_cases) or list(cases)
    _check_cases(wanted_cases, cases, args)
    _check_runners(args.runner)
    # A runner whose framework cannot share this environment runs in its own: naming one isolates the run.
    args.isolate_everyone = bool(getattr(args, "isolate", False))  # asked for: every runner in an environment
    if not own_environments and any(RUNNERS[r].elsewhere() for r in args.runner or []):
        args.isolate = True
    # In runner environments a runner needs only its programs here (node): its framework is installed there.
    isolated = getattr(args, "isolate", False) or getattr(args, "versions", None)
    usable = (lambda info: info.programs_found()) if isolated else (lambda info: info.installed())
    runners = args.runner or [name for name, info in RUNNERS.items() if info.by_default and usable(info)]
    elsewhere = [n for n, info in RUNNERS.items() if info.by_default and not info.in_all and n not in runners]
    if elsewhere and not args.runner and own_environments:  # measured there, in the order runners are listed
        runners = [n for n in RUNNERS if n in runners or (n in elsewhere and RUNNERS[n].programs_found())]
    elif elsewhere and not args.runner and hasattr(args, "isolate"):
        from looplab.views import render

        render.console().print(
            f"{', '.join(elsewhere)} run only in their own environments: add --isolate to include them", style="dim"
        )
    if getattr(args, "cmd", None):  # for --runner external, here and in every worker process
        import os

        from looplab.adapters.runners.external import EXTERNAL_COMMAND_ENV

        os.environ[EXTERNAL_COMMAND_ENV] = args.cmd
    if "external" in runners and not getattr(args, "cmd", None):
        raise LooplabError("--runner external needs --cmd 'COMMAND ...': the program to run as the runner")
    if not runners:
        raise LooplabError("no runner is installed: pip install 'looplab[all]'")
    return runners, [cases[c] for c in wanted_cases]


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from looplab.records import results
    from looplab.run import harness, interrupt, isolation, schedule
    from looplab.views import differences, render, report

    runners, cases = _select(args, list(_FIRST_CASES))
    _otel_ready(args.otel)
    _ready_to_write("--json", args.json)
    choice = harness.ModelChoice(args.model, args.base_url, args.api, args.price, args.retries, args.rpm)
    choice.check_cases(cases)
    choice.check_key()
    runners = _runners_taking(choice, runners)
    out_dir = Path(args.out) if args.out else harness.default_out_dir()
    for name in ("results.json", "traces.jsonl"):
        _ready_to_write("--out", str(out_dir / name))
    runners, isolated = _environments(args, runners)  # last: the inputs above are checked before anything is built
    outcomes: list[harness.RunOutcome] = []
    total = len(cases) * len(runners)

    def document(incomplete: str | None = None) -> results.Document:
        return results.build(
            outcomes, model=args.model, api=args.api, runners=runners, cases=cases, incomplete=incomplete
        )

    def save(stop: interrupt.Interrupted | None = None) -> str:
        doc = document(stop.note(len(outcomes), total) if stop else None)
        results_path, traces_path = harness.write_outputs(doc, out_dir)
        if args.json:
            results.write(doc, Path(args.json))
        if args.otel:
            _write_otel(args.otel, doc, announce=stop is None)
        return f"{results_path}, {traces_path}" + "".join(f", {p}" for p in (args.json, args.otel) if p)

    starting = _starting(total, runners, 1, 1, isolated)
    with interrupt.keep_finished(save):
        with harness.endpoint(choice) as where, render.matrix_progress(total, starting) as advance:

            def done(_: int, outcome: harness.RunOutcome) -> None:
                if args.steps:
                    render.run_detail(outcome)
                outcomes.append(outcome)
                advance(outcome)

            plan = [(runner, case) for case in cases for runner in runners]
            options = {"max_steps": args.max_steps, "tools": args.tools}
            if isolated is None:
                schedule.run_here(plan, where, 1, done, options)
            else:
                isolation.run_isolated(plan, where, isolated, 1, 1, done, options)
    if args.steps:
        render.summary_table(outcomes)
    if not args.quiet:
        report.print_headline(document())
    save()
    if args.json:
        render.console().print(f"JSON: {args.json}")
    render.console().print(f"results: {out_dir / 'results.json'}\ntraces:  {out_dir / 'traces.jsonl'}")
    differences.print_first_screen(document(), out_dir / "results.json")
    return exit_code(outcomes)


def _caps(args: argparse.Namespace) -> int:
    from pathlib import Path

    from looplab.adapters.contract import files
    from looplab.adapters.contract.errors import LooplabError
    from looplab.measure import caps
    from looplab.records import measurements
    from looplab.views import render

    args.case = ["vip-compound"]
    runners, _ = _select(args, None, own_environments=True)
    docs = Path(args.docs)
    json_path, md_path = docs / "iteration-caps.json", docs / "iteration-caps.md"
    if not args.check:
        for path in (json_path, md_path):
            _ready_to_write("--docs", str(path))
    # Read before measuring: a FIFO or folder there is one line now, not a wait or a traceback after the runs.
    committed_md = files.read_text(md_path) if md_path.exists() else ""
    if args.check and not json_path.exists():
        raise LooplabError(f"{json_path} does not exist: run `looplab caps` to write it")
    committed_json = files.read_text(json_path) if args.check else ""
    out = render.console()
    doc = caps.measure(
        runners, on_runner=lambda name: out.print(f"measuring {name} ...", style="dim"), isolate=args.isolate or None
    )
    if args.check:
        changes = caps.drift(doc, committed_json)
        fresh_md = caps.to_markdown(measurements.CapsDoc.model_validate_json(committed_json), committed_md)
        stale_md = md_path.exists() and fresh_md != committed_md
        if changes or stale_md:
            print(changes or caps.diff(committed_md, fresh_md, "iteration-caps.md"))
            out.print(
                "the measured caps differ from the committed docs: a library changed what its cap does "
                "(the lines above name the runner, knob and value); run `looplab caps` to regenerate them",
                style="red",
            )
            return 1
        for line in changes.moved_lines():
            out.print(line)
        out.print(f"{json_path} and {md_path} match the installed libraries", style="green")
        return 0
    files.write_text(json_path, caps.to_json(doc))
    files.write_text(md_path, caps.to_markdown(doc, committed_md))
    out.print(f"wrote {json_path} and {md_path}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from pathlib import Path

    from looplab.records import results, summary
    from looplab.run import harness, interrupt, matrix
    from looplab.views import render, report

    runners, cases = _select(args, None)
    jobs = matrix.default_jobs() if args.jobs is None else args.jobs  # both counts checked by the parser
    if args.estimate:
        runners, isolated = _environments(args, runners)
        return _estimate(args, runners, cases, jobs, isolated)
    choice = harness.ModelChoice(args.model, args.base_url, args.api, args.price, args.retries, args.rpm)
    choice.check_cases(cases)
    choice.check_key()
    runners = _runners_taking(choice, runners)
    resume_path = Path(args.resume) if args.resume else None
    # Read before anything runs: a file that cannot be resumed is refused now, not after the matrix.
    earlier = results.read_for_resume(resume_path, cases) if resume_path else None
    json_path = Path(args.json) if args.json else resume_path  # --resume alone writes back to its file
    _otel_ready(args.otel)
    # Now, not after the whole matrix ran: a target that is not a regular file, a folder that cannot be made.
    _ready_to_write("--json" if args.json else "--resume", str(json_path) if json_path else None)
    _ready_to_write("--html", args.html)
    runners, isolated = _environments(args, runners)  # last: the inputs above are checked before anything is built
    done_before = results.finished(earlier) if earlier else set()

    def wanted(runner: str, case: str, repeat: int) -> bool:
        key = results.CellKey(runner, case, repeat, args.model, args.api)
        in_shard = args.shard is None or results.shard_of(key, args.shard[1], runners) == args.shard[0]
        return in_shard and key not in done_before

    planned = matrix.plan(runners, cases, args.repeat, wanted)
    total = len(planned)
    finished: list[harness.RunOutcome] = []

    def document(outcomes: list[harness.RunOutcome], incomplete: str | None = None) -> results.Document:
        doc = results.build(
            outcomes, model=args.model, api=args.api, runners=runners, cases=cases, incomplete=incomplete
        )
        if earlier is None:
            return doc
        # The cells run again (they had no result) replace their old records; the rest are kept as they were.
        rerun = {c.key for c in doc.cells}
        merged = results.merge([(str(resume_path), results.without(earlier, rerun)), ("this run", doc)])
        merged.incomplete = incomplete  # the old file's interruption is what this run finished
        return merged

    def save(stop: interrupt.Interrupted) -> str | None:
        if json_path is None and not args.otel:
            return None
        doc = document(finished, stop.note(len(finished), total))
        if json_path is not None:
            results.write(doc, json_path)
        if args.otel:
            _write_otel(args.otel, doc, announce=False)
        return ", ".join(str(p) for p in (json_path, args.otel) if p)

    starting = _starting(total, runners, jobs, args.concurrency, isolated)
    with interrupt.keep_finished(save):
        with harness.endpoint(choice) as where, render.matrix_progress(total, starting) as advance:

            def on_done(outcome: harness.RunOutcome) -> None:
                finished.append(outcome)
                advance(outcome)

            outcomes = matrix.run_matrix(
                runners,
                cases,
                where,
                repeat=args.repeat,
                on_done=on_done,
                jobs=jobs,
                concurrency=args.concurrency,
                select=wanted,
                isolated=isolated,
                tools=args.tools,
            )
    doc = document(outcomes)
    cells = [summary.Cell.model_validate(c.model_dump()) for c in doc.cells]
    render.matrix_table(cells, runners, [c.id for c in cases])
    render.runner_summary(summary.RunnerSummary.model_validate(s) for s in doc.summary)
    report.print_headline(doc)
    if json_path:
        results.write(doc, json_path)
        render.console().print(f"JSON: {json_path}")
    if args.html:
        report.write_html(doc, Path(args.html), source="looplab eval")
        render.console().print(f"HTML: {args.html}")
    if args.otel:
        _write_otel(args.otel, doc)
    if earlier is not None or args.shard:
        skipped = len(matrix.plan(runners, cases, args.repeat)) - total
        why = " or ".join(
            ([f"in another shard than {args.shard[0]}/{args.shard[1]}"] if args.shard else [])
            + ([f"already in {args.resume}"] if earlier is not None else [])
        )
        render.console().print(f"ran {total} of the matrix's cells; {skipped} were {why}")
    return exit_code(cells)


def _estimate(args: argparse.Namespace, runners: list[str], cases: list, jobs: int, isolated: Any) -> int:
    """`eval --estimate`: the matrix against the scripted model, priced at the named model's rates."""
    from looplab.adapters.contract.errors import LooplabError
    from looplab.measure import estimate
    from looplab.views import render

    if args.model == "scripted":
        raise LooplabError("--estimate needs --model PROVIDER:NAME: the model whose price the tokens are costed at")
    found = estimate.estimate(cases, runners, args.model, args.price, jobs=jobs, isolated=isolated)
    out = render.console()
    out.print(estimate.render(found, width=out.width), highlight=False, markup=False)
    return 0


def _merge(args: argparse.Namespace) -> int:
    from pathlib import Path

    from looplab.adapters.contract.errors import LooplabError
    from looplab.records import results
    from looplab.views import render, report

    if not args.output and not args.html:
        raise LooplabError("merge needs -o PATH (the merged results) and/or --html PATH (its report)")
    _ready_to_write("-o", args.output)
    _ready_to_write("--html", args.html)
    doc = results.merge_files([Path(p) for p in args.results])
    if args.output:
        results.write(doc, Path(args.output))
    if args.html:
        report.write_html(doc, Path(args.html), source=", ".join(args.results))
    environments = len(doc.environments)
    render.console().print(
        f"merged {len(args.results)} documents: {len(doc.cells)} cells, {len(doc.results)} results, "
        f"{environments} environment{'s' * (environments != 1)}"
        + (f"; incomplete: {doc.incomplete}" if doc.incomplete else "")
    )
    for target in (args.output, args.html):
        if target:
            render.console().print(f"wrote {target}")
    return 0


def _report_bench_parsers(sub: argparse._SubParsersAction) -> None:
    """The `report` and `bench` subcommands."""
    rep = sub.add_parser("report", help="the side-by-side HTML report from a results JSON (eval, run or merge output)")
    rep.add_argument(
        "results",
        metavar="RESULTS.json",
        help="written by `looplab eval --json`, `run` (results.json in its --out) or `merge`",
    )
    rep.add_argument("-o", "--output", metavar="PATH", help="the HTML file (default: RESULTS with .html)")

    merge = sub.add_parser("merge", help="merge results documents (shards, runs from other machines) into one")
    merge.add_argument(
        "results",
        nargs="+",
        metavar="RESULTS.json",
        help="written by `looplab eval --json`, `run` (results.json in its --out) or `merge`",
    )
    merge.add_argument("-o", "--output", metavar="PATH", help="the merged results document")
    merge.add_argument("--html", metavar="PATH", help="also write the merged report")

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
        type=_levels,
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
        type=_positive_int,
        metavar="N",
        help="instead: the whole matrix in one process, then as N shard processes at once plus `merge`",
    )


def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from looplab.views import render, report

    source = Path(args.results)
    doc = report.read_document(source)  # a file that is not one, or holds no runs: one line naming it
    out_path = Path(args.output) if args.output else source.with_suffix(".html")
    out = report.write_html(doc, out_path, source=str(source))  # the target checked before the charts are drawn
    report.print_headline(doc)
    render.console().print(f"HTML: {out}")
    return 0


def _bench(args: argparse.Namespace) -> int:

    from looplab.adapters.contract import files
    from looplab.adapters.contract.errors import LooplabError
    from looplab.measure import bench

    _ready_to_write("--json", args.json)
    if args.repeat < 1 or args.import_repeat < 1:
        raise LooplabError("--repeat and --import-repeat take a whole number of 1 or more")
    if args.concurrency:
        return _bench_concurrency(args)
    if args.isolation or args.shards:
        return _bench_matrix(args)
    runners, [case] = _select(argparse.Namespace(runner=args.runner, case=[args.case or "vip-compound"]), None)
    result = bench.run_bench(runners, case, repeat=args.repeat, import_repeat=args.import_repeat)
    bench.print_tables(result)
    if args.markdown:
        print(bench.markdown(result))
    if args.json:
        files.write_text(args.json, result.model_dump_json(indent=2) + "\n")
    return 0


def _bench_matrix(args: argparse.Namespace) -> int:
    from looplab.measure import bench_matrix
    from looplab.views import render

    runners, _ = _select(argparse.Namespace(runner=args.runner, case=None), None)
    if args.isolation:
        render.markdown_lines(bench_matrix.isolation_table(bench_matrix.isolation(runners)))
    if args.shards:
        render.markdown_lines(bench_matrix.shard_table(bench_matrix.shards(args.shards, args.runner or ())))
    return 0


def _bench_concurrency(args: argparse.Namespace) -> int:
    import json

    from looplab.adapters.contract import files
    from looplab.measure import bench_concurrency
    from looplab.run import matrix
    from looplab.views import render

    named = [args.case] if args.case else None  # the whole matrix unless a case was named
    runners, cases = _select(argparse.Namespace(runner=args.runner, case=named), None)
    rows = bench_concurrency.measure(runners, cases, args.concurrency, jobs=matrix.default_jobs())
    render.markdown_lines(bench_concurrency.table(rows))
    if args.json:
        files.write_text(args.json, json.dumps([r.model_dump() for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
