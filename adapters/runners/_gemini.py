"""A framework's Gemini model class, imported when a run asks for the `gemini` wire API.

Each such class imports google-genai, which the runner's extra installs; a bare install of the framework may lack
it, and a run on Gemini then ends in the runner's one-line `MissingExtra` rather than a traceback.
"""

from __future__ import annotations

import importlib
from typing import Any

from looplab.adapters.contract.errors import MissingExtra


def gemini_class(runner: str, extra: str, module: str, name: str) -> Any:
    """`module.name`, or `MissingExtra(runner, extra, "google.genai")` when it cannot be imported."""
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        raise MissingExtra(runner, extra, "google.genai") from None
