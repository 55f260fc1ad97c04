"""Where the cases come from: `--cases PATH` (repeatable, on every command that takes cases), else
`cases` in a `looplab.toml` in the working directory, else looplab's own suite.

    # looplab.toml
    cases = ["suites/checkout", "suites/search/cases/slow-index.toml"]   # relative to this file
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PROJECT_FILE", "Project", "case_sources", "project"]

#: The file in the working directory that names a team's cases for every command.
PROJECT_FILE = "looplab.toml"


class Project(BaseModel):
    """`looplab.toml`: what a team's commands run by default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cases: list[str] = Field(default_factory=list, description="Case files or suite folders, relative to this file.")


def project(folder: Path | None = None) -> tuple[Path, Project] | None:
    """The `looplab.toml` in `folder` (the working directory), read strictly; None when there is none."""
    from looplab.adapters.contract.errors import LooplabError
    from looplab.scenarios import strict

    path = (folder or Path.cwd()) / PROJECT_FILE
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise LooplabError(f"{path}: cannot be read as TOML: {exc}") from None
    return path, strict.validate(Project, data, path)


def case_sources(args: argparse.Namespace) -> list[Path]:
    """The case files and suite folders a command runs: named on the command line, in looplab.toml, or none
    (looplab's own suite)."""
    named = getattr(args, "cases", None)
    if named:
        return [Path(p) for p in named]
    found = project()
    if found is None:
        return []
    path, settings = found
    return [path.parent / p for p in settings.cases]
