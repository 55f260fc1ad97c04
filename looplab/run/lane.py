"""A lane in a runner environment: `python -m looplab.run.lane` runs the cells it is given and reports each.

The parent (`looplab.run.isolation`) starts it with a runner environment's interpreter and writes one
JSON line to its stdin: the model endpoint (the scripted model's URLs, served by the parent), the
run options (`RunOptions.to_wire`) and the cells (`[index, runner, case id]`); then a line
`{"cancel": N, "detail": ...}` for each cell its caller cancels, until it closes stdin. The lane answers on its
stdout, one JSON line `{"i": N, "outcome": {...}}` per cell as each ends, and nothing else: whatever a framework
prints goes to stderr, so it cannot break a line. It never raises for a cell: a failure is that cell's outcome.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
from typing import Any

from looplab.adapters.boundary import pacing
from looplab.adapters.contract.cancel import Cancellation
from looplab.adapters.contract.pricing import Pricing
from looplab.adapters.contract.result import RunResult
from looplab.records.environment import Environment, current_environment
from looplab.records.outcome import RunOutcome
from looplab.run.harness import Endpoint, ModelChoice
from looplab.run.interrupt import worker_signals
from looplab.run.options import RunOptions
from looplab.scenarios.cases import Case, CheckResult, case_from_wire, case_to_wire


def encode_job(where: Endpoint, cells: list[tuple[int, str, Case]], concurrency: int, options: RunOptions) -> str:
    """The one line a lane reads: where the model is, what to run (each case whole: a team's suite is not in the
    lane's looplab), how many at once."""
    choice = dataclasses.asdict(where.choice)
    sent = [[i, runner, case_to_wire(case)] for i, runner, case in cells]
    job = {"choice": choice, "urls": where.scripted_urls, "cells": sent, "concurrency": concurrency}
    return json.dumps({**job, "options": options.to_wire()}) + "\n"


def encode_cancel(i: int, detail: str) -> str:
    """The line that cancels cell `i` (its index in the job)."""
    return json.dumps({"cancel": i, "detail": detail}) + "\n"


def _read_cancels(switches: dict[int, Cancellation], lock: threading.Lock) -> None:
    """The parent's cancel lines, until it closes stdin: each cancels its cell, before or while it runs."""
    for line in sys.stdin:
        try:
            event = json.loads(line)
            i, detail = int(event["cancel"]), str(event["detail"])
        except (ValueError, KeyError, TypeError):  # not a cancel line
            continue
        with lock:
            switch = switches.setdefault(i, Cancellation())
        switch.cancel(detail)


def decode_job(line: str) -> tuple[Endpoint, list[tuple[int, str, Case]], int, RunOptions]:
    job = json.loads(line)
    choice = dict(job["choice"])
    if choice.get("pricing") is not None:
        choice["pricing"] = Pricing(**choice["pricing"])
    where = Endpoint(ModelChoice(**choice), job["urls"])
    cells = [(int(i), str(runner), case_from_wire(case)) for i, runner, case in job["cells"]]
    return where, cells, int(job["concurrency"]), RunOptions.from_wire(job["options"])


def encode_outcome(outcome: RunOutcome) -> dict[str, Any]:
    return {
        "runner": outcome.runner,
        "case": outcome.case,
        "result": None if outcome.result is None else _whole(outcome.result),
        "checks": [c.model_dump(mode="json") for c in outcome.checks],
        "error": outcome.error,
        "environment": current_environment().model_dump(mode="json"),
    }


def _whole(result: RunResult) -> dict[str, Any]:
    """The result as JSON with each tool call's full text, which a document leaves out (only its preview)."""
    data = result.model_dump(mode="json")
    trace = data["trace"]
    pairs = [(d["tool_calls"], s.tool_calls) for d, s in zip(trace["steps"], result.trace.steps, strict=True)]
    pairs.append((trace["orphan_tool_calls"], result.trace.orphan_tool_calls))
    for dumped, records in pairs:
        for entry, record in zip(dumped, records, strict=True):
            entry["result"] = record.result
    return data


def decode_outcome(data: dict[str, Any]) -> RunOutcome:
    result = None if data.get("result") is None else RunResult.model_validate(data["result"])
    checks = [CheckResult.model_validate(c) for c in data.get("checks") or []]
    outcome = RunOutcome(data["runner"], data["case"], result, checks, data.get("error"))
    if data.get("environment") is not None:
        outcome.environment = Environment.model_validate(data["environment"])
    return outcome


def main() -> None:
    from looplab.run import schedule

    worker_signals()
    # The events get the real stdout; fd 1 becomes stderr, for whatever else prints.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    where, cells, concurrency, options = decode_job(sys.stdin.readline())
    pacing.install(pacing.Pacer(where.choice.rpm))
    plan = [(runner, case) for _, runner, case in cells]
    lock = threading.Lock()
    switches: dict[int, Cancellation] = {}
    threading.Thread(target=_read_cancels, args=(switches, lock), name="looplab-lane-cancels", daemon=True).start()

    def cancel_of(k: int) -> Cancellation:
        with lock:
            return switches.setdefault(cells[k][0], Cancellation())

    def done(i: int, outcome: RunOutcome) -> None:
        line = json.dumps({"i": cells[i][0], "outcome": encode_outcome(outcome)})
        with lock:
            out.write(line + "\n")
            out.flush()

    schedule.Here(concurrency).run(plan, where, options, done, cancel_of)


if __name__ == "__main__":
    main()
