"""`looplab eval --estimate`: the scripted runs' tokens priced at a real model's price, and bounds where none ran."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.pricing import Pricing, price_of
from looplab.measure import estimate as est_module
from looplab.measure.estimate import TOKENS_NOTE, WIDTH, Estimate, estimate, render
from looplab.records.outcome import RunOutcome
from looplab.scenarios.cases import Case, load_case, load_cases

RUNNERS = ["handrolled", "anthropic_tool_runner"]
CASES = ["vip-compound", "already-green"]
MODEL = "anthropic:claude-sonnet-4-5"


def _spying(monkeypatch: pytest.MonkeyPatch) -> list[RunOutcome]:
    """Keep the outcomes the estimate's matrix returned, to compare the cells with the results' own records."""
    seen: list[RunOutcome] = []
    real: Callable[..., list[RunOutcome]] = est_module.run_matrix

    def spy(*args: Any, **kwargs: Any) -> list[RunOutcome]:
        outcomes = real(*args, **kwargs)
        seen.extend(outcomes)
        return outcomes

    monkeypatch.setattr(est_module, "run_matrix", spy)
    return seen


@pytest.fixture(scope="module")
def priced() -> tuple[Estimate, list[RunOutcome]]:
    """Two runners on two built-in cases at the table's price of a real model, run once for the module."""
    with pytest.MonkeyPatch.context() as mp:
        outcomes = _spying(mp)
        found = estimate([load_cases()[c] for c in CASES], RUNNERS, MODEL, None, jobs=1)
    return found, outcomes


@pytest.fixture
def own_tool_cases(tmp_path: Path) -> list[Case]:
    """Two cases of a suite that offer a tool of its own: one with a dollar budget, one without."""
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_x.py").write_text("def test_x():\n    assert 1 == 2\n")
    (tmp_path / "cases").mkdir()
    (tmp_path / "tools.py").write_text(
        'def deploy(version: str) -> str:\n    """Deploy `version`."""\n    return "ok"\n'
    )
    head = 'repo = "../repo"\ntarget = "tests/test_x.py::test_x"\ntask = "Find out why."\n'
    head += 'tools = ["run_tests", "read_file", "deploy"]\neffects = ["deploy"]\n'
    (tmp_path / "cases" / "budgeted.toml").write_text(
        f'id = "budgeted"\n{head}\n[limits]\nmax_steps = 5\nmax_cost_usd = 0.25\n'
    )
    (tmp_path / "cases" / "open.toml").write_text(f'id = "open"\n{head}\n[limits]\nmax_steps = 7\n')
    return [load_case(tmp_path / "cases" / f"{name}.toml") for name in ("budgeted", "open")]


def test_the_tokens_are_the_runs_recorded_tokens(priced: tuple[Estimate, list[RunOutcome]]) -> None:
    found, outcomes = priced
    assert [(c.runner, c.case) for c in found.cells] == [(r, c) for c in CASES for r in RUNNERS]
    recorded = {(o.runner, o.case): o.result.totals for o in outcomes if o.result is not None}
    assert len(recorded) == 4
    for cell in found.cells:
        totals = recorded[cell.runner, cell.case]
        assert cell.measured and cell.stop == "final_answer"
        assert (cell.model_calls, cell.input_tokens, cell.output_tokens) == (
            totals.model_calls,
            totals.input_tokens,
            totals.output_tokens,
        )
        assert cell.input_tokens > 0 and cell.output_tokens > 0
    assert found.input_tokens == sum(t.input_tokens for t in recorded.values())
    assert found.output_tokens == sum(t.output_tokens for t in recorded.values())
    assert found.model_calls == sum(t.model_calls for t in recorded.values())


def test_the_cost_is_the_tokens_at_the_models_price(priced: tuple[Estimate, list[RunOutcome]]) -> None:
    found, _ = priced
    price = price_of("anthropic", "claude-sonnet-4-5")
    assert price is not None and found.pricing == price
    for cell in found.cells:
        expected = (cell.input_tokens * price.input_per_mtok + cell.output_tokens * price.output_per_mtok) / 1e6
        assert cell.cost_usd == pytest.approx(expected)
    assert found.cost_usd == pytest.approx(sum(c.cost_usd or 0 for c in found.cells))
    assert found.cost_usd > 0


def test_the_rendered_estimate_fits_100_columns_and_says_how_tokens_are_counted(
    priced: tuple[Estimate, list[RunOutcome]],
) -> None:
    found, _ = priced
    text = render(found)
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    flat = " ".join(text.split())
    assert " ".join(TOKENS_NOTE.split()) in flat
    assert "No request was sent to the provider" in flat
    assert f"{found.input_tokens:,}" in text and f"{found.cost_usd:.4f}" in text
    assert f"{MODEL} at $3 in, $15 out per million tokens" in flat


def test_price_given_overrides_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    outcomes = _spying(monkeypatch)
    found = estimate([load_cases()["already-green"]], ["handrolled"], MODEL, Pricing(1.0, 2.0), jobs=1)
    [cell] = found.cells
    totals = outcomes[0].result.totals  # type: ignore[union-attr]
    assert cell.cost_usd == pytest.approx((totals.input_tokens * 1.0 + totals.output_tokens * 2.0) / 1e6)
    assert "--price" in render(found)


def test_an_unknown_price_shows_the_tokens_and_names_price() -> None:
    found = estimate([load_cases()["already-green"]], ["handrolled"], "openai:no-such-model-xyz", None, jobs=1)
    [cell] = found.cells
    assert found.pricing is None and cell.cost_usd is None and found.cost_usd is None
    assert cell.input_tokens > 0
    text = render(found)
    assert f"{cell.input_tokens:,}" in text and "unknown" in text
    notes = [line for line in text.splitlines() if "No price is known" in line]
    assert len(notes) == 1 and "--price" in notes[0]


def test_a_case_the_scripted_model_cannot_play_gets_its_limits_bound(
    own_tool_cases: list[Case], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert [c.tools_beyond_scripted for c in own_tool_cases] == [["deploy"], ["deploy"]]
    ran = _spying(monkeypatch)
    found = estimate(own_tool_cases, ["handrolled", "langgraph"], MODEL, None, jobs=1)
    assert ran == [] and found.measured == []  # nothing ran, not even the scripted model
    bounds = {(c.runner, c.case): c.bound for c in found.cells}
    assert len(bounds) == 4
    budgeted, open_ = bounds["handrolled", "budgeted"], bounds["langgraph", "open"]
    assert budgeted is not None and open_ is not None
    assert (budgeted.tools, budgeted.max_steps, budgeted.max_cost_usd) == (("deploy",), 5, 0.25)
    assert (open_.tools, open_.max_steps, open_.max_cost_usd) == (("deploy",), 7, None)
    assert found.bound_calls == 2 * 5 + 2 * 7
    assert found.bound_cost_usd is None  # one of them has no dollar budget
    text = render(found)
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in text.splitlines() if "—" in line}
    # No cell ran: the table says so once, above it, not in a column of "not run".
    assert "every cell: scripted run not run" in text
    assert rows["handrolled", "budgeted"] == ["≤", "5", "—", "—", "≤", "0.25"]
    assert rows["langgraph", "open"] == ["≤", "7", "—", "—", "no", "bound"]
    flat = " ".join(text.split())
    assert "budgeted: not run, since it offers deploy, which the scripted model does not drive" in flat
    assert "at most 5 model calls and at most $0.25" in flat
    assert "open: not run" in flat and "neither max_cost_usd nor max_tokens, no bound on its tokens or cost" in flat
    assert "The 4 cells not run may make at most 24 model calls together" in flat


def test_the_bound_of_cases_that_all_have_a_budget_adds_up(own_tool_cases: list[Case]) -> None:
    found = estimate(own_tool_cases[:1], RUNNERS, MODEL, None, jobs=1)
    assert found.bound_cost_usd == pytest.approx(0.5)
    assert "at most $0.50." in " ".join(render(found).split())


def test_a_model_that_is_not_provider_name_is_refused_in_one_line() -> None:
    with pytest.raises(LooplabError, match="provider:name") as err:
        estimate([load_cases()["already-green"]], ["handrolled"], "scripted", None, jobs=1)
    assert "\n" not in str(err.value)


def test_a_cell_that_could_not_run_is_left_out_of_the_totals_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(runners: list[str], cases: list[Case], *_: Any, **__: Any) -> list[RunOutcome]:
        return [RunOutcome(r, c.id, error="the crewai extra is not installed") for c in cases for r in runners]

    monkeypatch.setattr(est_module, "run_matrix", fails)
    found = estimate([load_cases()["already-green"]], ["crewai"], MODEL, None, jobs=1)
    [cell] = found.cells
    assert not cell.measured and found.measured == [] and found.input_tokens == 0 and found.cost_usd == 0
    text = render(found)
    assert "crewai on already-green: not run: the crewai extra is not installed" in " ".join(text.split())


def test_eval_estimate_needs_no_key_and_calls_no_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from looplab import cli
    from tests.team_suite import write_team_suite

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    suite = write_team_suite(tmp_path)
    code = cli.main(["eval", "--cases", str(suite), "--runner", "handrolled", "--model", MODEL, "--estimate"])
    out = capsys.readouterr().out
    assert code == 0 and "shelf-restock" in out and "ledger-balance" in out and "total" in out
    assert cli.main(["eval", "--cases", str(suite), "--estimate"]) == 2  # no model to price the tokens at
    assert "--estimate needs --model PROVIDER:NAME" in capsys.readouterr().err


def test_repeats_are_priced_as_the_matrix_that_many_times(priced: tuple[Estimate, list[RunOutcome]]) -> None:
    from dataclasses import replace

    found, _ = priced
    text = " ".join(render(replace(found, repeats=7)).split())
    total = found.cost_usd
    assert total is not None and total > 0
    assert f"× 7 repeats: about {found.model_calls * 7:,} model calls" in text
    assert f"${total * 7:.4f}" in text
    assert "× " not in " ".join(render(found).split())
