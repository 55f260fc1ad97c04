"""A suite: a folder of cases and what they share — the system prompt, the suite's own tools, its defaults.

    my-suite/
      cases/*.toml        one case a file (see looplab.scenarios.cases)
      system_prompt.txt   optional: what every runner is told first (else looplab's default investigator prompt)
      tools.py            optional: the suite's own tools, plain typed functions
      suite.toml          optional: defaults for its cases (`test_command`, `tools`, `effects`)

A case file given on its own belongs to the suite of the folder it sits in (the folder above, when it sits in a
`cases/` folder).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import sys
import tomllib
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from looplab.adapters.contract.errors import LooplabError
from looplab.scenarios import strict

__all__ = [
    "DEFAULT_SYSTEM_PROMPT_PATH",
    "SUITE_FILE",
    "SYSTEM_PROMPT_FILE",
    "Suite",
    "SuiteDefaults",
    "TOOLS_FILE",
    "default_system_prompt",
    "suite_at",
    "suite_of",
]

#: looplab's default investigator prompt: what a suite without its own `system_prompt.txt` says first.
DEFAULT_SYSTEM_PROMPT_PATH = Path(__file__).resolve().parent / "system_prompt.txt"
SYSTEM_PROMPT_FILE = "system_prompt.txt"
TOOLS_FILE = "tools.py"
SUITE_FILE = "suite.toml"


class SuiteDefaults(BaseModel):
    """`suite.toml`: what the suite's cases share unless a case sets its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    test_command: list[str] | None = Field(
        None, min_length=1, description="What run_tests runs, as arguments (never a shell string); default pytest."
    )
    tools: list[str] | None = Field(None, description="The tools the cases offer, built-in or the suite's own.")
    effects: list[str] = Field(default_factory=list, description="Which of the suite's own tools are effects.")


@dataclass(frozen=True, eq=False)
class Suite:
    """A suite folder as loaded: its prompt, its own tool functions by name, its defaults.

    It pickles as its folder (a worker process loads the suite again), since its tools come from a module that
    only this loader can import.
    """

    folder: Path
    system_prompt: str
    functions: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    defaults: SuiteDefaults = field(default_factory=SuiteDefaults)
    #: sha256 of tools.py and suite.toml, for a results document's case hash (the tools change what a run sees).
    fingerprint: str = ""

    def __reduce__(self) -> tuple[Callable[[Path], Suite], tuple[Path]]:
        return suite_at, (self.folder,)


def default_system_prompt() -> str:
    """looplab's default investigator prompt, for suites that set none and for runs without a case."""
    return _read_prompt(DEFAULT_SYSTEM_PROMPT_PATH)


def _read_prompt(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").rstrip("\n")  # the file's last newline is not the prompt's
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise LooplabError(f"{path}: the suite's system prompt cannot be read: {why}") from None


def suite_of(case_file: Path) -> Path:
    """The suite folder a case file belongs to."""
    folder = case_file.resolve().parent
    return folder.parent if folder.name == "cases" else folder


@functools.cache
def suite_at(folder: Path) -> Suite:
    """The suite in `folder`, loaded once a process; a bad prompt, tools.py or suite.toml is a one-line error."""
    folder = folder.resolve()
    prompt_path = folder / SYSTEM_PROMPT_FILE
    prompt = _read_prompt(prompt_path if prompt_path.exists() else DEFAULT_SYSTEM_PROMPT_PATH)
    digest = hashlib.sha256()
    defaults = SuiteDefaults()
    if (suite_file := folder / SUITE_FILE).exists():
        data = _read_toml(suite_file)
        digest.update(suite_file.read_bytes())
        defaults = strict.validate(SuiteDefaults, data, suite_file)
    functions: dict[str, Callable[..., Any]] = {}
    if (tools_file := folder / TOOLS_FILE).exists():
        digest.update(tools_file.read_bytes())
        functions = _functions_in(tools_file)
    fingerprint = f"sha256:{digest.hexdigest()}" if functions or defaults != SuiteDefaults() else ""
    return Suite(folder, prompt, functions, defaults, fingerprint)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise LooplabError(f"{path}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LooplabError(f"{path}: cannot be read: {getattr(exc, 'strerror', None) or exc}") from None


def _functions_in(path: Path) -> dict[str, Callable[..., Any]]:
    """The public functions `tools.py` defines (not those it imports), by name."""
    # A name of its own per file, so two suites' tools.py never share a module.
    name = "looplab_suite_tools_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LooplabError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # typing.get_type_hints resolves the functions' annotations through it
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the suite's own code: whatever it raises is its author's to read, in one line
        sys.modules.pop(name, None)
        line = f" (line {n})" if (n := _line_in(exc, path)) else ""
        raise LooplabError(f"{path}{line}: importing it failed: {type(exc).__name__}: {exc}") from None
    return {
        fn_name: fn
        for fn_name, fn in vars(module).items()
        if inspect.isfunction(fn) and fn.__module__ == name and not fn_name.startswith("_")
    }


def _line_in(exc: BaseException, path: Path) -> int | None:
    """The line of `path` where `exc` was raised (a SyntaxError carries its own)."""
    if isinstance(exc, SyntaxError):
        return exc.lineno
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return frames[-1].lineno if frames else None
