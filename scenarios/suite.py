"""A suite: a folder of cases and what they share — the system prompt, the suite's own tools, its defaults.

    my-suite/
      cases/*.toml        one case a file (see looplab.scenarios.cases)
      system_prompt.txt   optional: what every runner is told first (else looplab's default investigator prompt)
      tools.py            optional: the suite's own tools, plain typed functions
      suite.toml          optional: defaults for its cases (`test_command`, `tools`, `effects`)

A case file given on its own belongs to the suite of the folder it sits in (the folder above, when it sits in a
`cases/` folder).

Every file of a suite is read under the files rule (`looplab.adapters.contract.files`: a regular file only, opened
without blocking, at most a bound of bytes set here for each), `tools.py` included. Reading a suite runs none of
its code: the names of its tools come from `tools.py`'s source (`tool_names_in`). The bytes read are run only when
its tools are first asked for (a run's tool set, `serve-tools`), and then by a tool host in a process of its own
(`looplab.shared_tools.tool_host`), never in looplab's.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from looplab.adapters.contract import files
from looplab.adapters.contract.errors import LooplabError
from looplab.scenarios import strict
from looplab.shared_tools import tool_host
from looplab.shared_tools.tool_host import ToolSpec

__all__ = ["SYSTEM_PROMPT_FILE", "TOOLS_FILE", "default_system_prompt"]

#: looplab's default investigator prompt: what a suite without its own `system_prompt.txt` says first.
DEFAULT_SYSTEM_PROMPT_PATH = Path(__file__).resolve().parent / "system_prompt.txt"
SYSTEM_PROMPT_FILE = "system_prompt.txt"
TOOLS_FILE = "tools.py"
SUITE_FILE = "suite.toml"

#: The most looplab reads of a system prompt: 512 KiB is some 130,000 tokens, a whole context window of most
#: models (the prompt goes with every model call), while looplab's own prompt is 246 bytes.
MAX_PROMPT_BYTES = 512 * 1024
#: The most looplab reads of a `suite.toml`: it sets three keys, a few hundred bytes; 64 KiB is room for any
#: written by hand.
MAX_SUITE_TOML_BYTES = 64 * 1024
#: The most looplab reads of a `tools.py`: a module of plain functions; 1 MiB is over eight times the standard
#: library's `typing.py` (120 KB), so a tools file past it is something else named so by mistake.
MAX_TOOLS_BYTES = 1024 * 1024


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
    """A suite folder as loaded: its prompt, its own tools by name (as its tool host described them), its defaults.

    It pickles as its folder (a worker process loads the suite again, describing its tools again).
    """

    folder: Path
    system_prompt: str
    functions: Mapping[str, ToolSpec] = field(default_factory=dict)
    defaults: SuiteDefaults = field(default_factory=SuiteDefaults)
    #: sha256 of tools.py and suite.toml, for a results document's case hash (the tools change what a run sees).
    fingerprint: str = ""
    #: The tools tools.py defines, read from its source without running it (`tool_names_in`): what a case may list.
    tool_names: tuple[str, ...] = ()
    #: Whether its tools.py runs in the sandbox when its tools are described (`--sandbox`), as in a run's host.
    sandbox: bool = False

    def __reduce__(self) -> tuple[Callable[[Path, bool], Suite], tuple[Path, bool]]:
        return suite_at, (self.folder, self.sandbox)


def default_system_prompt() -> str:
    """looplab's default investigator prompt, for suites that set none and for runs without a case."""
    return _read_prompt(DEFAULT_SYSTEM_PROMPT_PATH)


def _read_prompt(path: Path) -> str:
    # The file's last newline is not the prompt's; a file the rule refuses is its one line, naming the file.
    return files.read_text(path, limit=MAX_PROMPT_BYTES).rstrip("\n")


def suite_of(case_file: Path) -> Path:
    """The suite folder a case file belongs to."""
    folder = case_file.resolve().parent
    return folder.parent if folder.name == "cases" else folder


@functools.cache
def suite_at(folder: Path, sandbox: bool = False) -> Suite:
    """The suite in `folder`, loaded once a process; a bad prompt, tools.py or suite.toml is a one-line error.
    `sandbox`: describing its tools runs tools.py in the sandbox (`--sandbox`)."""
    folder = folder.resolve()
    prompt_path = folder / SYSTEM_PROMPT_FILE
    # lexists: a link to nothing is there, and refused by the files rule, not taken for an absent file.
    prompt = _read_prompt(prompt_path if os.path.lexists(prompt_path) else DEFAULT_SYSTEM_PROMPT_PATH)
    digest = hashlib.sha256()
    defaults = SuiteDefaults()
    if os.path.lexists(suite_file := folder / SUITE_FILE):
        text = files.read_text(suite_file, limit=MAX_SUITE_TOML_BYTES)
        digest.update(text.encode("utf-8"))  # the file's bytes: they decoded as UTF-8
        defaults = strict.validate(SuiteDefaults, strict.parse_toml(text, suite_file), suite_file)
    functions: Mapping[str, ToolSpec] = {}
    names: tuple[str, ...] = ()
    if os.path.lexists(tools_file := folder / TOOLS_FILE):
        source = files.read_bytes(tools_file, limit=MAX_TOOLS_BYTES)
        digest.update(source)
        try:
            names = tuple(tool_names_in(source))
        except (SyntaxError, ValueError) as exc:  # ValueError: a null byte in the source
            line = f" (line {exc.lineno})" if getattr(exc, "lineno", None) else ""
            raise LooplabError(f"{tools_file}{line}: not valid Python: {getattr(exc, 'msg', None) or exc}") from None
        functions = _DescribedOnUse(tools_file, sandbox)
    fingerprint = f"sha256:{digest.hexdigest()}" if names or defaults != SuiteDefaults() else ""
    return Suite(folder, prompt, functions, defaults, fingerprint, names, sandbox)


def tool_names_in(source: str | bytes) -> list[str]:
    """The tools a `tools.py` source defines, without running it: its public top-level functions, in order.

    Public: not starting with `_`. An `async def` is among them, as the import finds it, so a case that lists one
    is told, when its tools are made, that a tool is a plain function (not that there is no such tool). A
    function made some other way (a decorator's wrapper, an assignment) is found only when the module is
    imported. Raises `SyntaxError` for source that is not Python.
    """
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    return [node.name for node in ast.parse(source).body if isinstance(node, functions) and node.name[0] != "_"]


class _DescribedOnUse(Mapping[str, ToolSpec]):
    """`tools.py`'s tools by name, described by a tool host the first time any is asked for (once, whatever the
    threads)."""

    def __init__(self, path: Path, sandbox: bool) -> None:
        self._path, self._sandbox = path, sandbox
        self._lock = threading.Lock()
        self._functions: Mapping[str, ToolSpec] | None = None

    def _loaded(self) -> Mapping[str, ToolSpec]:
        with self._lock:
            if self._functions is None:
                self._functions = _functions_in(self._path, self._sandbox)
            return self._functions

    def __getitem__(self, name: str) -> ToolSpec:
        return self._loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())


def _functions_in(path: Path, sandbox: bool) -> dict[str, ToolSpec]:
    """The public functions `tools.py` defines (not those it imports), by name, as a tool host described them: its
    code runs in that host's process, never in looplab's."""
    try:
        return tool_host.describe(path, files.read_bytes(path, limit=MAX_TOOLS_BYTES), sandbox=sandbox)
    except tool_host.ToolHostError as exc:  # one line naming the file, and the line where its import failed
        raise LooplabError(str(exc)) from None
