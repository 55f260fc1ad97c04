"""A team's suite in a folder outside the checkout, two repos of its own, runs through every runner; looplab's own
tests and its default suite are unaffected by it."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from looplab import cli
from looplab.adapters.runners.external import EXTERNAL_COMMAND_ENV
from looplab.cli.sources import case_sources
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.scenarios.cases import Case, load_cases
from looplab.scenarios.scripted.server import ScriptedModelServer
from tests.paths import REPO, TESTS
from tests.runs import ALL_RUNNERS
from tests.team_suite import CASES, write_team_suite
from tests.tiers import by_tier

EXAMPLE = REPO / "examples" / "stdlib_agent.py"
#: `external` runs a program of the team's own: the example agent, which speaks the same tools over MCP.
EVERY_RUNNER = [*ALL_RUNNERS, *(["external"] if "external" not in ALL_RUNNERS else [])]


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    return load_cases([write_team_suite(tmp_path_factory.mktemp("team"))])


@pytest.fixture(scope="module")
def where(model_server: ScriptedModelServer) -> Iterator[Endpoint]:
    yield Endpoint(
        ModelChoice(), {"openai": model_server.openai_base_url, "anthropic": model_server.anthropic_base_url}
    )


@pytest.mark.parametrize("case_id", list(CASES))
@pytest.mark.parametrize("runner", by_tier(EVERY_RUNNER))
def test_a_teams_case_passes_through_every_runner(
    runner: str, case_id: str, team: dict[str, Case], where: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EXTERNAL_COMMAND_ENV, f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE))}")
    outcome = run_one(runner, team[case_id], where)
    assert outcome.result is not None, outcome.error
    assert outcome.passed, [f"{c.name}: {c.detail}" for c in outcome.checks if not c.passed]
    function, file = CASES[case_id]
    assert f"`{function}` in {file}" in (outcome.result.answer or "")


def test_eval_with_cases_runs_the_teams_suite_and_not_looplabs(tmp_path: Path) -> None:
    suite = write_team_suite(tmp_path)
    out = tmp_path / "results.json"
    code = cli.main(["eval", "--cases", str(suite), "--runner", "handrolled", "--jobs", "1", "--json", str(out)])
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert code == 0 and sorted(c["case"] for c in doc["cells"]) == sorted(CASES)
    assert {cid: record["description"] for cid, record in doc["cases"].items()} == {
        case.id: case.description for case in load_cases([suite]).values()
    }


def test_looplabs_own_suite_stays_the_default_beside_a_teams_looplab_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_team_suite(tmp_path)
    (tmp_path / "looplab.toml").write_text('cases = ["team-suite"]\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert "vip-compound" in load_cases() and not set(CASES) & set(load_cases())  # what looplab's tests enumerate
    assert set(case_sources(cli._parser().parse_args(["cases"]))) == {tmp_path / "team-suite"}


NODE_PROJECT = TESTS / "fixtures" / "node_project"
NODE_CASE = """
id = "cart-total"
repo = "../repo"
target = "test/cart.test.js"
task = "The test file test/cart.test.js fails. Find out why."

[checks]
stop_reason = "final_answer"
tools_called = ["run_tests"]
observation_contains = [{ tool = "run_tests", text = "1620" }]
workspace_unchanged = true
"""


@pytest.fixture(scope="module")
def node_case(tmp_path_factory: pytest.TempPathFactory) -> Case:
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH")
    suite = tmp_path_factory.mktemp("node") / "node-suite"
    shutil.copytree(NODE_PROJECT, suite / "repo")
    (suite / "cases").mkdir()
    (suite / "cases" / "cart-total.toml").write_text(NODE_CASE.lstrip("\n"), encoding="utf-8")
    (suite / "suite.toml").write_text('test_command = ["node", "--test", "{target}"]\n', encoding="utf-8")
    return load_cases([suite])["cart-total"]


@pytest.mark.parametrize("runner", by_tier(EVERY_RUNNER))
def test_a_suite_tested_by_node_runs_through_every_runner(
    runner: str, node_case: Case, where: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EXTERNAL_COMMAND_ENV, f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE))}")
    outcome = run_one(runner, node_case, where)
    assert outcome.result is not None, outcome.error
    assert outcome.passed, [f"{c.name}: {c.detail}" for c in outcome.checks if not c.passed]
    first = outcome.result.trace.tool_calls[0]
    assert first.name == "run_tests" and first.result.startswith("exit code 1\n")  # node's own exit code and output
