"""`--model google:NAME`: the provider's key, its API, its base URL and its prices."""

from __future__ import annotations

import pytest
from google.genai import _api_client

from looplab.adapters.boundary.proxy import DEFAULT_BASE_URLS
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.model import ModelSpec, check_api, key_from, parse_model
from looplab.adapters.contract.pricing import price_of, price_table
from looplab.cli import providers

KEYS = [
    {"GEMINI_API_KEY": "gemini"},
    {"GOOGLE_API_KEY": "google"},
    {"GEMINI_API_KEY": "gemini", "GOOGLE_API_KEY": "google"},
    {"GEMINI_API_KEY": "", "GOOGLE_API_KEY": "google"},
    {},
]


@pytest.mark.parametrize("env", KEYS)
def test_the_key_is_the_one_google_genai_takes(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert key_from("google", env) == _api_client.get_env_api_key()  # the SDK's own reading of the variables
    if key_from("google", env):
        assert ModelSpec("google", "gemini-2.5-flash").key() == _api_client.get_env_api_key()
    else:
        with pytest.raises(LooplabError, match=r"^GEMINI_API_KEY is not set \(nor GOOGLE_API_KEY\); export it"):
            ModelSpec("google", "gemini-2.5-flash").key()


def test_a_google_model_speaks_gemini_and_only_gemini() -> None:
    assert parse_model("google:gemini-2.5-flash") == ("google", "gemini-2.5-flash")
    check_api("gemini", "google")
    with pytest.raises(LooplabError, match="the gemini API is Google's: use a google: model, or --api chat or"):
        check_api("gemini", "openai")
    with pytest.raises(LooplabError, match="the messages API is Anthropic's: .* --api gemini with google models"):
        check_api("messages", "google")
    assert DEFAULT_BASE_URLS["google"] == "https://generativelanguage.googleapis.com"


@pytest.mark.parametrize(
    "name", ["gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-2.5-pro", "gemini-3-flash-preview"]
)
def test_current_gemini_models_have_a_price(name: str) -> None:
    pricing = price_of("google", name)
    assert pricing is not None and 0 < pricing.input_per_mtok < pricing.output_per_mtok
    assert price_of("openai", name) is None


def test_the_table_prices_gemini_and_not_what_vertex_ai_serves_beside_it() -> None:
    google = [model for model in price_table().models if model.startswith("google:")]
    assert google and all(model.startswith("google:gemini-") for model in google)
    assert not any(word in model for model in google for word in ("tts", "image", "embedding", "live"))


def test_the_providers_session_runs_gemini_with_either_key_variable() -> None:
    for variable in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        models, _ = providers.plan({variable: "k"})
        assert models == ["google:gemini-2.5-flash-lite"]
    _, skipped = providers.plan({})
    assert "skipping google:gemini-2.5-flash-lite: GEMINI_API_KEY is not set (nor GOOGLE_API_KEY)" in skipped
