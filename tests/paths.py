"""Where the suite finds the repository and its own fixtures, whichever room folder a test module sits in."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO", "TESTS"]

#: The tests folder (`tests/fixtures/` and the suite's helper modules are here).
TESTS = Path(__file__).resolve().parent
#: The repository's root: docs/, examples/, history/, pyproject.toml.
REPO = TESTS.parent
