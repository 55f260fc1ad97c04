from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from looplab.shared_tools import Workspace, tools


def test_run_tests_reports_the_failing_assertion(workspace: Workspace) -> None:
    out = tools.run_tests(workspace, "tests/test_invoice.py::test_invoice_total")
    assert out.startswith("exit code 1")
    assert "assert Decimal('90.25') == Decimal('90.00')" in out


def test_run_tests_on_a_passing_test(workspace: Workspace) -> None:
    out = tools.run_tests(workspace, "tests/test_invoice.py::test_subtotal")
    assert out.startswith("exit code 0") and "1 passed" in out


def test_run_tests_on_a_missing_file_suggests_the_right_one(workspace: Workspace) -> None:
    with pytest.raises(FileNotFoundError, match="did you mean tests/test_invoice.py"):
        tools.run_tests(workspace, "tests/test_invoce.py::test_invoice_total")


def test_run_tests_output_keeps_the_tail(workspace: Workspace) -> None:
    out = tools.run_tests(workspace, "tests/test_invoice.py", max_chars=200)
    assert "earlier characters truncated" in out
    assert re.search(r"\n\d+ failed, \d+ passed in [\d.]+s$", out.rstrip())  # pytest's closing line survives


@pytest.fixture
def slow_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "slow"
    (repo / "tests").mkdir(parents=True)
    # The test starts a grandchild that would outlive a plain kill of pytest.
    (repo / "tests" / "test_slow.py").write_text(
        "import subprocess, sys, time, pathlib\n"
        "def test_slow():\n"
        "    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "    pathlib.Path('child.pid').write_text(str(child.pid))\n"
        "    time.sleep(60)\n"
    )
    return repo


def test_run_tests_timeout_kills_the_whole_process_group(slow_repo: Path) -> None:
    with Workspace(slow_repo) as ws:
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="killed"):
            tools.run_tests(ws, "tests/test_slow.py", timeout_s=2.0)
        assert time.monotonic() - started < 5
        pid = int((ws.root / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        # a killed child stays a zombie until init reaps it; check its state
        state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
        if state in ("Z", "X"):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"grandchild {pid} survived the timeout")


def test_read_file_returns_the_text(workspace: Workspace) -> None:
    assert "def apply_discount" in tools.read_file(workspace, "billing/discount.py")


def test_read_file_truncates_long_files_with_a_marker(workspace: Workspace) -> None:
    (workspace.root / "big.txt").write_text("x" * 25_000)
    text = tools.read_file(workspace, "big.txt")
    assert text.startswith("x" * 100) and "[... truncated: 5000 more characters not shown ...]" in text
    assert len(text) < 20_100


def test_read_file_stops_counting_a_huge_file_at_its_bound(workspace: Workspace) -> None:
    """What is cut is only counted, and counting stops at `timeout_s`: read_file bounds itself, as the Guard
    trusts it to (it runs on the calling thread)."""
    (workspace.root / "huge.txt").write_text("x" * (tools.READ_FILE_MAX_CHARS + 3 * tools.READ_FILE_CHUNK_CHARS))
    with pytest.raises(TimeoutError, match="huge.txt"):
        tools.read_file(workspace, "huge.txt", timeout_s=0.0)
    assert "truncated" in tools.read_file(workspace, "huge.txt")  # with time to count, the marker as before


def test_read_file_refuses_binary_suffixes(workspace: Workspace) -> None:
    (workspace.root / "blob.bin").write_bytes(b"\0\1")
    with pytest.raises(tools.ToolError, match="only source and text files"):
        tools.read_file(workspace, "blob.bin")


def test_read_file_on_a_directory_lists_it(workspace: Workspace) -> None:
    with pytest.raises(IsADirectoryError, match="billing/discount.py"):
        tools.read_file(workspace, "billing")


def test_read_file_missing_suggests(workspace: Workspace) -> None:
    with pytest.raises(FileNotFoundError, match=r"tests/test_invoce.py — did you mean tests/test_invoice.py\?"):
        tools.read_file(workspace, "tests/test_invoce.py")


def test_search_code_returns_path_line_hits(workspace: Workspace) -> None:
    out = tools.search_code(workspace, "def apply_discount")
    assert out.splitlines() == ["billing/discount.py:15: def apply_discount(amount: Decimal, tier: str) -> Decimal:"]


def test_search_code_takes_a_regex_and_falls_back_to_literal(workspace: Workspace) -> None:
    assert "billing/invoice.py" in tools.search_code(workspace, r"def (add|subtotal)\b")
    assert "billing/discount.py:15" in tools.search_code(workspace, "def apply_discount(")


def test_search_code_says_plainly_when_nothing_matched(workspace: Workspace) -> None:
    assert tools.search_code(workspace, "no_such_name_anywhere") == "no matches for 'no_such_name_anywhere' in 7 files"


def test_search_code_caps_hits_and_counts_the_rest(workspace: Workspace) -> None:
    (workspace.root / "many.py").write_text("".join(f"needle_{i} = {i}\n" for i in range(100)))
    lines = tools.search_code(workspace, "needle_").splitlines()
    assert len(lines) == tools.SEARCH_MAX_HITS + 1
    assert lines[-1] == f"[... {100 - tools.SEARCH_MAX_HITS} more matches not shown; narrow the query ...]"


def test_search_code_rejects_an_empty_query(workspace: Workspace) -> None:
    with pytest.raises(tools.ToolError):
        tools.search_code(workspace, "  ")


def test_write_file_writes_inside_the_workspace(workspace: Workspace) -> None:
    assert tools.write_file(workspace, "notes/fix.md", "hello") == "wrote 5 characters to notes/fix.md"
    assert (workspace.root / "notes" / "fix.md").read_text() == "hello"
