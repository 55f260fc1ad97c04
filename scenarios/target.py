"""A case's target: the failing test it investigates, checked against its repo and stated in the task runners send.

The target is a test id the test command runs (`tests/test_x.py::test_y`, `test/cart.test.js`): its file must be in
the repo (or the case's overlay), and for a Python file with `::` names, each name must be defined in that file
(`target_problem`). The task a runner sends names the target: a task that names no test, or another test, gets a
line stating it appended (`stated_task`), so any model, the scripted one included, is told what to investigate.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path, PurePosixPath

from looplab.scenarios import strict
from looplab.shared_tools import PathRefused
from looplab.shared_tools.tools import check_target

__all__ = ["target_problem"]

#: What `stated_task` appends: the one line that names the test to investigate.
TARGET_LINE = "The failing test: {target}"
#: The stated line as it is read back from a conversation's task (the scripted model prefers it to any other test
#: the task names). A target holds no whitespace or backtick, so `\S+` ends where it does.
STATED = re.compile(r"^The failing test: (?P<target>\S+)", re.M)
#: A test the task may name: a source file of a language test runners run, maybe with `::` names; matched only where
#: a run of path characters starts, so it takes time linear in the task.
_NAMED_TEST = re.compile(
    r"(?<![\w./-])[\w./-]*\.(?:py|js|mjs|cjs|jsx|ts|mts|cts|tsx|rb|go|rs|java|kt|php|sh|cs|c|cc|cpp|swift|exs?)"
    r"(?![\w])(?:::[\w\[\]-]+)*"
)
#: The largest test file whose definitions are read to check a `::` name; a larger one is taken as it is.
MAX_TARGET_SOURCE_BYTES = 2_000_000
#: Folders never searched for a file a missing target may have meant.
_SKIPPED_FOLDERS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".mypy_cache"})
#: How many files are looked at, at most, for a "did you mean" (a repo of any size answers quickly).
_MAX_CANDIDATES = 5_000


def stated_task(task: str, target: str) -> str:
    """The task as every runner sends it: `task` itself when it names `target` and no other test; else `task` with
    a line stating the target, which wins over another test the task names (the line says so)."""
    # A test named that is a start of the target (its file, or the target cut short at a parameter id holding a
    # space) is the target, not another test.
    others = sorted({n for n in _NAMED_TEST.findall(task) if not target.startswith(n)})
    if target in task and not others:
        return task
    line = TARGET_LINE.format(target=target)
    if others:  # the case's target is what is investigated, whatever else the wording names
        line += f" (the task also names {', '.join(others)}; investigate {target})"
    return f"{task.rstrip()}\n\n{line}"


def target_names(target: str) -> tuple[str, list[str]]:
    """A target's file and the names after it, each without a parameter id: `a.py::C::t[x]` -> (a.py, [C, t])."""
    file, *names = target.split("::")
    return file, [name.split("[", 1)[0] for name in names]


def target_problem(target: str, repo: Path, overlay: Path | None = None) -> str | None:
    """What is wrong with `target` for a case whose repo is `repo` (with `overlay` laid over it), in one line, or
    None: not a test id run_tests takes; its file not in the repo; a `::` name its Python file does not define.
    A "did you mean" names a near file or name where there is one."""
    try:
        check_target(target)
    except PathRefused as exc:  # its message leads with the target, which the caller's line names already
        return str(exc).removeprefix(f"{target!r}: ")
    file, names = target_names(target)
    relative = PurePosixPath(file.removeprefix("./"))
    if relative.is_absolute() or ".." in relative.parts:
        return f"{file}: the test file's path is relative to the repo, inside it"
    found = next((root / relative for root in (overlay, repo) if root and (root / relative).exists()), None)
    if found is None:
        moved = _defined_elsewhere(repo, overlay, relative, names)
        if moved is not None:
            return None  # the test moved: the repo defines it under another path, which a search finds
        return f"no file {file} in {repo}{strict.nearest(relative.as_posix(), _files_like(repo, overlay, relative))}"
    if not names or found.suffix != ".py" or not found.is_file():
        return None
    defined = _definitions(found)
    if defined is None:
        return None  # not readable as Python: what the test command makes of it is the investigation's
    for name in names:
        if name not in defined:
            return f"{file} defines no test {name!r}{strict.nearest(name, sorted(defined))}"
    return None


def _definitions(path: Path) -> set[str] | None:
    """The functions and classes `path` defines, anywhere in it; None when it is too large or not Python."""
    try:
        if path.stat().st_size > MAX_TARGET_SOURCE_BYTES:
            return None
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {node.name for node in ast.walk(tree) if isinstance(node, kinds)}


def _repo_files(repo: Path, overlay: Path | None) -> list[str]:
    """The files of the repo and its overlay, relative: at most `_MAX_CANDIDATES` entries looked at, tool folders
    never entered, links never followed (a repo of any size answers quickly)."""
    found: list[str] = []
    seen = 0
    for root in filter(None, (overlay, repo)):
        for folder, folders, files in os.walk(root):
            folders[:] = sorted(f for f in folders if f not in _SKIPPED_FOLDERS)
            for name in sorted(files):
                seen += 1
                if seen > _MAX_CANDIDATES:
                    return found
                found.append(Path(folder, name).relative_to(root).as_posix())
            seen += len(folders)
    return found


def _files_like(repo: Path, overlay: Path | None, wanted: PurePosixPath) -> list[str]:
    """The repo's files with the suffix `wanted` has: the candidates a "did you mean" picks from."""
    return [f for f in _repo_files(repo, overlay) if PurePosixPath(f).suffix == wanted.suffix]


def _defined_elsewhere(repo: Path, overlay: Path | None, wanted: PurePosixPath, names: list[str]) -> str | None:
    """Another Python file of the repo defining every name of a `::` target whose file is missing: where the test
    moved to (a case may tell of a moved test on purpose; the model finds it by searching)."""
    if not names or wanted.suffix != ".py":
        return None
    for file in _files_like(repo, overlay, wanted):
        root = overlay if overlay and (overlay / file).is_file() else repo
        defined = _definitions(root / file)
        if defined is not None and set(names) <= defined and any(n.startswith("test") for n in names):
            return file
    return None
