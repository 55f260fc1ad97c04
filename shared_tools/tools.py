"""The shared tool set: plain typed functions over a `Workspace`.

Each tool's first parameter is the workspace, bound by the `Guard`; the
remaining parameters are what the model fills in, and their annotations and
the docstring become the schema and description the model sees. A tool
reports a failure by raising; the `Guard` turns it into an observation.

`run_tests` runs pytest by default, or a suite's own test command (a list of
arguments, never a shell string) with the same confinement (`confine`: the
workspace root, the environment allowlist, the reaper, the sandbox), on a
target that holds nothing a shell would act on (`check_target`).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import PurePath
from typing import Annotated

import regex
from pydantic import AfterValidator, Field

from looplab.shared_tools.confine import (
    child_environment,
    live_tests,
    start,
    stop,
    wait,
    with_output_tail,
)
from looplab.shared_tools.reaper import NOT_STARTED
from looplab.shared_tools.records import preview
from looplab.shared_tools.workspace import TEXT_SUFFIXES, PathRefused, ToolError, Workspace

__all__ = ["check_target", "live_tests", "read_file", "search_code"]

RUN_TESTS_TIMEOUT_S = 60.0
RUN_TESTS_MAX_CHARS = 8_000
#: Bytes of a test run's output held while it runs (its tail); what the model reads is cut to `max_chars` of them.
RUN_TESTS_READ_BYTES = 1 << 20
READ_FILE_MAX_CHARS = 20_000
#: read_file's own bound: counting what is cut from a huge file stops there.
READ_FILE_TIMEOUT_S = 5.0
#: Characters read at a time while counting the rest of a truncated file.
READ_FILE_CHUNK_CHARS = 1 << 20
SEARCH_MAX_HITS = 40
SEARCH_TIMEOUT_S = 5.0
SEARCH_MAX_QUERY_CHARS = 1_000
SEARCH_MAX_FILE_BYTES = 2_000_000

#: Config files pytest reads, in the order it looks for them; the first one in the workspace is pinned.
PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")

#: In a suite's test command, the argument text the target replaces; a command without it gets the target appended.
TARGET_PLACEHOLDER = "{target}"
#: A test command's first word that means the interpreter looplab runs under.
_PYTHON_NAMES = ("python", "python3")
#: Characters a target never holds: a shell's operators, substitutions, redirections, quotes and escape.
TARGET_FORBIDDEN = frozenset(";&|$`()<>'\"\\")
#: What a target may be, as the model is told when one is refused.
TARGET_RULE = (
    "a path relative to the repository root, optionally with a test id "
    "(path, path::name, path::Class::name, path::name[param-id]); "
    "without ; & | $ ` ( ) < > ' \" \\, a newline, a tab or another control character"
)
#: A target's shape: a path (no ':' or brackets), optionally '::' names (letters, digits, '_', '.') and, last, one
#: bracketed parameter id; `check_target` also refuses `TARGET_FORBIDDEN` and unprintable characters.
_TARGET_SHAPE = re.compile(r"[^:\[\]]+(?:(?:::[\w.]+)+(?:\[.*\])?)?", re.DOTALL)


def _tidy(path: str) -> str:
    """One spelling per path (`./a.py`, `a.py ` and `a//a.py`'s cousins): what repetition detection compares."""
    head, sep, test = path.strip().partition("::")
    return (os.path.normpath(head) if head else head) + sep + test


RepoPath = AfterValidator(_tidy)


def tail_truncate(text: str, limit: int, *, cut: int = 0) -> str:
    """Keep the last `limit` characters (where test failures are), marking the cut (`cut`: characters already
    dropped before `text`)."""
    dropped = cut + max(0, len(text) - limit)
    if not dropped:
        return text
    return f"[... {dropped} earlier characters truncated ...]\n" + text[max(0, len(text) - limit) :]


def run_tests(
    ws: Workspace,
    target: Annotated[
        str,
        # What every model is offered, unchanged since the caps were measured: a target the rule refuses
        # (`check_target`) is told what a target may be.
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
    # A target is a path and at most a test id (`check_target`), whichever command runs it.
    if command is not None:  # a suite's own test command (bound by `guard.builtin_tool`)
        line = command_for_target(ws, command, target)
        return _run_confined(ws, line, f"{PurePath(command[0]).name} {target}", timeout_s, max_chars)
    file_part = check_target(target).split("::", 1)[0]
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


def check_target(target: str) -> str:
    """`target` if it is a test target, else `PathRefused` with one line saying what a target may be.

    A target is `path`, `path::name`, `path::Class::name` or `path::name[param-id]`: the path has no `:` or
    brackets and does not start with `-` (an option); a name is letters, digits, `_` and `.`; the parameter id,
    last, may hold `=`, `,`, `:`, brackets and other printable characters. Spaces are printable; no part holds
    one of `TARGET_FORBIDDEN` (a backtick, a backslash, `; & | $ ( ) < > ' "`) or an unprintable character (a
    newline, a tab, another control character): so a test command that passes it through a shell
    (`sh -c '... {target}'`) runs no other command, redirects nothing and leaves no quote open.
    """
    shown = repr(preview(target, 120))
    if target.startswith("-"):
        raise PathRefused(
            f"{shown}: a target starting with '-' would be read as an option; "
            "give a test file relative to the repository root"
        )
    if not target.isprintable() or not TARGET_FORBIDDEN.isdisjoint(target) or not _TARGET_SHAPE.fullmatch(target):
        raise PathRefused(f"{shown}: not a test target; a target is {TARGET_RULE}")
    return target


def command_for_target(ws: Workspace, command: Sequence[str], target: str) -> list[str]:
    """The argument list that runs `command` on `target` in `ws`.

    The target is one argument: it replaces `{target}` in every argument holding it, or is appended. It must
    be a test target (`check_target`: a path and at most a test id, nothing a shell acts on), and its file part
    (before any `::`) must stay inside the workspace. `python`/`python3` as the program is looplab's own
    interpreter; another program is looked up on PATH (or in the workspace when it holds a `/`); one not found
    is a `ToolError` saying so.
    """
    program, *args = check_test_command(command)
    ws.resolve(check_target(target).split("::", 1)[0])
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


#: The longest the output is read once the command has ended or was killed, and never past the time the run has
#: left (but for `_DRAIN_MIN_S`): it ends with everything it started, so the pipe's end is at most a read away.
DRAIN_S = 0.5
#: What is left of the output after a kill at the deadline is still read for this long.
_DRAIN_MIN_S = 0.05
#: How the reaper says it could not start the command (then it exits with `NOT_STARTED`).
_NOT_STARTED_PREFIX = "looplab: cannot start "


def _run_confined(ws: Workspace, cmd: list[str], label: str, timeout_s: float, max_chars: int) -> str:
    """Run `cmd` confined (`confine.start`: the workspace root, the allowlisted environment, the reaper, the
    sandbox), ended with everything it started at `timeout_s` and when it ends; `exit code N` and the tail of
    its output.

    Returns within `timeout_s` plus the time to end it (the reaper's, about 50 ms) and `_DRAIN_MIN_S`.
    """
    ends = time.monotonic() + timeout_s
    proc, tail = with_output_tail(lambda fd: start(ws, cmd, stdout=fd, stderr=fd), RUN_TESTS_READ_BYTES)
    finished = False
    try:
        finished = wait(proc, timeout_s) is not None
    finally:
        code = stop(ws, proc)  # whatever the tests left running, in any session, goes too
        kept = tail.close(min(DRAIN_S, max(ends - time.monotonic(), _DRAIN_MIN_S)))
    # Text as a pipe in text mode reads it: undecodable bytes replaced, newlines as `\n`.
    output = kept.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    if not finished:
        raise TimeoutError(
            f"{label} did not finish within {timeout_s:g}s and was killed; "
            f"run a narrower target. Last output:\n{tail_truncate(output, 2_000, cut=tail.dropped)}"
        )
    if code == NOT_STARTED and output.startswith(_NOT_STARTED_PREFIX):
        why = output.rpartition(": ")[2].strip()
        raise ToolError(f"the test command could not start {label.partition(' ')[0]}: {why}")
    return f"exit code {code}\n{tail_truncate(output, max_chars, cut=tail.dropped)}"


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
    with ws.text_file(path, deadline=deadline).open(encoding="utf-8", errors="replace") as fh:
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
    # At its deadline the search returns what it found, saying after which file it stopped: the model keeps the
    # hits (in a repository too large to search whole, the same search again would stop at the same place).
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
    last: str | None = None  # the last file searched in full
    files = ws.text_files(deadline=deadline)  # the walk too stops at the deadline, however many files there are
    stopped = False
    while not stopped:
        try:
            path = next(files)
            too_big = path.stat().st_size > SEARCH_MAX_FILE_BYTES
            text = "" if too_big else path.read_text(encoding="utf-8", errors="replace")
        except StopIteration:
            break
        except TimeoutError:
            stopped = True
            break
        except OSError:  # gone, or unreadable, since the walk met it
            continue
        if too_big:
            skipped += 1
            continue
        for number, line in enumerate(text.splitlines(), 1):
            started = time.monotonic()
            if started >= deadline:
                stopped = True
                break
            try:
                found = pattern.search(line, timeout=deadline - started)
            except TimeoutError:
                if time.monotonic() - started >= bound / 2:  # this one line took the time: the pattern did
                    raise TimeoutError(
                        f"search_code stopped after {bound:g}s: the pattern backtracks "
                        "too much (nested quantifiers?); search for plain text or a simpler pattern"
                    ) from None
                stopped = True
                break
            if found:
                hits.append(f"{ws.relative(path)}:{number}: {line.strip()[:200]}")
        else:
            searched, last = searched + 1, ws.relative(path)
    note = f" ({skipped} files over {SEARCH_MAX_FILE_BYTES // 1_000_000} MB not searched)" if skipped else ""
    if stopped:
        rest = f"; the files after {last} were not searched" if last else ""
        note += f" (the search stopped at its {bound:g}s deadline after {searched} files{rest})"
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
