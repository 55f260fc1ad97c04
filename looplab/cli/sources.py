"""Where the cases come from: `--cases PATH` (repeatable, on every command that takes cases), else
`cases` in a `looplab.toml` in the working directory, else looplab's own suite.

    # looplab.toml
    cases = ["suites/checkout", "suites/search/cases/slow-index.toml"]   # relative to this file

`looplab.toml` is read as a case file is (`scenarios.strict.read_toml`): a regular file only, at most
`MAX_PROJECT_BYTES`, its nesting bounded before it is parsed.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

#: The file in the working directory that names a team's cases for every command.
PROJECT_FILE = "looplab.toml"
#: The most looplab reads of a `looplab.toml`: one list of paths, a few hundred bytes; 64 KiB names a thousand.
MAX_PROJECT_BYTES = 64 * 1024


class Project(BaseModel):
    """`looplab.toml`: what a team's commands run by default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cases: list[str] = Field(default_factory=list, description="Case files or suite folders, relative to this file.")


def project(folder: Path | None = None) -> tuple[Path, Project] | None:
    """The `looplab.toml` in `folder` (the working directory), read strictly; None when there is none."""
    from looplab.scenarios import strict

    path = (folder or Path.cwd()) / PROJECT_FILE
    if not os.path.lexists(path):  # anything else there (a FIFO, a link to nothing) is refused in one line
        return None
    return path, strict.validate(Project, strict.read_toml(path, limit=MAX_PROJECT_BYTES), path)


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
