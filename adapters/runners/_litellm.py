"""LiteLLM, offline and quiet, for the runners whose framework imports it (DSPy) or reaches Anthropic Messages
through it (the OpenAI Agents SDK, smolagents). LiteLLM builds its own HTTP client: the runs that send through it
go through the run's recording proxy (`adapters/boundary/proxy.py`).
"""

from __future__ import annotations

import os
from types import ModuleType

from looplab.adapters.contract.errors import MissingExtra
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.contract.runner import installed_version


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


class ViaLiteLLM:
    """Mixed into an adapter whose Anthropic models go through LiteLLM: its version then names LiteLLM's too."""

    distribution: str

    def version(self, model: ModelSpec | None = None) -> str:
        """The framework's version, plus LiteLLM's for an `anthropic` model."""
        own = installed_version(self.distribution)
        if model is None or model.provider != "anthropic":
            return own
        return f"{own} + litellm {installed_version('litellm')}"
