"""MkDocs hook: let the API reference read looplab's source as it is installed.

The build places the repository's `adapters/`, `scenarios/` and `shared_tools/` under `looplab` (pyproject's
`[tool.setuptools.package-dir]`), which griffe, the reader mkdocstrings uses, does not follow: it looks for
`looplab.adapters` in `looplab/adapters/`. This hook lays out that import tree once per build, as symbolic links
in a temporary folder, and points mkdocstrings' Python handler at it, so the reference reads the checkout's
source (installed or not) under the names a user imports.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

__all__ = ["on_config"]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "looplab"


def _import_tree(into: Path) -> Path:
    """`into/looplab`: links to every entry of the repository's `looplab/`, and to each folder placed under it."""
    package_dir: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]["package-dir"]
    tree = into / PACKAGE
    tree.mkdir()
    for entry in (ROOT / PACKAGE).iterdir():
        if entry.name != "__pycache__":
            (tree / entry.name).symlink_to(entry)
    for name, folder in package_dir.items():
        parent, _, leaf = name.rpartition(".")
        if parent != PACKAGE:  # only folders placed directly under the package; none is nested deeper today
            raise ValueError(f"pyproject.toml: package-dir {name!r} is not directly under {PACKAGE!r}")
        (tree / leaf).symlink_to(ROOT / folder)
    return into


@event_priority(100)  # before mkdocstrings' own on_config, which builds the handlers from this config
def on_config(config: Any) -> Any:
    """Point the `python` handler's search path at a fresh import tree (removed when the build's process ends)."""
    staging = Path(tempfile.mkdtemp(prefix="looplab-docs-api-"))
    atexit.register(shutil.rmtree, staging, ignore_errors=True)
    handlers = config["plugins"]["mkdocstrings"].config["handlers"]
    handlers.setdefault("python", {})["paths"] = [str(_import_tree(staging))]
    return config
