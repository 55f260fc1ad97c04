"""`looplab serve-model` and `serve-tools`: the scripted model over HTTP, and a case's Guard over MCP.

Both serve another process (a runner in another language, a tool, a runner environment) until they are stopped.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from looplab.cli._inputs import case_sources, check_cases, ready_to_write
from looplab.cli._options import cases_option, sandbox_option, sandbox_ready


def _add_serve_model(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve-model", help="serve the scripted model over HTTP for other tools")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument(
        "--policy",
        default="investigator",
        metavar="P",
        help="investigator (default), never-stops, answers-on:K, ends-by-tool-on:K or delegates-to-never-stops[:K] "
        "(probes for caps)",
    )
    cases_option(serve)


def _add_serve_tools(sub: argparse._SubParsersAction) -> None:
    tools = sub.add_parser("serve-tools", help="serve a case's Guard over MCP to a runner in another process")
    cases_option(tools)
    tools.add_argument(
        "--case", metavar="C", help="whose tools (default: vip-compound, or the first case of --cases or looplab.toml)"
    )
    where = tools.add_mutually_exclusive_group()
    where.add_argument("--stdio", action="store_true", help="over stdin and stdout instead of streamable HTTP")
    where.add_argument("--port", type=int, default=0, help="the HTTP port on 127.0.0.1 (default: a free one)")
    tools.add_argument("--records", metavar="PATH", help="write the tool records here as JSON lines (default: stderr)")
    sandbox_option(tools)


def _serve_model(args: argparse.Namespace) -> int:
    import uvicorn

    from looplab.adapters.contract.errors import LooplabError
    from looplab.scenarios.scripted.probes import policy_named
    from looplab.scenarios.scripted.server import GRACEFUL_SHUTDOWN_S, create_app

    try:
        policy = policy_named(args.policy)
    except ValueError as exc:
        raise LooplabError(str(exc)) from None
    sources = case_sources(args)
    if sources and args.policy == "investigator":  # the cases the server is for: checked now, named below
        from looplab.run.harness import ModelChoice
        from looplab.scenarios.cases import load_cases

        cases = load_cases(sources, import_tools=False)  # the model needs their names, not the tools' code
        playable = ModelChoice().check_drivable(cases.values())  # the others are skipped, each in one line
        print(f"cases: {', '.join(c.id for c in playable)}", flush=True)
    url = f"http://{args.host}:{args.port}"
    print(f"scripted model ({args.policy}) on {url}: OpenAI base_url {url}/v1, Anthropic base_url {url}", flush=True)
    app = create_app(policy)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
    return 0


def _serve_tools(args: argparse.Namespace) -> int:
    """A fresh workspace of the case's repo and its Guard over MCP, until the client leaves or a signal comes."""
    import threading

    from looplab.adapters.boundary.tool_server import ToolServer, protocol_stdout, serve_stdio
    from looplab.adapters.contract import files
    from looplab.run.harness import case_guard
    from looplab.run.interrupt import keep_finished
    from looplab.scenarios.cases import load_cases
    from looplab.shared_tools import Workspace

    # Over stdio, stdout is the protocol's from here on, before a suite's tools.py is imported (it may print).
    protocol = protocol_stdout() if args.stdio else None
    sandbox_ready(args.sandbox)
    sources = case_sources(args)
    cases = load_cases(sources, sandbox=args.sandbox, every=True)
    wanted = args.case or (next(iter(cases)) if sources else "vip-compound")
    check_cases([wanted], cases, args)
    case = cases[wanted]
    ready_to_write("--records", args.records)

    def save(_: object = None) -> str:
        lines = "".join(record.model_dump_json() + "\n" for record in guard.records)
        if args.records:
            files.write_text(args.records, lines)
        else:
            sys.stderr.write(lines)
        return f"{len(guard.records)} tool record{'s' * (len(guard.records) != 1)} in {args.records or 'stderr'}"

    with Workspace(case.repo_path, overlay=case.overlay_path, sandbox=args.sandbox) as ws:
        guard = case_guard(case, ws)  # no approver: effects are denied
        with keep_finished(save):
            if args.stdio:
                serve_stdio(guard, protocol)
            else:
                with ToolServer(guard, port=args.port) as server:
                    print(server.url, server.token, sep="\n", flush=True)
                    threading.Event().wait()  # until SIGINT or SIGTERM
    save()
    return 0


#: How each command's parser is added to `looplab`'s subcommands.
PARSERS: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "serve-model": _add_serve_model,
    "serve-tools": _add_serve_tools,
}
#: What runs each command; it returns the exit code.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve-model": _serve_model,
    "serve-tools": _serve_tools,
}
