"""The shared tool set: plain typed functions over a `Workspace`.

Each tool's first parameter is the workspace, bound by the `Toolset`; the
remaining parameters are what the model fills in, and their annotations and
the docstring's first paragraph become the schema and description the model
sees. A tool reports a failure by raising; the `Guard` turns it into an
observation.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from typing import Annotated

from pydantic import Field

from shared_tools.workspace import TEXT_SUFFIXES, Workspace

RUN_TESTS_TIMEOUT_S = 60.0
RUN_TESTS_MAX_CHARS = 8_000
READ_FILE_MAX_CHARS = 20_000
SEARCH_MAX_HITS = 40


class ToolError(Exception):
    """A tool could not do what was asked; the message tells the model what to do instead."""


def _not_found(ws: Workspace, path: str) -> FileNotFoundError:
    hint = ws.suggest(path)
    tail = f" — did you mean {hint}?" if hint else " — use search_code to find the right path"
    return FileNotFoundError(f"{path}{tail}")


def tail_truncate(text: str, limit: int) -> str:
    """Keep the last `limit` characters (where test failures are), marking the cut."""
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} earlier characters truncated ...]\n" + text[-limit:]


def run_tests(
    ws: Workspace,
    target: Annotated[
        str, Field(description="A test file or test id relative to the repo root, e.g. 'tests/test_x.py::test_y'.")
    ],
    *,
    timeout_s: float = RUN_TESTS_TIMEOUT_S,
    max_chars: int = RUN_TESTS_MAX_CHARS,
) -> str:
    """Run pytest on a test file or a single test and return its exit code and output.

    Use it first, to see whether a test fails and with which assertion, and
    again after a change to confirm a fix.
    """
    file_part = target.split("::", 1)[0]
    path = ws.resolve(file_part)
    if not path.is_file():
        raise _not_found(ws, file_part)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--color=no", target]
    # No plugin autoload: the fixture repo needs plain pytest, and the host's plugins cost seconds per run.
    # COLUMNS: pytest cuts its one-line failure summary to the terminal width; keep the assertion whole.
    env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "COLUMNS": "200",
    }
    env.pop("PYTEST_ADDOPTS", None)
    # Its own session (process group) so a timeout kills pytest and everything it spawned.
    proc = subprocess.Popen(
        cmd, cwd=ws.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        raise TimeoutError(
            f"pytest {target} did not finish within {timeout_s:g}s and was killed; "
            f"run a narrower target. Last output:\n{tail_truncate(output or '', 2_000)}"
        ) from None
    return f"exit code {proc.returncode}\n{tail_truncate(output, max_chars)}"


def read_file(
    ws: Workspace,
    path: Annotated[str, Field(description="File path relative to the repo root, e.g. 'billing/invoice.py'.")],
) -> str:
    """Return the text of a source or text file in the repository.

    Use it to read a test body or the module a search hit points to.
    """
    resolved = ws.resolve(path)
    if resolved.is_dir():
        listing = sorted(ws.relative(p) for p in ws.text_files() if p.is_relative_to(resolved))
        raise IsADirectoryError(f"{path} is a directory; files in it: {', '.join(listing[:30]) or 'none'}")
    if not resolved.is_file():
        raise _not_found(ws, path)
    if resolved.suffix not in TEXT_SUFFIXES:
        raise ToolError(f"{path}: only source and text files can be read ({', '.join(sorted(TEXT_SUFFIXES))})")
    text = resolved.read_text(encoding="utf-8", errors="replace")
    if len(text) > READ_FILE_MAX_CHARS:
        cut = len(text) - READ_FILE_MAX_CHARS
        text = text[:READ_FILE_MAX_CHARS] + f"\n[... truncated: {cut} more characters not shown ...]"
    return text


def search_code(
    ws: Workspace,
    query: Annotated[str, Field(description="A regular expression or plain text, e.g. 'def apply_discount'.")],
) -> str:
    """Search the repository's source files and return matching lines as `path:line: text`.

    Use it to find where a function or name is defined or used.
    """
    if not query.strip():
        raise ToolError("empty query; search for a name, e.g. 'def apply_discount'")
    try:
        pattern = re.compile(query)
    except re.error:
        pattern = re.compile(re.escape(query))
    hits: list[str] = []
    searched = 0
    for path in ws.text_files():
        searched += 1
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{ws.relative(path)}:{number}: {line.strip()[:200]}")
    if not hits:
        return f"no matches for {query!r} in {searched} files"
    shown = hits[:SEARCH_MAX_HITS]
    if len(hits) > len(shown):
        shown.append(f"[... {len(hits) - len(shown)} more matches not shown; narrow the query ...]")
    return "\n".join(shown)


def write_file(
    ws: Workspace,
    path: Annotated[str, Field(description="File path relative to the repo root.")],
    content: Annotated[str, Field(description="The complete new text of the file.")],
) -> str:
    """Replace a file's whole content. An effect: it runs only after approval.

    Use it only to apply a fix the investigation has established.
    """
    resolved = ws.resolve(path)
    if resolved.is_dir():
        raise IsADirectoryError(f"{path} is a directory")
    if resolved.suffix not in TEXT_SUFFIXES:
        raise ToolError(f"{path}: only source and text files can be written")
    resolved.parent.mkdir(parents=True, exist_ok=True)
    resolved.write_text(content, encoding="utf-8")
    return f"wrote {len(content)} characters to {path}"
