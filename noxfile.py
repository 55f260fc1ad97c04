"""Sessions: `tests` runs the suite on the pinned current versions; `lint` runs ruff."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.default_venv_backend = "venv"


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite, as the README's test command runs it."""
    session.install("-e", ".[dev]")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the project (the fixture repo excluded)."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
