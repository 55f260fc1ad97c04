"""The `looplab` command. Imports stay inside the subcommands so `--help` loads no framework."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

API_CHOICES = ("chat", "responses", "messages")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="looplab",
        description="Run one ReAct investigation through several agent runners and compare their loops.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run cases through runners and print them side by side")
    run.add_argument(
        "--runner", action="append", metavar="R", help="runner to use (repeatable; default: every installed one)"
    )
    run.add_argument("--case", action="append", metavar="C", help="case id (repeatable; default: vip-compound)")
    run.add_argument(
        "--model",
        default="scripted",
        metavar="PROVIDER:NAME",
        help="'scripted' (default, offline) or e.g. openai:gpt-4.1, anthropic:claude-sonnet-4-5",
    )
    run.add_argument("--base-url", metavar="URL", help="send the provider's requests to this compatible endpoint")
    run.add_argument("--api", choices=API_CHOICES, help="wire API, where a runner speaks several")
    run.add_argument("--max-steps", type=int, metavar="N", help="override the case's max_steps (model calls)")
    run.add_argument("--json", metavar="PATH", help="also write the RunResults as a JSON list to PATH")
    run.add_argument(
        "--out", metavar="DIR", help="folder for results.json and traces.jsonl (default: looplab-runs/<time>)"
    )
    run.add_argument("--quiet", action="store_true", help="print only the summary table")

    ev = sub.add_parser("eval", help="the runner x case matrix: checks, completion rates, calls and cost")
    ev.add_argument("--runner", action="append", metavar="R", help="runner (repeatable; default: every installed one)")
    ev.add_argument("--case", action="append", metavar="C", help="case id (repeatable; default: every case)")
    ev.add_argument("--repeat", type=int, default=1, metavar="K", help="run every cell K times (default 1)")
    _model_options(ev)
    ev.add_argument("--json", metavar="PATH", help="write the summary, the cells and every RunResult as JSON")

    sub.add_parser("runners", help="list runners, whether each is installed, and the extra that enables it")
    sub.add_parser("cases", help="list the cases")

    serve = sub.add_parser("serve-model", help="serve the scripted model over HTTP for other tools")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument(
        "--policy",
        default="investigator",
        metavar="P",
        help="investigator (default), never-stops, or answers-on:K (probes for iteration caps)",
    )
    return parser


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default="scripted",
        metavar="PROVIDER:NAME",
        help="'scripted' (default, offline) or e.g. openai:gpt-4.1, anthropic:claude-sonnet-4-5",
    )
    parser.add_argument("--base-url", metavar="URL", help="send the provider's requests to this compatible endpoint")
    parser.add_argument("--api", choices=API_CHOICES, help="wire API, where a runner speaks several")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 0
    from adapters.base import LooplabError

    try:
        commands = {"run": _run, "eval": _eval, "runners": _runners, "cases": _cases, "serve-model": _serve}
        return commands[args.command](args)
    except LooplabError as exc:
        print(f"looplab: {exc}", file=sys.stderr)
        return 2


def _runners(args: argparse.Namespace) -> int:
    from adapters import RUNNERS
    from looplab.render import runners_table

    runners_table(RUNNERS.values())
    return 0


def _cases(args: argparse.Namespace) -> int:
    from looplab.render import cases_table
    from scenarios.cases import load_cases

    cases_table(load_cases().values())
    return 0


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from adapters.base import LooplabError
    from scenarios.scripted.probes import policy_named
    from scenarios.scripted.server import create_app

    try:
        policy = policy_named(args.policy)
    except ValueError as exc:
        raise LooplabError(str(exc)) from None
    url = f"http://{args.host}:{args.port}"
    print(f"scripted model ({args.policy}) on {url}: OpenAI base_url {url}/v1, Anthropic base_url {url}", flush=True)
    uvicorn.run(create_app(policy), host=args.host, port=args.port, log_level="warning")
    return 0


def _select(args: argparse.Namespace, default_cases: list[str] | None) -> tuple[list[str], list]:
    """The runners and cases asked for; unknown names are one-line errors listing the known ones."""
    from adapters import RUNNERS
    from adapters.base import LooplabError
    from scenarios.cases import load_cases

    cases = load_cases()
    wanted_cases = args.case or default_cases or list(cases)
    unknown = [c for c in wanted_cases if c not in cases]
    if unknown:
        raise LooplabError(f"unknown case {unknown[0]!r}; known cases: {', '.join(cases)}")
    unknown = [r for r in args.runner or [] if r not in RUNNERS]
    if unknown:
        raise LooplabError(f"unknown runner {unknown[0]!r}; known runners: {', '.join(RUNNERS)}")
    runners = args.runner or [name for name, info in RUNNERS.items() if info.installed()]
    if not runners:
        raise LooplabError("no runner is installed: pip install 'looplab[all]'")
    return runners, [cases[c] for c in wanted_cases]


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from looplab import harness, render

    runners, cases = _select(args, ["vip-compound"])
    choice = harness.ModelChoice(args.model, args.base_url, args.api)

    outcomes = []
    with harness.endpoint(choice) as where:
        for case in cases:
            for runner in runners:
                outcome = harness.run_one(runner, case, where, args.max_steps)
                if not args.quiet:
                    render.run_detail(outcome)
                outcomes.append(outcome)
    render.summary_table(outcomes)
    results_path, traces_path = harness.write_outputs(
        outcomes, Path(args.out) if args.out else harness.default_out_dir()
    )
    if args.json:
        harness.write_results([o.result for o in outcomes if o.result], Path(args.json))
        render.console().print(f"JSON: {args.json}")
    render.console().print(f"results: {results_path}\ntraces:  {traces_path}")
    return 0 if all(o.result is not None for o in outcomes) else 1


def _eval(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from adapters.base import LooplabError
    from looplab import evaluation, harness, render

    runners, cases = _select(args, None)
    if args.repeat < 1:
        raise LooplabError("--repeat takes a whole number of 1 or more")
    choice = harness.ModelChoice(args.model, args.base_url, args.api)
    with harness.endpoint(choice) as where, render.matrix_progress(len(runners) * len(cases) * args.repeat) as advance:
        outcomes = evaluation.run_matrix(runners, cases, where, repeat=args.repeat, on_done=advance)
    cells, summary = evaluation.cells(outcomes), evaluation.summarize(outcomes)
    render.matrix_table(cells, runners, [c.id for c in cases])
    render.runner_summary(summary)
    if args.json:
        doc = {
            "summary": [s.model_dump() for s in summary],
            "cells": [c.model_dump() for c in cells],
            "results": [o.result.model_dump(mode="json") for o in outcomes if o.result],
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        render.console().print(f"JSON: {args.json}")
    return 0 if all(c.passed for c in cells) else 1


if __name__ == "__main__":
    raise SystemExit(main())
