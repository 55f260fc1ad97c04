"""Runners that cannot share this environment pass the same tests in a runner environment of their own.

CrewAI, LlamaIndex and Microsoft Agent Framework pin SDK versions the other runners cannot use, so `looplab[all]`
leaves them out (their declarations' `in_all`). Each one's runner environment (looplab's requirements plus its
extra, created on first use and cached) runs the conformance tests, every case (a team's suite's too) and the
caps-code check for that runner alone, with looplab imported from this tree, as `eval --isolate` runs its cells.
"""

from __future__ import annotations

import os
import re

import pytest

from looplab.adapters import registry
from looplab.adapters.boundary.processes import run_bounded
from looplab.run.environments import ensure, source_root, spec_for
from tests.paths import REPO
from tests.runs import RACES

ROOT = REPO
OWN_ENVIRONMENT = [name for name, info in registry.RUNNERS.items() if info.by_default and not info.in_all]
#: Creating an environment from PyPI and running some 60 tests through one framework.
BOUND_S = 1800.0
SUITES = (
    "tests/testing/test_conformance.py",
    "tests/scenarios/test_cases.py",
    "tests/scenarios/test_team_cases.py",
    "tests/measure/test_caps.py",
    "tests/runners/test_delegation.py",
    "tests/boundary/test_streaming.py",
)


def test_the_runners_left_out_of_all_are_the_ones_whose_extras_conflict() -> None:
    assert OWN_ENVIRONMENT == ["crewai", "llamaindex", "ms_agent_framework"]
    for name in OWN_ENVIRONMENT:
        assert registry.RUNNERS[name].extra not in _all_extras()


@pytest.mark.full  # builds a runner environment
@pytest.mark.parametrize("runner", OWN_ENVIRONMENT)
def test_a_runner_in_its_own_environment_passes_conformance_every_case_and_the_caps_check(runner: str) -> None:
    env = ensure(spec_for(runner))
    # looplab from this process's (`source_root`), the tests from this tree; `append`: pytest puts the tree's
    # folder after them, where its `looplab/` (without what the build places under it) is not found first.
    path = os.pathsep.join([str(source_root()), str(ROOT)])
    child = env.child_env() | {"LOOPLAB_RUNNERS": runner, "PYTHONPATH": path}
    command = [str(env.python), "-m", "pytest", *SUITES, "--full", "-q", "-p", "no:cacheprovider"]  # every case
    command += ["--import-mode=append", "-k", f"{runner} or marks_the_code_that_sets_its_cap"]
    code, lines = run_bounded(command, child, ROOT, BOUND_S)
    summary = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed)", line)), "")
    tail = "\n".join(lines[-30:])
    # Everything selected passed: nothing failed or errored, and nothing was skipped but its cells whose outcome
    # the framework leaves to thread timing (`RACES`, skipped by the case matrix, the delegation matrix and the
    # streamed-or-whole comparison).
    raced = 3 * sum(r == runner for r, _ in RACES)
    skipped = f", {raced} skipped" if raced else ""
    assert code == 0 and re.fullmatch(rf"=* ?\d+ passed{skipped}, \d+ deselected in .*", summary.strip()), tail
    passed = int(re.search(r"(\d+) passed", summary)[1])  # type: ignore[index]
    assert passed >= 13 + 2 + 20 + 1, tail  # every case, the team's two, the conformance tests (20 and more), caps


def _all_extras() -> set[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (all_line,) = project["optional-dependencies"]["all"]
    return set(re.search(r"\[(.*)\]", all_line)[1].split(","))  # type: ignore[index]
