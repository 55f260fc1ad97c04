"""The runner x case matrix: which cells run where, and running them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from looplab.adapters import registry
from looplab.adapters.contract.cancel import Cancellation
from looplab.adapters.contract.errors import LooplabError
from looplab.records import results
from looplab.records.document import Document
from looplab.records.outcome import RunOutcome
from looplab.run import harness, isolation, schedule
from looplab.run.environments import RunnerEnv
from looplab.run.handle import Cancels
from looplab.run.harness import Endpoint
from looplab.run.options import RunOptions
from looplab.scenarios.cases import Case, load_cases

__all__ = ["applies", "default_jobs", "plan", "races", "run_matrix", "run_scripted"]


def default_jobs() -> int:
    """Worker processes for the matrix: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def run_matrix(
    runners: Sequence[str],
    cases: Sequence[Case],
    where: Endpoint,
    *,
    repeat: int = 1,
    on_done: Callable[[RunOutcome], None] | None = None,
    jobs: int = 1,
    concurrency: int | None = None,
    select: Callable[[str, str, int], bool] | None = None,
    isolated: Callable[[str], RunnerEnv] | None = None,
    cancels: Cancels | None = None,
    options: RunOptions | None = None,
    **given: Any,
) -> list[RunOutcome]:
    """Every runner on every case, `repeat` times; each run independent of the others, the `k`th repeat of a case
    seeded `<case id>#<k>` (`Case.for_repeat`).

    Up to `concurrency` cells are in flight at once (default: one per job), on threads: in this
    process when `jobs` is 1, else spread over `jobs` worker processes (see `looplab.run.schedule`).
    The model server stays in this process; workers reach it through `where`. The outcomes come
    back in plan order whatever the concurrency; `on_done` is called here, as each cell finishes.
    `select(runner, case_id, repeat)` keeps a slice of the matrix (a shard, the cells `--resume` lacks).
    `isolated(runner)` gives each runner's environment: its cells then run there, in lanes of its
    interpreter, `jobs` lanes at a time (see `looplab.run.isolation`). `cancels` cancels a cell from any thread,
    before or while it runs, wherever it runs: it ends as `cancelled` and the others go on. `options`
    (`RunOptions`, any field of which may be given by name instead) are how every cell runs.
    """
    options = RunOptions.of(options, **given)
    planned = plan(runners, cases, repeat, select)
    concurrency = max(1, jobs if concurrency is None else concurrency)
    # Each repeat runs a copy of its case seeded by the repeat (`Case.for_repeat`): a case that plays by chance rolls
    # its own dice each repeat, the same ones every time. The outcomes and the document keep the cases as given.
    cells_here = [(runner, case.for_repeat(k)) for runner, case, k in planned]
    slots: list[RunOutcome | None] = [None] * len(planned)

    def done(i: int, outcome: RunOutcome) -> None:
        # The repeat index comes from the plan, not from counting: a slice of the matrix keeps the full one's.
        outcome.repeat = planned[i][2]
        slots[i] = outcome
        if on_done:
            on_done(outcome)

    def switch(i: int) -> Cancellation | None:
        runner, case, k = planned[i]
        return cancels.of(runner, case.id, k) if cancels is not None else None

    def run(scheduler: schedule.Scheduler, cells: list[int]) -> None:
        cancel_of = (lambda k: switch(cells[k])) if cancels is not None else None
        plan_ = [cells_here[i] for i in cells]
        scheduler.run(plan_, where, options, lambda k, outcome: done(cells[k], outcome), cancel_of)

    def shared_by(cells: list[int]) -> schedule.Scheduler:
        if jobs <= 1 or len(cells) <= 1 or concurrency <= 1:
            return schedule.Here(concurrency)
        return schedule.Lanes(jobs, concurrency)

    if isolated is None:
        everyone = list(range(len(cells_here)))
        run(shared_by(everyone), everyone)
        return [o for o in slots if o is not None]
    # The runners that need no environment of their own share this one's worker processes and their one queue (a
    # lane each would start an interpreter and import a framework per runner); the others run in lanes of their
    # environments, first.
    apart = [i for i, (label, _) in enumerate(cells_here) if not _runs_here(label, isolated)]
    kept = set(apart)
    shared = [i for i in range(len(cells_here)) if i not in kept]
    if apart:
        run(isolation.Isolated(isolated, jobs, concurrency), apart)
    if shared:
        run(shared_by(shared), shared)
    return [o for o in slots if o is not None]


def _runs_here(label: str, env_of: Callable[[str], Any]) -> bool:
    """Whether `label`'s environment is this process's own (an environment that could not be made is not)."""
    try:
        return bool(env_of(label).here)
    except LooplabError:
        return False


def plan(
    runners: Sequence[str],
    cases: Sequence[Case],
    repeat: int = 1,
    select: Callable[[str, str, int], bool] | None = None,
) -> list[tuple[str, Case, int]]:
    """The matrix's cells in order, `(runner, case, repeat index)`, less those `select` leaves out and those of a
    case that does not apply to the runner (a delegation case, for a framework that cannot delegate)."""
    return [
        (runner, case, k)
        for k in range(1, repeat + 1)
        for case in cases
        for runner in runners
        if (select is None or select(runner, case.id, k)) and applies(runner, case)
    ]


def applies(runner: str, case: Case) -> bool:
    """Whether `case` runs through `runner` (a label such as `langgraph@1.0.0` names its runner's declaration)."""
    info = registry.RUNNERS.get(runner.partition("@")[0])
    return info is None or case.runs_on(info)


def races(runners: Iterable[str], cases: Iterable[Case]) -> dict[tuple[str, str], str]:
    """What thread timing decides in each `(runner label, case id)` where its framework leaves it to timing (the
    runner's declared `delegation_races` for the case's shape), in one line."""
    found = {}
    for runner in runners:
        info = registry.RUNNERS.get(runner.partition("@")[0])
        for case in cases if info is not None else ():
            if why := case.race_on(info):
                found[runner, case.id] = why
    return found


def run_scripted(runners: Sequence[str], cases: Sequence[Case | str], *, jobs: int) -> Document:
    """`cases` (a case, or a case id of looplab's own suite, one run only when named included) run through `runners`
    against the scripted model, as `looplab eval` runs them, as a document."""
    cases = [load_cases(every=True)[c] if isinstance(c, str) else c for c in cases]
    with harness.endpoint(harness.ModelChoice()) as where:
        outcomes = run_matrix(list(runners), cases, where, jobs=jobs)
    return results.build(outcomes, model=harness.SCRIPTED, api=None, runners=list(runners), cases=cases)
