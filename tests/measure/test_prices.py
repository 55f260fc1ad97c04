"""Prices: the shipped table, `--price`, cached input tokens, and a cost that is unknown rather than 0."""

from __future__ import annotations

import json
import math
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from looplab import cli
from looplab.adapters import registry
from looplab.adapters.boundary.recorder import ModelRecorder
from looplab.adapters.boundary.wire import parse_exchange
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.contract.pricing import Pricing, format_cost, parse_price, price_table, total_cost
from looplab.records import results, summary
from looplab.records.outcome import RunOutcome
from looplab.run.harness import Endpoint, ModelChoice
from looplab.scenarios.cases import load_cases
from looplab.shared_tools import Guard, Workspace
from looplab.views import report
from looplab.views.headline import headline
from looplab.views.runs import runs_from
from tests.conftest import FIXTURE_REPO, SYSTEM_PROMPT, TASK

TABLE = price_table()
MODEL_IDS = sorted(TABLE.models)
prices = st.floats(min_value=0, max_value=1000, allow_nan=False, allow_infinity=False)
tokens = st.integers(min_value=0, max_value=10_000_000)


def test_the_table_says_when_and_where_its_prices_were_taken() -> None:
    assert date.fromisoformat(TABLE.taken) <= date.today()
    assert TABLE.source.startswith("genai-prices ")
    for provider, model in [("openai", "gpt-4.1"), ("openai", "gpt-5-mini"), ("anthropic", "claude-sonnet-4-5")]:
        assert f"{provider}:{model}" in TABLE.models  # the models the README and the providers session name


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_every_entry_is_a_finite_price_its_own_id_finds(model_id: str) -> None:
    entry = TABLE.models[model_id]
    numbers = [v for k, v in entry.items() if k not in ("aliases", "prefixes")]
    assert numbers and all(isinstance(n, float) and 0 <= n < math.inf for n in numbers), entry
    provider, name = model_id.split(":", 1)
    found = TABLE.lookup(provider, name)
    assert found == Pricing(entry["input"], entry["output"], entry.get("cached_input"), entry.get("cache_write"))


@given(model_id=st.sampled_from(MODEL_IDS), day=st.dates(min_value=date(2023, 1, 1), max_value=date(2030, 12, 31)))
def test_a_dated_release_costs_what_its_model_costs(model_id: str, day: date) -> None:
    provider, name = model_id.split(":", 1)
    for suffix in (day.isoformat(), day.strftime("%Y%m%d")):
        assert TABLE.lookup(provider, f"{name}-{suffix}") == TABLE.lookup(provider, name)


@pytest.mark.parametrize(
    ("provider", "name"),
    [("openai", "gemma-3-270m"), ("openai", "scripted"), ("anthropic", "gpt-4.1"), ("openai", "claude-sonnet-4-5")],
)
def test_a_model_the_table_does_not_know_has_no_price(provider: str, name: str) -> None:
    assert TABLE.lookup(provider, name) is None


@given(prices, prices, st.none() | prices)
def test_price_option_reads_what_it_is_given(inp: float, out: float, cached: float | None) -> None:
    text = f"{inp!r},{out!r}" + ("" if cached is None else f",{cached!r}")
    assert parse_price(text) == Pricing(inp, out, cached)


@given(st.text(max_size=30))
def test_a_malformed_price_is_a_one_line_error(text: str) -> None:
    try:
        pricing = parse_price(text)
    except ValueError as exc:
        assert "\n" not in str(exc) and "per million tokens" in str(exc) or "finite" in str(exc)
    else:  # it was a well-formed price after all
        assert pricing.input_per_mtok >= 0 and pricing.output_per_mtok >= 0


@given(tokens, tokens, tokens, tokens)
def test_cached_input_costs_its_own_price(plain: int, cached: int, written: int, out: int) -> None:
    pricing = Pricing(input_per_mtok=3.0, output_per_mtok=15.0, cached_input_per_mtok=0.3, cache_write_per_mtok=3.75)
    cost = pricing.cost(plain + cached + written, out, cached, written)
    assert cost == pytest.approx((plain * 3.0 + cached * 0.3 + written * 3.75 + out * 15.0) / 1e6)
    # Without cache prices, every input token costs as input.
    assert Pricing(3.0, 15.0).cost(plain + cached + written, out, cached, written) == pytest.approx(
        ((plain + cached + written) * 3.0 + out * 15.0) / 1e6
    )


@pytest.mark.parametrize(
    ("endpoint", "usage"),
    [
        (
            "chat.completions",
            {"prompt_tokens": 1200, "completion_tokens": 50, "prompt_tokens_details": {"cached_tokens": 1024}},
        ),
        ("responses", {"input_tokens": 1200, "output_tokens": 50, "input_tokens_details": {"cached_tokens": 1024}}),
        ("messages", {"input_tokens": 176, "output_tokens": 50, "cache_read_input_tokens": 1024}),
    ],
)
def test_cached_input_tokens_are_read_from_every_wire_format(endpoint: str, usage: dict) -> None:
    body = {
        "chat.completions": {"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}], "usage": usage},
        "responses": {"object": "response", "status": "completed", "output": [], "usage": usage},
        "messages": {"type": "message", "content": [], "stop_reason": "end_turn", "usage": usage},
    }[endpoint]
    info = parse_exchange(endpoint, json.dumps(body).encode())
    assert (info.input_tokens, info.cached_input_tokens, info.output_tokens) == (1200, 1024, 50)


def test_the_recorder_prices_cached_tokens_and_leaves_an_unknown_price_unknown() -> None:
    body = {
        "choices": [{"message": {"content": "x"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 2000, "completion_tokens": 100, "prompt_tokens_details": {"cached_tokens": 1000}},
    }
    url, raw = "http://127.0.0.1:1/v1/chat/completions", json.dumps(body).encode()
    priced = ModelRecorder(clock=lambda: 0.0, pricing=Pricing(2.0, 8.0, 0.5))
    priced._record(url, b"{}", 200, raw, 0.0)
    assert priced.calls[0].cached_input_tokens == 1000
    assert priced.cost_usd == pytest.approx((1000 * 2.0 + 1000 * 0.5 + 100 * 8.0) / 1e6)
    unpriced = ModelRecorder(clock=lambda: 0.0)
    unpriced._record(url, b"{}", 200, raw, 0.0)
    assert unpriced.calls[0].cost_usd is None and unpriced.cost_usd is None


def test_an_unknown_cost_is_never_shown_as_zero() -> None:
    assert format_cost(None) == "unknown" and format_cost(0.0) == "0.0000"
    assert total_cost([0.5, None]) is None and total_cost([0.5, 0.25]) == 0.75 and total_cost([]) == 0


def test_a_real_model_is_priced_from_the_table_and_price_overrides_it() -> None:
    adapter = registry.load("handrolled")
    where = Endpoint(ModelChoice("openai:gpt-4.1-2025-04-14", "http://127.0.0.1:1/v1"))
    assert where.spec_for(adapter).pricing == TABLE.lookup("openai", "gpt-4.1")
    override = Endpoint(ModelChoice("openai:gpt-4.1", "http://127.0.0.1:1/v1", pricing=Pricing(1.0, 2.0)))
    assert override.spec_for(adapter).pricing == Pricing(1.0, 2.0)
    assert Endpoint(ModelChoice("openai:gemma-3", "http://127.0.0.1:1/v1")).spec_for(adapter).pricing is None


def test_a_budget_without_a_price_is_refused_before_the_run() -> None:
    spec = ModelSpec("openai", "gemma-3", base_url="http://127.0.0.1:1/v1")  # nothing listens: no run may start
    with Workspace(FIXTURE_REPO) as ws:
        with pytest.raises(LooplabError, match=r"max_cost_usd=0\.1 needs a price .* --price IN,OUT"):
            registry.load("handrolled").run(
                TASK, Guard(ws), Limits(max_cost_usd=0.1), spec, system_prompt=SYSTEM_PROMPT
            )


def test_the_cli_refuses_a_budgeted_case_on_an_unpriced_model_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert any(c.limits.max_cost_usd is not None for c in load_cases().values())
    budgeted = next(c.id for c in load_cases().values() if c.limits.max_cost_usd is not None)
    argv = ["eval", "--model", "openai:gemma-3", "--base-url", "http://127.0.0.1:9/v1", "--case", budgeted]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"case {budgeted!r}" in err and "--price" in err


def test_a_malformed_price_option_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.main(["run", "--price", "two,eight"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--price" in err


def test_unpriced_runs_show_unknown_cost_in_the_summary_and_the_report(model_server) -> None:
    spec = ModelSpec("openai", "local-model", base_url=model_server.openai_base_url, api_key="scripted")
    with Workspace(FIXTURE_REPO) as ws:
        result = registry.load("handrolled").run(
            TASK, Guard(ws), Limits(max_steps=3), spec, system_prompt=SYSTEM_PROMPT
        )
    assert result.totals.cost_usd is None and all(s.model_call.cost_usd is None for s in result.trace.steps)
    assert result.totals.input_tokens > 0  # the tokens are known; only their price is not
    result.case = "vip-compound"  # as the harness records it
    outcome = RunOutcome("handrolled", "vip-compound", result)
    (numbers,) = summary.summarize([outcome])
    assert numbers.cost_usd_median is None and numbers.cost_usd_p95 is None
    doc = results.build([outcome])
    (row,) = headline(runs_from(doc))
    assert row.cost_usd is None
    html = report.render_html(doc)
    assert ">unknown<" in html and "0.0000" not in html
