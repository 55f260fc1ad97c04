"""`nox -s providers`: which providers run, which are skipped and why, and what each run writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from looplab.adapters.contract.pricing import price_of
from looplab.cli import providers


def test_without_keys_nothing_runs_and_each_missing_variable_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    assert providers.main(["--out", str(tmp_path / "reports")]) == 0
    out = capsys.readouterr().out
    assert "OPENAI_API_KEY is not set" in out and "ANTHROPIC_API_KEY is not set" in out
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize(
    ("env", "runs"),
    [
        ({"OPENAI_API_KEY": "k"}, ["openai:gpt-4.1-mini"]),
        ({"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": ""}, ["anthropic:claude-haiku-4-5"]),
        ({"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}, ["openai:gpt-4.1-mini", "anthropic:claude-haiku-4-5"]),
    ],
)
def test_a_provider_runs_exactly_when_its_key_is_set(env: dict[str, str], runs: list[str]) -> None:
    models, skipped = providers.plan(env)
    assert models == runs and len(models) + len(skipped) == len(providers.SMALL_MODELS)


@pytest.mark.parametrize(("provider", "name"), providers.SMALL_MODELS.items())
def test_every_provider_model_has_a_price(provider: str, name: str) -> None:
    assert price_of(provider, name) is not None  # its cost is in dollars, not unknown


def test_each_model_writes_its_own_json_and_html(tmp_path: Path) -> None:
    args = providers.eval_args("anthropic:claude-haiku-4-5", tmp_path)
    assert args[:3] == ["eval", "--model", "anthropic:claude-haiku-4-5"]
    assert str(tmp_path / "anthropic.json") in args and str(tmp_path / "anthropic.html") in args
    assert "vip-compound" in args
