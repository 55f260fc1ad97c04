"""`looplab run` and `eval` say what they are loading before the imports that take their first second.

On a terminal a status line goes to stderr right after the arguments are parsed, and is erased before anything
else is printed; in a log or a pipe nothing is added.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from looplab.cli import main, running

#: What `run` and `eval` import before they can print anything (pydantic models, the harness, the report, rich).
HEAVY = ("pydantic", "rich", "looplab.records.results", "looplab.run.harness", "looplab.views.report")

#: Run in a fresh interpreter, so that nothing is imported yet: stderr claims to be a terminal and notes, for each
#: write, which of HEAVY were loaded at that moment.
_PROBE = """
import io, json, sys
HEAVY = {heavy!r}
writes = []

class Terminal(io.StringIO):
    def isatty(self):
        return True

    def write(self, text):
        if text:
            writes.append([text, [m for m in HEAVY if m in sys.modules]])
        return super().write(text)

sys.stderr = Terminal()
from looplab.cli import main
code = main([{command!r}, "--case", "no-such-case"])
sys.stdout.write(json.dumps({{"code": code, "writes": writes}}))
"""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("command", ["eval", "run"])
def test_the_status_line_is_written_before_the_heavy_imports_and_erased_before_the_error(command: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")} | {"COLUMNS": "100"}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY, command=command)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["code"] == 2  # the unknown case: bad input, after the imports
    (first, loaded_then), (second, _), (third, _) = found["writes"][:3]
    assert f"looplab {command}: loading the harness and the report ..." in first
    assert loaded_then == [], f"already imported when the status line was written: {loaded_then}"
    assert second == "\r\x1b[2K"  # erased: the error line starts at the line's start, on a clean line
    assert third.startswith("looplab: unknown case 'no-such-case'")


def test_not_on_a_terminal_nothing_is_added(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--case", "no-such-case"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("looplab: unknown case 'no-such-case'") and "loading" not in err


def test_the_status_line_fits_a_narrow_terminal_and_is_plain_under_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", "30")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("TERM", raising=False)
    with running.loading("eval"):
        assert terminal.getvalue() == "looplab eval: loading the har"  # 29 columns: the cursor stays on the line
    assert terminal.getvalue().endswith("\r\x1b[2K")


def test_a_dumb_terminal_gets_no_status_line(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("TERM", "dumb")  # it cannot erase the line
    with running.loading("eval"):
        pass
    assert terminal.getvalue() == ""


def test_python_m_looplab_cli_runs_the_command() -> None:
    """`python -m looplab.cli`, as `looplab.measure.local_llm` and `bench_matrix` start it."""
    done = subprocess.run(
        [sys.executable, "-m", "looplab.cli", "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and done.stdout.startswith("looplab "), done.stderr
