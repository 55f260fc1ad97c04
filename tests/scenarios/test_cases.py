"""The scenario suite: every case through every runner passes its checks, and each case's checks
fail when the guard it exercises is taken away (in a throwaway workspace)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from looplab.adapters.contract.errors import LooplabError
from looplab.records.outcome import RunOutcome
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.scenarios.cases import BUILTIN_SUITE, SCENARIOS_DIR, Case, load_case, load_cases
from looplab.shared_tools import Workspace, default_tools, tools
from looplab.shared_tools.guard import Guard
from tests.paths import REPO
from tests.runs import ALL_RUNNERS, cells, without_races
from tests.tiers import by_tier

CASES = load_cases()
#: The page whose first TOML block is an example case file (the "Adding a case" section).
CASE_EXAMPLE_PAGE = REPO / "docs" / "cases.md"


@pytest.fixture(scope="module")
def where(model_server) -> Iterator[Endpoint]:
    yield Endpoint(
        ModelChoice(), {"openai": model_server.openai_base_url, "anthropic": model_server.anthropic_base_url}
    )


def failed(outcome: RunOutcome) -> list[str]:
    return [f"{c.name}: {c.detail}" for c in outcome.checks if not c.passed]


def test_the_suite_has_every_case_the_investigation_needs() -> None:
    assert set(CASES) == {
        "vip-compound", "three-hops", "already-green", "silent-read", "wrong-path", "tight-budget",
        "injected-instruction", "path-escape", "slow-tests", "huge-log", "cost-cap", "parallel-reads", "sloppy-calls",
        "token-budget", "delegation", "delegation-runaway", "delegation-parallel", "delegation-nested",
    }  # fmt: skip


@pytest.mark.parametrize(("runner", "case_id"), by_tier(without_races(cells(ALL_RUNNERS, CASES))))
def test_every_runner_passes_every_case(runner: str, case_id: str, where: Endpoint) -> None:
    outcome = run_one(runner, CASES[case_id], where)
    assert outcome.result is not None, outcome.error
    assert outcome.passed, failed(outcome)


def _workspace_processes(folder: Path) -> list[str]:
    """The pytest runs still going in a workspace under `folder` (this test's own: other tests run in parallel)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = Path(os.readlink(cmdline.parent / "cwd"))
        except OSError:
            continue
        if "pytest" in text and "test_invoice.py" in text and cwd.is_relative_to(folder) and "looplab-ws-" in str(cwd):
            found.append(text)
    return found


def test_slow_tests_leaves_no_pytest_behind(where: Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path.resolve()))  # the run's workspaces go under tmp_path
    outcome = run_one("handrolled", CASES["slow-tests"], where)
    assert outcome.passed, failed(outcome)
    assert outcome.result.totals.wall_s <= CASES["slow-tests"].limits.max_seconds + 1
    assert _workspace_processes(tmp_path.resolve()) == []


# --- each case's checks fail without the guard it exercises ---------------------------------------


def _without(case_id: str, **changes) -> Case:
    case = CASES[case_id]
    limits = changes.pop("limits", None)
    if limits:
        changes["limits"] = case.limits.model_copy(update=limits)
    return case.model_copy(update=changes)


def test_silent_read_without_the_repetition_guard_runs_to_max_steps(where: Endpoint) -> None:
    outcome = run_one("handrolled", _without("silent-read", limits={"max_repeats": 100}), where)
    assert outcome.result.stop_reason == "max_steps" and not outcome.passed


def test_injected_instruction_with_approval_granted_changes_the_workspace(where: Endpoint) -> None:
    outcome = run_one("handrolled", CASES["injected-instruction"], where, approver=lambda name, args: True)
    assert not outcome.passed
    assert {"workspace unchanged", "write_file did not run"} <= {c.name for c in outcome.checks if not c.passed}


def test_path_escape_without_confinement_reads_the_secret(where: Endpoint, monkeypatch) -> None:
    monkeypatch.setattr(Workspace, "resolve", lambda self, path: self.root / path)
    outcome = run_one("handrolled", CASES["path-escape"], where)
    assert "refused .env" in [c.name for c in outcome.checks if not c.passed]


def test_tight_budget_without_the_cap_answers(where: Endpoint) -> None:
    outcome = run_one("handrolled", _without("tight-budget", limits={"max_steps": 12}), where)
    assert outcome.result.stop_reason == "final_answer" and not outcome.passed


def test_cost_cap_without_a_budget_spends_past_it(where: Endpoint) -> None:
    outcome = run_one("handrolled", _without("cost-cap", limits={"max_cost_usd": None}), where)
    assert outcome.result.stop_reason == "final_answer" and not outcome.passed
    assert outcome.result.totals.cost_usd > CASES["cost-cap"].limits.max_cost_usd


def test_token_budget_without_a_budget_spends_past_it(where: Endpoint) -> None:
    outcome = run_one("handrolled", _without("token-budget", limits={"max_tokens": None}), where)
    assert outcome.result.stop_reason == "final_answer" and not outcome.passed
    totals = outcome.result.totals
    assert totals.input_tokens + totals.output_tokens > CASES["token-budget"].limits.max_tokens


def test_slow_tests_without_the_deadline_overruns(where: Endpoint, monkeypatch) -> None:
    # The Guard no longer knows the run's deadline: run_tests gets a fixed 5.5 s instead of what is left.
    monkeypatch.setattr(Guard, "_remaining", lambda self: 5.5)
    outcome = run_one("handrolled", CASES["slow-tests"], where)
    assert not outcome.passed and outcome.result.totals.wall_s > 5


def test_huge_log_without_truncation_floods_the_observation(where: Endpoint, monkeypatch) -> None:
    monkeypatch.setattr(tools, "tail_truncate", lambda text, limit, **_: text)
    outcome = run_one("handrolled", CASES["huge-log"], where)
    assert "run_tests observation contains 'earlier characters truncated'" in [
        c.name for c in outcome.checks if not c.passed
    ]
    assert max(c.result_chars for c in outcome.result.trace.tool_calls) > 100_000


def test_parallel_reads_with_a_careful_model_reads_one_file_a_turn(where: Endpoint) -> None:
    case = CASES["parallel-reads"]
    outcome = run_one(
        "handrolled", case.model_copy(update={"model": case.model.model_copy(update={"persona": "careful"})}), where
    )
    assert [c.name for c in outcome.checks if not c.passed] == ["a step with 2 tool calls"]


def test_already_green_on_the_buggy_repo_finds_a_bug(where: Endpoint) -> None:
    outcome = run_one("handrolled", _without("already-green", overlay=None), where)
    assert not outcome.passed and "compound" in outcome.result.answer


def test_wrong_path_without_search_cannot_recover(where: Endpoint) -> None:
    outcome = run_one("handrolled", _without("wrong-path", tools=["run_tests", "read_file"]), where)
    assert not outcome.passed and "called search_code" in [c.name for c in outcome.checks if not c.passed]


def test_three_hops_with_the_chain_cut_short_fails(where: Endpoint) -> None:
    outcome = run_one("handrolled", _without("three-hops", limits={"max_steps": 4}), where)
    assert outcome.result.stop_reason == "max_steps" and not outcome.passed


# --- cases are data ----------------------------------------------------------------------------------


def test_a_bad_case_file_names_the_file_and_the_field(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "repo").mkdir()
    (suite / "system_prompt.txt").write_text("Investigate.\n")
    bad = suite / "cases" / "bad.toml"
    bad.write_text('id = "x"\nrepo = "repo"\ntarget = "t.py"\ntask = "t"\n[checks]\nstop_reason = "finished"\n')
    with pytest.raises(LooplabError) as info:
        load_case(bad)
    assert str(info.value).startswith(f"{bad}: [checks] stop_reason: ") and "\n" not in str(info.value)
    bad.write_text('id = "x"\nrepo = "nowhere"\ntarget = "t.py"\ntask = "t"\n')
    with pytest.raises(LooplabError, match="does not exist"):
        load_case(bad)
    bad.write_text("id = \n")
    with pytest.raises(LooplabError, match="not valid TOML"):
        load_case(bad)


def test_the_readme_case_example_is_a_valid_case() -> None:
    block = re.search(r"```toml\n(.*?)```", CASE_EXAMPLE_PAGE.read_text(encoding="utf-8"), re.S)
    assert block, f"{CASE_EXAMPLE_PAGE} shows no TOML block"
    with tempfile.TemporaryDirectory() as tmp:  # a case file in a copy of the built-in suite, as the page says
        suite = Path(tmp) / "suite"
        shutil.copytree(BUILTIN_SUITE, suite, ignore=shutil.ignore_patterns("cases"))
        (suite / "cases").mkdir()
        (suite / "cases" / "example.toml").write_text(block[1], encoding="utf-8")
        case = load_case(suite / "cases" / "example.toml")
        assert case.repo_path.is_dir() and (case.overlay_path is None or case.overlay_path.is_dir())


def test_every_case_file_loads_and_its_folders_exist() -> None:
    cases = [load_case(path) for path in sorted(SCENARIOS_DIR.glob("*/cases/*.toml"))]
    assert cases and sorted(case.id for case in cases) == sorted(load_cases(every=True))  # run when named too
    for case in cases:
        assert case.repo_path.is_dir()
        with Workspace(case.repo_path, overlay=case.overlay_path) as ws:
            assert (ws.root / case.target.split("::")[0]).is_file() or case.id == "wrong-path"


def test_faults_only_touch_the_tool_they_name() -> None:
    from looplab.shared_tools import Fault, with_faults

    faulty = with_faults(default_tools(), [Fault(tool="read_file", kind="silent", text="ok")])
    with Workspace(CASES["vip-compound"].repo_path) as ws:
        guard = Guard(ws, tools=faulty)
        assert guard.call("read_file", {"path": "README.md"}).result == "ok"
        assert guard.call("search_code", {"query": "def apply_discount"}).result.startswith("billing/discount.py")
        assert guard.call("run_tests", {"target": "tests/test_invoice.py::test_subtotal"}).outcome == "ok"
