"""LiteLLM, offline and quiet, for the runners whose framework imports it (DSPy) or reaches Anthropic Messages and
Gemini's generateContent through it (the OpenAI Agents SDK, smolagents). LiteLLM builds its own HTTP client: the runs
that send through it go through the run's recording proxy (`adapters/boundary/proxy.py`).
"""

from __future__ import annotations

import os
from types import ModuleType

from looplab.adapters.contract.errors import MissingExtra
from looplab.adapters.contract.model import Api, ModelServerUrls, ModelSpec
from looplab.adapters.contract.runner import installed_version

#: The wire APIs these runners reach through LiteLLM: each provider's own, which their framework's SDK client lacks.
LITELLM_APIS: tuple[Api, ...] = ("messages", "gemini")
#: The API version in a Gemini URL: LiteLLM's `gemini/` route (and lm15's) appends `models/NAME:METHOD` to its base
#: URL as given, where google-genai adds the version itself (`ModelServerUrls.gemini_base_url` leaves it out).
GEMINI_API_VERSION = "v1beta"


def offline_price_map() -> None:
    """Have LiteLLM read its bundled model price map, not GitHub's: it reads it once, at import (no per-run switch).

    Call it before anything imports LiteLLM.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def import_litellm(runner: str, extra: str) -> ModuleType:
    """LiteLLM, offline and quiet; not installed, the runner's one-line `MissingExtra`."""
    offline_price_map()
    try:
        import litellm
    except ImportError:
        raise MissingExtra(runner, extra, "litellm") from None
    litellm.suppress_debug_info = True  # else it prints a provider list for a model it has no price for
    return litellm


def litellm_route(runner: str, extra: str, api: Api, name: str, urls: ModelServerUrls) -> tuple[str, str]:
    """LiteLLM's model string for model `name` on `api` (one of `LITELLM_APIS`), and its `api_base` at `urls`.

    Imports LiteLLM (`import_litellm`); a Gemini model it does not know is declared to it as taking a system
    instruction (`_known_to_take_system_instruction`).
    """
    litellm = import_litellm(runner, extra)
    if api == "messages":
        return f"anthropic/{name}", urls.anthropic_base_url
    if api == "gemini":
        _known_to_take_system_instruction(litellm, f"gemini/{name}")
        return f"gemini/{name}", f"{urls.gemini_base_url}/{GEMINI_API_VERSION}"
    raise ValueError(f"LiteLLM carries only the {' and '.join(LITELLM_APIS)} APIs here, not {api!r}")


def _known_to_take_system_instruction(litellm: ModuleType, model: str) -> None:
    """Have LiteLLM send the system prompt of Gemini `model` as `system_instruction`, as Gemini's API takes it.

    LiteLLM asks its model map; for a model the map lacks (the scripted model, one newer than the bundled map)
    it sends the system prompt as the first text of the first user turn instead (measured, litellm 1.110).
    A model the map knows keeps its entry.
    """
    if model not in litellm.model_cost:
        entry = {"litellm_provider": "gemini", "mode": "chat", "supports_system_messages": True}
        litellm.register_model({model: entry})


class ViaLiteLLM:
    """Mixed into an adapter whose Anthropic and Google models go through LiteLLM: its version then names LiteLLM's
    too."""

    distribution: str

    def version(self, model: ModelSpec | None = None) -> str:
        """The framework's version, plus LiteLLM's for an `anthropic` or `google` model."""
        own = installed_version(self.distribution)
        if model is None or model.provider == "openai":
            return own
        return f"{own} + litellm {installed_version('litellm')}"
