"""The options several commands share, and the argparse types that check their values.

`--model` and its company, `--isolate`/`--versions`/`--tools`, `--cases`, `--otel` with its check and
its writer, and `--sandbox` with its check. Only the standard library is imported here: building the parser
loads no pydantic.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from looplab.cli._inputs import ready_to_write

API_CHOICES = ("chat", "responses", "messages", "gemini")

#: Which runners a command takes when none is named (`looplab.cli._inputs.select`).
EVERY_RUNNER = "default: every installed one but external; with --isolate, also those in their own environments"


def at_least(minimum: int) -> Callable[[str], int]:
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


positive_int = at_least(1)


def shard(text: str) -> tuple[int, int]:
    """An argparse type: `I/N`, slice I of N (1 <= I <= N)."""
    index, _, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = 0, 0
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"expected I/N with whole numbers 1 <= I <= N, got {text!r}")
    return i, n


def width(text: str) -> float:
    """An argparse type: an interval's width as a fraction of 1, `0.3` or `30%` (more than 0, at most 1)."""
    number = text.strip()
    percent = number.endswith("%")
    try:
        value = float(number.removesuffix("%")) / (100 if percent else 1)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1:  # nan and inf too
        raise argparse.ArgumentTypeError(f"expected a width above 0 and at most 1, as 0.3 or 30%, got {text!r}")
    return value


def levels(text: str) -> list[int]:
    """An argparse type: a comma-separated list of whole numbers of 1 or more (`1,32`)."""
    return [positive_int(part.strip()) for part in text.split(",")]


def price(text: str) -> object:
    """An argparse type: `IN,OUT[,CACHED]` dollars per million tokens, as a Pricing."""
    from looplab.adapters.contract.pricing import parse_price

    try:
        return parse_price(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cases_option(parser: argparse.ArgumentParser) -> None:
    """`--cases PATH` on a command that takes cases (read by `looplab.cli.sources`)."""
    parser.add_argument(
        "--cases",
        action="append",
        metavar="PATH",
        help="a case file or a suite folder (repeatable; default: `cases` in ./looplab.toml, else looplab's own suite)",
    )


def isolation_options(parser: argparse.ArgumentParser) -> None:
    """`--isolate`, `--versions` and `--tools`: where the runners run and how they reach the tools."""
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


def model_options(parser: argparse.ArgumentParser) -> None:
    """`--model` and what goes with it: the endpoint, the wire API, the price, the external runner's command,
    the request rate and the retries."""
    parser.add_argument(
        "--model",
        default="scripted",
        metavar="PROVIDER:NAME",
        help="'scripted' (default, offline) or e.g. openai:gpt-4.1, anthropic:claude-sonnet-4-5, "
        "google:gemini-2.5-flash",
    )
    parser.add_argument(
        "--base-url", metavar="URL", help="send the --model provider's requests to this compatible endpoint"
    )
    parser.add_argument(
        "--api",
        choices=API_CHOICES,
        help="wire API, where a runner speaks several: messages for anthropic models, chat or responses for openai, "
        "gemini for google",
    )
    parser.add_argument(
        "--stream",
        choices=("on", "off"),
        help="streamed model replies or whole ones, for every runner whose loop can do that one (default: each "
        "runner's own); the results keep which, so an eval of each merges into one document",
    )
    parser.add_argument(
        "--price",
        type=price,
        metavar="IN,OUT[,CACHED]",
        help="the model's dollars per million input, output (and cached input) tokens; "
        "overrides the shipped table, which prices current OpenAI, Anthropic and Gemini models",
    )
    parser.add_argument(
        "--cmd",
        metavar="'COMMAND ...'",
        help="the program --runner external runs, split like a shell line (not run by a shell), in this "
        "directory; it gets the run's contract in LOOPLAB_* variables and writes its outcome to LOOPLAB_RESULT",
    )
    parser.add_argument(
        "--rpm",
        type=positive_int,
        metavar="N",
        help="at most N model requests a minute over every run in flight (a 429's retry-after holds them all back)",
    )
    parser.add_argument(
        "--retries",
        type=at_least(0),
        default=2,  # contract.model.DEFAULT_RETRIES, not imported here: --help loads no more than it needs
        metavar="N",
        help="retries of a failed model request (5xx, 429, broken connection) in every runner's SDK (default 2)",
    )


def sandbox_option(parser: argparse.ArgumentParser) -> None:
    """`--sandbox`: the team's code (test commands, a suite's tools) runs in a bubblewrap sandbox (`sandbox_ready`)."""
    parser.add_argument(
        "--sandbox",
        action="store_true",
        help="run the suite's test commands and its own tools in a sandbox (Linux, bubblewrap): no network, "
        "everything outside the workspace read-only, a private /tmp; not a limit on CPU or memory",
    )


def sandbox_ready(wanted: bool) -> None:
    """Before anything runs: with --sandbox, this machine can make the sandbox (else a one-line error)."""
    if not wanted:
        return
    from looplab.adapters.contract.errors import LooplabError
    from looplab.shared_tools.confine import sandbox_problem

    if problem := sandbox_problem():
        raise LooplabError(f"--sandbox: {problem}")


def otel_option(parser: argparse.ArgumentParser) -> None:
    """`--otel PATH`: also write the runs as OpenTelemetry traces (`otel_ready`, then `write_otel`)."""
    parser.add_argument(
        "--otel",
        metavar="PATH",
        help="also write every run as OpenTelemetry GenAI traces to PATH (OTLP/JSON); with OTEL_EXPORTER_OTLP_ENDPOINT "
        "(or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set, send them to that collector too",
    )


def otel_ready(path: str | None) -> None:
    """Before anything runs: with --otel, the `otel` extra is installed and PATH may be written, its folder made."""
    if not path:
        return
    from looplab.views import otel

    otel.require()
    ready_to_write("--otel", path)


def write_otel(path: str, doc: Any, *, announce: bool = True, anchor: Any = None) -> None:
    """Write `doc`'s runs to `path` as OTLP/JSON, and send them to a collector if one is named.

    A collector that does not take them is a one-line warning; the file is written first either way.
    """
    from pathlib import Path

    from looplab.views import otel, terminal

    done = otel.export(doc.run_results(), Path(path), anchor=anchor, summary=doc.runner_summaries())
    if done.warning:
        print(f"looplab: warning: {done.warning}", file=sys.stderr)
    if announce:
        sent = f", sent to {done.endpoint}" if done.endpoint and not done.warning else ""
        terminal.console().print(f"OpenTelemetry: {path} ({done.spans} spans{sent})")
