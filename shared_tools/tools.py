"""The shared tool set: plain typed functions over a `Workspace`.

Each tool's first parameter is the workspace, bound by the `Guard`; the
remaining parameters are what the model fills in, and their annotations and
the docstring become the schema and description the model sees. A tool
reports a failure by raising; the `Guard` turns it into an observation.

`run_tests` runs pytest by default, or a suite's own test command (a list of
arguments, never a shell string) with the same confinement.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import PurePath
from typing import Annotated

import regex
from pydantic import AfterValidator, Field

from looplab.shared_tools.live import Live, kill_process_group
from looplab.shared_tools.records import preview
from looplab.shared_tools.workspace import TEXT_SUFFIXES, PathRefused, ToolError, Workspace

__all__ = [
    "DRAIN_S",
    "PYTEST_CONFIGS",
    "READ_FILE_CHUNK_CHARS",
    "READ_FILE_MAX_CHARS",
    "READ_FILE_TIMEOUT_S",
    "RUN_TESTS_MAX_CHARS",
    "RUN_TESTS_TIMEOUT_S",
    "RepoPath",
    "SEARCH_MAX_FILE_BYTES",
    "SEARCH_MAX_HITS",
    "SEARCH_MAX_QUERY_CHARS",
    "SEARCH_TIMEOUT_S",
    "TARGET_PLACEHOLDER",
    "TEST_ENV_ALLOWED",
    "check_test_command",
    "child_environment",
    "command_for_target",
    "live_tests",
    "read_file",
    "run_tests",
    "search_code",
    "tail_truncate",
    "write_file",
]

RUN_TESTS_TIMEOUT_S = 60.0
RUN_TESTS_MAX_CHARS = 8_000
READ_FILE_MAX_CHARS = 20_000
#: read_file's own bound: counting what is cut from a huge file stops there.
READ_FILE_TIMEOUT_S = 5.0
#: Characters read at a time while counting the rest of a truncated file.
READ_FILE_CHUNK_CHARS = 1 << 20
SEARCH_MAX_HITS = 40
SEARCH_TIMEOUT_S = 5.0
SEARCH_MAX_QUERY_CHARS = 1_000
SEARCH_MAX_FILE_BYTES = 2_000_000

#: What a test process inherits from looplab's environment: enough to run Python, nothing secret.
#: Provider keys, tokens and any other variable stay out (a failing test would print them).
TEST_ENV_ALLOWED = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")

#: Config files pytest reads, in the order it looks for them; the first one in the workspace is pinned.
PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")

#: In a suite's test command, the argument text the target replaces; a command without it gets the target appended.
TARGET_PLACEHOLDER = "{target}"
#: A test command's first word that means the interpreter looplab runs under.
_PYTHON_NAMES = ("python", "python3")


def _tidy(path: str) -> str:
    """One spelling per path (`./a.py`, `a.py ` and `a//a.py`'s cousins): what repetition detection compares."""
    head, sep, test = path.strip().partition("::")
    return (os.path.normpath(head) if head else head) + sep + test


RepoPath = AfterValidator(_tidy)


#: The process groups of test runs still going, so an interrupted looplab can kill them all.
live_tests: Live[int] = Live(kill_process_group)


def tail_truncate(text: str, limit: int) -> str:
    """Keep the last `limit` characters (where test failures are), marking the cut."""
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} earlier characters truncated ...]\n" + text[-limit:]


def child_environment() -> dict[str, str]:
    """The environment of a test process: an allowlist of looplab's, plus what makes runs quiet and repeatable."""
    env = {k: v for k, v in os.environ.items() if k in TEST_ENV_ALLOWED}
    # No plugin autoload: the fixture repo needs plain pytest, and the host's plugins cost seconds per run.
    # COLUMNS: pytest cuts its one-line failure summary to the terminal width; keep the assertion whole.
    env |= {
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONNOUSERSITE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "COLUMNS": "200",
    }
    return env


def run_tests(
    ws: Workspace,
    target: Annotated[
        str,
        Field(description="A test file or test id relative to the repo root, e.g. 'tests/test_x.py::test_y'."),
        RepoPath,
    ],
    *,
    command: Sequence[str] | None = None,
    timeout_s: float = RUN_TESTS_TIMEOUT_S,
    max_chars: int = RUN_TESTS_MAX_CHARS,
) -> str:
    """Run pytest on a test file or a single test and return its exit code and output.

    Use it first, to see whether a test fails and with which assertion, and
    again after a change to confirm a fix.
    """
    if command is not None:  # a suite's own test command (bound by `guard.builtin_tool`)
        line = command_for_target(ws, command, target)
        return _run_confined(ws, line, f"{PurePath(command[0]).name} {target}", timeout_s, max_chars)
    file_part = target.split("::", 1)[0]
    ws.text_file(file_part)
    # Root, config and conftest search pinned to the workspace: pytest otherwise walks up the
    # directories above it and loads whatever pytest.ini or conftest.py it finds there.
    config = next((str(ws.root / name) for name in PYTEST_CONFIGS if (ws.root / name).is_file()), os.devnull)
    cmd = [
        *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--color=no"),
        *(f"--rootdir={ws.root}", "-c", config, f"--confcutdir={ws.root}"),
        "--",
        target,
    ]
    return _run_confined(ws, cmd, f"pytest {target}", timeout_s, max_chars)


def check_test_command(command: object) -> tuple[str, ...]:
    """`command` as a test command: a non-empty list of strings (never one shell string); else a one-line
    `ValueError` saying what is wrong."""
    if isinstance(command, str | bytes):
        try:
            example = shlex.split(str(command))[:4] or ["node", "--test"]
        except ValueError:  # unbalanced quotes
            example = ["node", "--test"]
        raise ValueError(
            f"test command {preview(str(command), 80)!r} is one string; "
            f"give it as a list of arguments, e.g. {example!r}"
        )
    if not isinstance(command, Sequence) or not command:
        raise ValueError("a test command is a non-empty list of arguments, e.g. ['node', '--test']")
    words = tuple(command)
    if not all(isinstance(w, str) and "\0" not in w for w in words):
        raise ValueError(f"test command {list(words)!r}: every argument must be a string (without NUL)")
    if not words[0].strip() or TARGET_PLACEHOLDER in words[0]:
        raise ValueError(f"test command {list(words)!r}: its first argument must name the program to run")
    return words


def command_for_target(ws: Workspace, command: Sequence[str], target: str) -> list[str]:
    """The argument list that runs `command` on `target` in `ws`.

    The target is one argument: it replaces `{target}` in every argument holding it, or is appended. A target
    starting with `-` (an option) is refused, and its file part (before any `::`) must stay inside the workspace.
    `python`/`python3` as the program is looplab's own interpreter; another program is looked up on PATH (or in
    the workspace when it holds a `/`); one not found is a `ToolError` saying so.
    """
    program, *args = check_test_command(command)
    if target.startswith("-"):
        raise PathRefused(
            f"{preview(target, 120)}: a target starting with '-' would be read as an option; "
            "give a test file relative to the repository root"
        )
    ws.resolve(target.split("::", 1)[0])
    if any(TARGET_PLACEHOLDER in a for a in args):
        args = [a.replace(TARGET_PLACEHOLDER, target) for a in args]
    else:
        args.append(target)
    return [_program(ws, program), *args]


def _program(ws: Workspace, program: str) -> str:
    """The executable a test command's first word names."""
    if program in _PYTHON_NAMES:
        return sys.executable
    if "/" in program or os.sep in program:
        path = PurePath(program)
        found = str(path) if path.is_absolute() else str(ws.resolve(program))
        if not os.access(found, os.X_OK) or os.path.isdir(found):
            raise ToolError(f"the test command's program {program} is not an executable file")
        return found
    located = shutil.which(program, path=child_environment().get("PATH", os.defpath))
    if located is None:
        raise ToolError(f"the test command's program {program!r} was not found on PATH; it cannot run the tests here")
    return located


#: After the kill, how long the output may take to end: a process that left the group can hold the pipe open.
DRAIN_S = 2.0


def _drain(proc: subprocess.Popen[str]) -> str:
    """What is left of a killed run's output, read for at most DRAIN_S."""
    try:
        output, _ = proc.communicate(timeout=DRAIN_S)
        return output or ""
    except subprocess.TimeoutExpired as exc:
        if proc.stdout is not None:
            proc.stdout.close()  # stop reading a pipe that a process outside the group still holds
        proc.wait(timeout=DRAIN_S)  # the group was killed: its leader ends at once
        partial = exc.output or b""
        return partial.decode("utf-8", "replace") if isinstance(partial, bytes) else partial


def _run_confined(ws: Workspace, cmd: list[str], label: str, timeout_s: float, max_chars: int) -> str:
    """Run `cmd` in the workspace root with the allowlisted environment, in its own process group, killed at
    `timeout_s` and after it ends; `exit code N` and the tail of its output."""
    # Its own session (process group) so a timeout kills the tests and everything they spawned.
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=ws.root,
            env=child_environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:  # not executable, a bad interpreter line: the model reads why
        raise ToolError(f"the test command could not start {PurePath(cmd[0]).name}: {exc.strerror or exc}") from None
    live_tests.add(proc.pid)  # killed at once if looplab is already ending
    ws.processes.add(proc.pid)  # killed at once if the run is already cancelled
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_process_group(proc.pid)
        output = _drain(proc)
        raise TimeoutError(
            f"{label} did not finish within {timeout_s:g}s and was killed; "
            f"run a narrower target. Last output:\n{tail_truncate(output or '', 2_000)}"
        ) from None
    finally:
        kill_process_group(proc.pid)  # whatever the tests left running in the background goes too
        live_tests.discard(proc.pid)
        ws.processes.discard(proc.pid)
    return f"exit code {proc.returncode}\n{tail_truncate(output, max_chars)}"


def read_file(
    ws: Workspace,
    path: Annotated[
        str, Field(description="File path relative to the repo root, e.g. 'billing/invoice.py'."), RepoPath
    ],
    *,
    timeout_s: float = READ_FILE_TIMEOUT_S,
) -> str:
    """Return the text of a source or text file in the repository.

    Use it to read a test body or the module a search hit points to.
    """
    deadline = time.monotonic() + timeout_s
    with ws.text_file(path).open(encoding="utf-8", errors="replace") as fh:
        text = fh.read(READ_FILE_MAX_CHARS + 1)
        if len(text) > READ_FILE_MAX_CHARS:
            rest = 0
            while chunk := fh.read(READ_FILE_CHUNK_CHARS):  # only counted, a chunk at a time, until the bound
                rest += len(chunk)
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"read_file {path}: counting past its first {READ_FILE_MAX_CHARS} characters "
                        f"took over {timeout_s:g}s"
                    )
            cut = len(text) - READ_FILE_MAX_CHARS + rest
            text = text[:READ_FILE_MAX_CHARS] + f"\n[... truncated: {cut} more characters not shown ...]"
    return text


def search_code(
    ws: Workspace,
    query: Annotated[
        str,
        Field(
            description="A regular expression or plain text, e.g. 'def apply_discount'.",
            max_length=SEARCH_MAX_QUERY_CHARS,
        ),
    ],
    *,
    timeout_s: float = SEARCH_TIMEOUT_S,
) -> str:
    """Search the repository's source files and return matching lines as `path:line: text`.

    Use it to find where a function or name is defined or used.
    """
    if not query.strip():
        raise ToolError("empty query; search for a name, e.g. 'def apply_discount'")
    # `regex` speaks Python's syntax and takes a timeout: a pattern that backtracks without end
    # (nested quantifiers) is stopped at the deadline instead of holding the run.
    try:
        pattern = regex.compile(query)
    except (regex.error, OverflowError, RecursionError):
        pattern = regex.compile(regex.escape(query))
    bound = min(timeout_s, SEARCH_TIMEOUT_S)
    deadline = time.monotonic() + bound
    hits: list[str] = []
    searched = skipped = 0
    for path in ws.text_files():
        if path.stat().st_size > SEARCH_MAX_FILE_BYTES:
            skipped += 1
            continue
        searched += 1
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            try:
                found = pattern.search(line, timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise TimeoutError(
                    f"search_code stopped after {bound:g}s: the pattern backtracks "
                    "too much (nested quantifiers?); search for plain text or a simpler pattern"
                ) from None
            if found:
                hits.append(f"{ws.relative(path)}:{number}: {line.strip()[:200]}")
    note = f" ({skipped} files over {SEARCH_MAX_FILE_BYTES // 1_000_000} MB not searched)" if skipped else ""
    if not hits:
        return f"no matches for {preview(query, 120)!r} in {searched} files{note}"
    shown = hits[:SEARCH_MAX_HITS]
    if len(hits) > len(shown):
        shown.append(f"[... {len(hits) - len(shown)} more matches not shown; narrow the query ...]")
    return "\n".join(shown) + (f"\n{note.strip()}" if note else "")


def write_file(
    ws: Workspace,
    path: Annotated[str, Field(description="File path relative to the repo root."), RepoPath],
    content: Annotated[str, Field(description="The complete new text of the file.")],
) -> str:
    """Replace a file's whole content. An effect: it runs only after approval.

    Use it only to apply a fix the investigation has established.
    """
    resolved = ws.resolve(path)
    if resolved.is_dir():
        raise IsADirectoryError(f"{path} is a directory")
    if resolved.exists() and not resolved.is_file():  # a FIFO or socket: opening it could block
        raise ToolError(f"{path}: not a regular file")
    if resolved.suffix not in TEXT_SUFFIXES:
        raise ToolError(f"{path}: only source and text files can be written")
    resolved.parent.mkdir(parents=True, exist_ok=True)
    resolved.write_text(content, encoding="utf-8")
    return f"wrote {len(content)} characters to {path}"
