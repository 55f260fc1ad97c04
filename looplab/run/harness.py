"""Runs cases through runners: a fresh workspace and Guard per run, one model endpoint for all."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from looplab.adapters import registry
from looplab.adapters.boundary import pacing
from looplab.adapters.boundary.budget import check_priced
from looplab.adapters.contract import files
from looplab.adapters.contract.cancel import Cancellation
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import (
    DEFAULT_RETRIES,
    PROVIDER_OF_API,
    Api,
    ModelSpec,
    check_api,
    parse_model,
)
from looplab.adapters.contract.pricing import Pricing, price_of
from looplab.adapters.session import Runner
from looplab.records import results
from looplab.records.document import Document
from looplab.records.outcome import RunOutcome
from looplab.run.options import RunOptions
from looplab.scenarios.cases import Case, ScriptedModel, check
from looplab.shared_tools import Approver, Guard, Workspace, run_clock
from looplab.shared_tools.live import WAIT_SLICE_S

__all__ = [
    "Endpoint",
    "ModelChoice",
    "RUNS_DIR",
    "SCRIPTED",
    "case_guard",
    "default_out_dir",
    "endpoint",
    "newest_results",
    "run_one",
    "write_outputs",
]

SCRIPTED = "scripted"
#: How long a cancelled run may take to end before it is abandoned as hung (it ends within a second: every wait
#: of a run looks at its cancel switch each `WAIT_SLICE_S`; a framework that swallows the stop is what is left).
CANCEL_GRACE_S = 5.0


@dataclass(frozen=True)
class ModelChoice:
    """What the user asked for on the command line: `scripted` or `provider:name`."""

    model: str = SCRIPTED
    base_url: str | None = None
    api: Api | None = None
    #: `--price`: overrides the table's price (and prices a model the table does not know).
    pricing: Pricing | None = None
    retries: int = DEFAULT_RETRIES
    #: `--rpm`: at most this many model requests a minute, over every run in flight.
    rpm: int | None = None
    #: `--stream on|off`: streamed replies or whole ones for every runner; None: each runner's own.
    stream: bool | None = None

    def pricing_of(self, provider: str, name: str) -> Pricing | None:
        """A real model's price: `--price` if given, else the shipped table's, else None (unknown)."""
        return self.pricing or price_of(provider, name)

    def check_drivable(self, cases: Iterable[Case]) -> list[Case]:
        """The cases this model can play, in order. The scripted model cannot play a case that offers tools it
        never calls: each such case is skipped with one line on stderr (which case, why, how to run it), so the
        others still run; when every case is such, nothing would run, and that is refused before anything runs."""
        cases = list(cases)
        if self.model != SCRIPTED:
            return cases  # a real model may call any tool
        playable, why_not = [], []
        for case in cases:
            if unknown := case.tools_beyond_scripted:
                why_not.append(
                    f"case {case.id!r} offers {', '.join(unknown)}, which the scripted model does not call; "
                    "run it against a real model (--model PROVIDER:NAME)"
                )
            else:
                playable.append(case)
        if why_not and not playable:
            more = f" (and {len(why_not) - 1} more cases like it)" if len(why_not) > 1 else ""
            raise LooplabError(why_not[0] + more)
        for line in why_not:
            print(f"looplab: skipped: {line}", file=sys.stderr, flush=True)
        return playable

    def check_key(self) -> None:
        """Refuse, before anything is built or run, a real model whose provider key is not set (none is needed with
        --base-url or the scripted model)."""
        if self.model != SCRIPTED:
            provider, name = parse_model(self.model)
            ModelSpec(provider, name, self.base_url).key()  # type: ignore[arg-type]

    def check_cases(self, cases: Iterable[Case]) -> list[Case]:
        """Every check of `cases` against this choice that can fail before anything runs; the cases to run (those
        this model can play: `check_drivable`)."""
        cases = self.check_drivable(cases)
        self.check_budgets(cases)
        return cases

    def check_budgets(self, cases: Iterable[Case]) -> None:
        """Refuse, before any run, a case with a dollar budget on a model whose price is unknown."""
        if self.model == SCRIPTED:
            return  # the scripted model always has a price (its case's, or free)
        provider, name = parse_model(self.model)
        spec = ModelSpec(provider, name, pricing=self.pricing_of(provider, name))  # type: ignore[arg-type]
        for case in cases:
            try:
                check_priced(case.limits, spec)
            except LooplabError as exc:
                raise LooplabError(f"case {case.id!r}: {exc}") from None

    def __post_init__(self) -> None:
        """Refuse, before any run starts, what no runner could do with this choice."""
        if self.model == SCRIPTED:
            if self.base_url:
                raise LooplabError("--base-url needs --model PROVIDER:NAME (the scripted model runs on its own server)")
            return  # the scripted model serves every wire API
        provider, _ = parse_model(self.model)
        check_api(self.api, provider)


@dataclass
class Endpoint:
    """A resolved model endpoint; for the scripted model, the loopback server's base URLs."""

    choice: ModelChoice
    scripted_urls: dict[str, str] | None = None

    def spec_for(self, adapter: Runner, scripted: ScriptedModel | None = None) -> ModelSpec:
        """The model spec for one run; `scripted` (a case's persona and price) applies to the scripted model only."""
        choice = self.choice
        if self.scripted_urls is None:
            provider, name = parse_model(choice.model)
            pricing = choice.pricing_of(provider, name)
            return ModelSpec(
                provider, name, choice.base_url, None, choice.api, pricing, choice.retries, stream=choice.stream
            )  # type: ignore[arg-type]
        api = choice.api or adapter.apis[0]
        provider = PROVIDER_OF_API[api]
        # The scripted model is free unless told otherwise: its price is known.
        pricing = choice.pricing or Pricing()
        headers: dict[str, str] = {}
        if scripted is not None:
            # The persona is a request header, not another model: the model name stays `scripted`.
            pricing, headers = Pricing(scripted.input_per_mtok, scripted.output_per_mtok), scripted.headers
        url = self.scripted_urls[provider]
        return ModelSpec(
            provider,  # type: ignore[arg-type]
            SCRIPTED,
            url,
            "scripted",
            choice.api,
            pricing,
            choice.retries,
            headers,
            stream=choice.stream,
        )


def check_reachable(base_url: str, timeout_s: float = 5.0) -> None:
    """A one-line error, before any run, when nothing answers at `base_url`'s host and port."""
    url = urlsplit(base_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise LooplabError(f"--base-url {base_url!r} is not an http(s) URL")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=timeout_s).close()
    except OSError as exc:
        raise LooplabError(f"cannot reach --base-url {base_url}: {exc.strerror or exc}") from None


@contextmanager
def endpoint(choice: ModelChoice) -> Iterator[Endpoint]:
    """Start the scripted model server if it is the model asked for, and pace requests to it; stop both afterwards."""
    previous = pacing.current()
    pacing.install(pacing.Pacer(choice.rpm))
    try:
        with _serve(choice) as where:
            yield where
    finally:
        pacing.install(previous)


@contextmanager
def _serve(choice: ModelChoice) -> Iterator[Endpoint]:
    if choice.model != SCRIPTED:
        choice.check_key()  # a missing key fails here, once
        if choice.base_url:
            check_reachable(choice.base_url)
        yield Endpoint(choice)
        return
    from looplab.scenarios.scripted.server import ScriptedModelServer

    with ScriptedModelServer() as server:
        yield Endpoint(choice, server.base_urls)


def case_guard(
    case: Case,
    ws: Workspace,
    limits: Limits | None = None,
    approver: Approver | None = None,
    *,
    clock: Callable[[], float] | None = None,
) -> Guard:
    """The Guard a case's run gets: its tools (with its faults) over `ws`, its repetition limit.

    `clock`: the run's, started before `ws` was made: the run began at its zero (`Guard.began`), so the copy of the
    workspace counts against `max_seconds`.
    """
    guard = Guard(ws, tools=case.tool_set(), max_repeats=(limits or case.limits).max_repeats, approver=approver)
    if clock is not None:
        guard.clock, guard.began = clock, 0.0
    return guard


def run_one(
    runner: str,
    case: Case,
    where: Endpoint,
    options: RunOptions | None = None,
    *,
    cancel: Cancellation | None = None,
    **given: Any,
) -> RunOutcome:
    """Run one case through one runner. Never raises: a failure is a row, not a crash.

    `options` (`RunOptions`) say how; any of their fields may be given by name instead (`tools="mcp"`), over
    `options`. `tools="mcp"` has an in-process runner call the tools as an MCP client (`Runner.run`). `cancel` ends
    the run as `cancelled` when it is set, with its partial trace (`start` gives a handle that holds one). `sandbox`
    runs the team's code (its test command, its own tools) in a sandbox (`looplab.shared_tools.confine`;
    `--sandbox`).

    The run happens on a worker thread; one still going `grace_s` after its
    `max_seconds` (or `CANCEL_GRACE_S` after it heard its cancel) is abandoned and recorded as hung, so one runner
    that hangs cannot stall a matrix.
    """
    options = RunOptions.of(options, **given)
    tools, approver, grace_s, sandbox = options.tools, options.approver, options.grace_s, options.sandbox
    asked = {"max_steps": options.max_steps, "max_tokens": options.max_tokens}
    limits = case.limits.model_copy(update={k: v for k, v in asked.items() if v is not None})
    # The worker fills `done`, never the outcome returned: a run abandoned as hung that finishes
    # later must not change what was already reported (its workspace goes at exit, see Workspace).
    done = RunOutcome(runner, case.id)
    # Set when the runner's run starts, the first point that hears a cancel: the runner's import and the
    # workspace's copy before it cannot stop (a cold import took 10 s under load), and stay bounded by max_seconds.
    listening = threading.Event()

    def work() -> None:
        try:
            adapter = registry.load(runner)
            # The run's clock starts before its workspace is copied: a large repository's copy (and fingerprint)
            # is spent from `max_seconds`, and a copy that outlasts it ends the run with an error.
            clock = run_clock()
            repo = Workspace(case.repo_path, overlay=case.overlay_path, sandbox=sandbox, deadline_s=limits.max_seconds)
            with repo as ws:
                before = ws.fingerprint()
                guard = case_guard(case, ws, limits, approver, clock=clock)
                # `tools` and `cancel` only when asked: a test double's `run` may take neither
                over: dict[str, Any] = {"tools": tools} if tools != "in-process" else {}
                over |= {"cancel": cancel} if cancel is not None else {}
                over |= {"delegate": case.delegate.agent()} if case.delegate is not None else {}
                spec = where.spec_for(adapter, case.model)
                listening.set()
                result = adapter.run(case.stated_task, guard, limits, spec, **over, system_prompt=case.system_prompt)
                changed = ws.fingerprint() != before
        except LooplabError as exc:
            done.error = str(exc)
            return
        except BaseException as exc:  # a crash in one runner never stops the others, and never goes unrecorded:
            # a SystemExit on this thread would end it silently (no result, no error); a signal reaches the main one
            done.error = f"{type(exc).__name__}: {exc}"
            return
        result.case = case.id
        info = registry.RUNNERS.get(runner.partition("@")[0])
        one_tool = info is not None and info.one_tool_a_reply
        done.checks = check(case, result, changed, one_tool_a_reply=one_tool, scripted=where.scripted_urls is not None)
        done.result = result

    worker = threading.Thread(target=work, name=f"looplab-{runner}-{case.id}", daemon=True)
    worker.start()
    ends, cancelled = time.monotonic() + limits.max_seconds + grace_s, False
    while worker.is_alive() and time.monotonic() < ends:
        heard = cancel is not None and cancel.cancelled and listening.is_set()
        if heard and not cancelled:  # it ends within a second, or is abandoned
            ends, cancelled = min(ends, time.monotonic() + CANCEL_GRACE_S), True
        worker.join(min(WAIT_SLICE_S, max(0.0, ends - time.monotonic())))
    if worker.is_alive():
        after = "it was cancelled" if cancelled else f"max_seconds={limits.max_seconds:g}"
        hung = f"hung: still running {CANCEL_GRACE_S if cancelled else grace_s:g} s after {after}; abandoned"
        return RunOutcome(runner, case.id, error=hung)
    return done


def write_outputs(doc: Document, out_dir: Path) -> tuple[Path, Path]:
    """`results.json` (the results document) and `traces.jsonl` (one line per step) in `out_dir`."""
    results_path = results.write(doc, out_dir / "results.json")
    traces_path = out_dir / "traces.jsonl"
    with files.replacing(traces_path) as fh:  # the one rule for files looplab writes: atomic, regular files only
        for r in doc.run_results():
            for line in r.trace.jsonl():
                fh.write(json.dumps({"runner": r.runner, "case": r.case, "model": r.model, **json.loads(line)}) + "\n")
    return results_path, traces_path


#: Where runs keep their results when no folder is named: one `<time>/results.json` a run.
RUNS_DIR = Path("looplab-runs")


def default_out_dir() -> Path:
    """A new run's folder under `RUNS_DIR`, named by the time (so the names sort as the runs were made)."""
    return RUNS_DIR / datetime.now().strftime("%Y%m%d-%H%M%S")


def newest_results(root: Path = RUNS_DIR) -> Path | None:
    """The newest results document kept under `root` (`<time>/results.json`), or None when there is none. A
    folder whose run has not written its document yet is passed over."""
    found = [p for p in root.glob("*/results.json") if p.is_file()] if root.is_dir() else []
    # The newest by when it was written (a folder named otherwise by `--out` too); then by the time in its name.
    return max(found, key=lambda p: (p.stat().st_mtime, p.parent.name), default=None)
