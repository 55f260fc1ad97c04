"""Shared fixtures, and the suite's two tiers.

`pytest` runs the fast tier: tests marked `full` are left out, and Hypothesis runs the small `fast` profile.
`pytest --full` runs every test with the `full` profile (CI does, in parallel: `.ci/run`). The environment variable
HYPOTHESIS_PROFILE, or Hypothesis's own `--hypothesis-profile`, picks another profile.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from looplab.scenarios.cases import load_cases
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Guard, Workspace

#: The conformance checks, which a package shipping its own runner runs too (`tests/testing/test_conformance.py`).
pytest_plugins = ["looplab.testing.conformance"]

FIXTURE_REPO = load_cases()["vip-compound"].repo_path
TASK = load_cases()["vip-compound"].task
SYSTEM_PROMPT = load_cases()["vip-compound"].system_prompt


@pytest.fixture
def workspace() -> Iterator[Workspace]:
    with Workspace(FIXTURE_REPO) as ws:
        yield ws


@pytest.fixture
def guard(workspace: Workspace) -> Guard:
    return Guard(workspace)


@pytest.fixture(scope="session")
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def fixture_repo() -> Path:
    return FIXTURE_REPO


# --- the tiers ------------------------------------------------------------------------------------------------

try:
    from hypothesis import settings
except ImportError:  # a runner environment runs some of these tests (test_own_environments.py) without Hypothesis
    settings = None
else:
    #: Examples per Hypothesis test in each tier. A test whose examples are costly (each starts a process, say) or
    #: that needs more of them to mean anything scales from the profile (`tests.tiers.scaled_examples`) and says why.
    settings.register_profile("fast", max_examples=10)
    settings.register_profile("full", max_examples=50)


FULL_MARK = "full"
FULL_OPTION = "--full"
_LEFT_OUT = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--full`: run the tests marked `full` too, with the full Hypothesis profile."""
    parser.addoption(
        FULL_OPTION,
        action="store_true",
        default=False,
        help="run the full suite: also the tests marked 'full' (every runner through every case, runner "
        "environments, npm installs, packaging, the browser, the workflow), with the 'full' Hypothesis profile",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Registers the `full` marker and loads the tier's Hypothesis profile (before any test module is imported)."""
    config.addinivalue_line("markers", f"{FULL_MARK}: runs only in the full tier (`pytest {FULL_OPTION}`), as CI does")
    full = config.getoption(FULL_OPTION)
    if not full and config.getoption("--looplab-conformance") is None:
        config.option.looplab_conformance = "contract"  # the fast tier: the contract, on each runner's first API
    if settings is not None:
        settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("full" if full else "fast"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The fast tier: deselects the tests marked `full` (pytest counts them as deselected)."""
    if config.getoption(FULL_OPTION):
        return
    left_out = [item for item in items if item.get_closest_marker(FULL_MARK)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not item.get_closest_marker(FULL_MARK)]
    config.stash[_LEFT_OUT] = config.stash.get(_LEFT_OUT, 0) + len(left_out)


def pytest_report_header(config: pytest.Config) -> str:
    """Which tier runs, and which Hypothesis profile."""
    profile = settings.get_current_profile_name() if settings is not None else "none: Hypothesis is not installed"
    if config.getoption(FULL_OPTION):
        return f"looplab tier: full (every test; Hypothesis profile {profile!r})"
    return (
        f"looplab tier: fast (tests marked '{FULL_MARK}' are left out: `pytest {FULL_OPTION}` runs them; "
        f"Hypothesis profile {profile!r})"
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Closes a fast-tier run with how many tests it left out and how to run them."""
    left_out = config.stash.get(_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(
            f"fast tier: {left_out} tests marked '{FULL_MARK}' were left out; `pytest {FULL_OPTION}` runs every test"
        )
