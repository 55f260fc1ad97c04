"""A runner process cannot outlive, outgrow or out-read looplab.

Each test runs a hostile child through `run_bounded` (or a whole run of `--runner external`): one that
ignores SIGTERM, one whose grandchild double-forks into a session of its own, one that prints hundreds
of megabytes, one whose outcome file is a FIFO or a link to /dev/zero, one that reads its parent's
environment through /proc.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import looplab.adapters.boundary.processes as child
from looplab.adapters.boundary.processes import OUTCOME_MAX_BYTES, TAIL_BYTES, run_bounded
from looplab.adapters.contract.errors import ChildFailed
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.runners import _child
from looplab.adapters.runners.external import EXTERNAL_COMMAND_ENV
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools.confine import OutputTail
from tests.paths import REPO
from tests.runs import run_runner

ROOT = REPO
linux_only = pytest.mark.skipif(not child.LINUX, reason="the reaper and PR_SET_DUMPABLE are Linux's")


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def kill_if_left(pid_file: Path) -> None:
    """Cleanup after a failed test: the grandchild it left, if any."""
    if pid_file.is_file() and not gone(pid := int(pid_file.read_text()), 0):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def gone(pid: int, within_s: float = 2.0) -> bool:
    """Whether `pid` has ended and been reaped (a zombie counts as gone only once reaped) within the bound."""
    ends = time.monotonic() + within_s
    while time.monotonic() < ends:
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.02)
    return False


def wait_for_file(path: Path, within_s: float = 10.0) -> str:
    ends = time.monotonic() + within_s
    while not (path.is_file() and (text := path.read_text().strip())):
        if time.monotonic() >= ends:
            raise AssertionError(f"{path} was not written within {within_s} s")
        time.sleep(0.02)
    return text


# --- 1. time: a runner that ignores SIGTERM ---------------------------------------------------------

IGNORES_SIGTERM = """
    import signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)
"""


@pytest.mark.parametrize("reaps", [True, False], ids=["reaper", "process-group"])
def test_a_child_that_ignores_sigterm_is_killed_shortly_after_its_bound(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, reaps: bool
) -> None:
    if reaps and not child.LINUX:
        pytest.skip("the reaper is Linux's")
    monkeypatch.setattr(child, "REAPS", reaps)  # False: how it runs where there is no reaper
    started = time.monotonic()
    code, _ = run_bounded(python(IGNORES_SIGTERM), dict(os.environ), tmp_path, 0.5)
    assert code is None and time.monotonic() - started < 0.5 + 1.0


@pytest.mark.parametrize("max_seconds", [1.0, 2.0])
def test_a_run_whose_child_ignores_sigterm_ends_within_max_seconds_plus_one(
    monkeypatch: pytest.MonkeyPatch, model_server: ScriptedModelServer, max_seconds: float
) -> None:
    monkeypatch.setenv(EXTERNAL_COMMAND_ENV, shlex.join(python(IGNORES_SIGTERM)))
    result = run_runner("external", model_server, Limits(max_seconds=max_seconds))
    assert result.stop_reason == StopReason.TIMEOUT, result.stop_detail
    assert result.totals.wall_s < max_seconds + 1.0


# --- 2. descendants: a grandchild in a session of its own -------------------------------------------


def double_fork(pid_file: Path, then: str = "pass") -> list[str]:
    """A child whose grandchild leaves its session (`setsid`), writes its pid and sleeps 60 s; then `then`."""
    return python(f"""
        import os, time
        if os.fork() == 0:
            if os.fork() == 0:
                os.setsid()
                with open({str(pid_file)!r} + ".tmp", "w") as out:
                    out.write(str(os.getpid()))
                os.rename({str(pid_file)!r} + ".tmp", {str(pid_file)!r})
                time.sleep(60)
            os._exit(0)
        while not os.path.exists({str(pid_file)!r}):
            time.sleep(0.01)
        {then}
    """)


@linux_only
@pytest.mark.parametrize(("then", "bound_s"), [("pass", 10.0), ("time.sleep(60)", 0.5)], ids=["exits", "at-bound"])
def test_a_double_forked_setsid_grandchild_ends_with_the_child(tmp_path: Path, then: str, bound_s: float) -> None:
    pid_file = tmp_path / "grandchild.pid"
    try:
        run_bounded(double_fork(pid_file, then), dict(os.environ), tmp_path, bound_s)
        grandchild = int(wait_for_file(pid_file, 0))
        assert gone(grandchild), f"the grandchild {grandchild} outlived the run"
    finally:
        kill_if_left(pid_file)


@linux_only
def test_what_a_child_started_ends_when_looplab_dies(tmp_path: Path) -> None:
    """looplab killed outright (no cleanup runs): the reaper is told by the kernel and ends the grandchild."""
    pid_file = tmp_path / "grandchild.pid"
    looplab = subprocess.Popen(
        python(f"""
            from pathlib import Path
            from looplab.adapters.boundary.processes import run_bounded
            run_bounded({double_fork(pid_file, "time.sleep(60)")!r}, {{"PATH": "/usr/bin:/bin"}}, Path("/"), 60)
        """),
        cwd=ROOT,
    )
    try:
        grandchild = int(wait_for_file(pid_file))
        looplab.kill()
        looplab.wait(5)
        assert gone(grandchild), f"the grandchild {grandchild} outlived looplab"
    finally:
        looplab.kill()
        looplab.wait(5)
        kill_if_left(pid_file)


# --- 4. output: a bounded tail in bounded memory ----------------------------------------------------


def test_a_child_printing_200_mb_leaves_a_bounded_tail_in_bounded_memory(tmp_path: Path) -> None:
    writer = python("""
        import os
        block = b"x" * 1_048_575 + b"\\n"
        for _ in range(200):
            os.write(1, block)
        os.write(2, b"the last line\\n")
    """)
    measure = python(f"""
        import json, resource, pathlib
        from looplab.adapters.boundary.processes import run_bounded
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        code, lines = run_bounded({writer!r}, {{}}, pathlib.Path({str(tmp_path)!r}), 30)
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(json.dumps([code, sum(len(line) + 1 for line in lines), lines[-1], grew]))
    """)
    done = subprocess.run(measure, cwd=ROOT, capture_output=True, text=True, timeout=60)
    code, kept, last, grew_kb = json.loads(done.stdout or "null") or (None, 0, "", 0)
    assert code == 0 and last == "the last line", done.stderr
    assert kept <= TAIL_BYTES
    assert grew_kb < 32_000, f"peak memory grew by {grew_kb} KB"
    assert not list(tmp_path.iterdir())  # nothing spooled to disk


@settings(deadline=None)
@given(st.lists(st.binary(max_size=3000), max_size=30), st.integers(min_value=1, max_value=5000))
def test_the_tail_is_the_last_bytes_written(chunks: list[bytes], limit: int) -> None:
    reading, writing = os.pipe()
    tail = OutputTail(reading, limit)
    feeder = threading.Thread(target=lambda: [os.write(writing, c) for c in chunks] and None)
    feeder.start()
    feeder.join(5)
    os.close(writing)
    assert tail.close(5) == b"".join(chunks)[-limit:]


# --- 5. the outcome file ----------------------------------------------------------------------------


def _make(kind: str, path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "link to a regular file":
        (path.parent / "real.json").write_text('{"ended": "returned", "text": "hi"}')
        path.symlink_to(path.parent / "real.json")
    elif kind == "directory":
        path.mkdir()
    elif kind == "huge file":
        with open(path, "wb") as out:
            out.truncate(8 << 30)  # sparse: 8 GiB of zeros, no disk used
    elif kind == "over the bound":
        path.write_text(json.dumps({"ended": "returned", "text": "x" * OUTCOME_MAX_BYTES}))
    elif kind == "invalid JSON":
        path.write_text('{"ended": "returned", ')
    elif kind == "not UTF-8":
        path.write_bytes(b'{"text": "\xff"}')
    elif kind == "JSON not an object":
        path.write_text('["returned", "hi"]')


BAD_OUTCOMES = {
    "fifo": "a FIFO",
    "link to /dev/zero": "a symlink, not a regular file",
    "link to a regular file": "a symlink, not a regular file",
    "directory": "a folder, not a regular file",
    "huge file": f"over the {OUTCOME_MAX_BYTES:,} looplab reads",
    "over the bound": f"over the {OUTCOME_MAX_BYTES:,} looplab reads",
    "invalid JSON": "not JSON",
    "not UTF-8": "not JSON in UTF-8",
    "JSON not an object": "JSON array, not an object",
}


def read_bounded(path: Path) -> dict | ChildFailed | None:
    """`_read(path)` on a thread joined within 5 s, so a read that would block fails the test instead."""
    got: list[dict | ChildFailed | None] = []

    def read() -> None:
        try:
            got.append(_child._read(path))
        except ChildFailed as exc:
            got.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive() and path.exists() and path.is_fifo():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # frees the blocked reader
    assert got, "reading the outcome did not finish within 5 s"
    return got[0]


@pytest.mark.parametrize("kind", BAD_OUTCOMES)
def test_an_outcome_that_is_not_a_small_regular_json_object_is_refused_saying_why(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "outcome.json"
    _make(kind, path)
    got = read_bounded(path)
    assert isinstance(got, ChildFailed) and BAD_OUTCOMES[kind] in str(got), got
    assert "\n" not in str(got)


def test_a_missing_outcome_is_none_and_a_good_one_is_read(tmp_path: Path) -> None:
    path = tmp_path / "outcome.json"
    assert read_bounded(path) is None
    path.write_text('{"ended": "returned", "text": "hi"}')
    assert read_bounded(path) == {"ended": "returned", "text": "hi"}


@settings(deadline=None)
@given(
    st.binary(max_size=200)
    | st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=5,
    )
)
def test_any_outcome_content_is_an_object_or_a_one_line_refusal(content: object) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "outcome.json"
        path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
        got = read_bounded(path)
    assert isinstance(got, dict) or (isinstance(got, ChildFailed) and "\n" not in str(got))


def test_a_run_whose_outcome_links_to_dev_zero_ends_as_an_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, model_server: ScriptedModelServer
) -> None:
    link = "import os; os.symlink('/dev/zero', os.environ['LOOPLAB_RESULT'])"
    monkeypatch.setenv(EXTERNAL_COMMAND_ENV, shlex.join(python(link)))
    result = run_runner("external", model_server)
    assert result.stop_reason == StopReason.ERROR
    assert "outcome (LOOPLAB_RESULT): a symlink, not a regular file" in (result.stop_detail or "")


# --- 6. the provider key: looplab's environment closed to its children ------------------------------

#: Drops every capability of the process that runs it: root would otherwise read anything, and a process
#: may not read one whose capabilities its own do not include. Run by both "looplab" and its child, it
#: leaves two processes of one user with equal (no) privileges, as a user's looplab and its runner are.
DROP_CAPABILITIES = """
import ctypes, os
class Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
class Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]
if ctypes.CDLL(None, use_errno=True).capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()) != 0:
    raise SystemExit(f"capset failed: {os.strerror(ctypes.get_errno())}")
"""

READS_PARENTS_ENVIRON = (
    DROP_CAPABILITIES
    + """
pid = os.environ["LOOPLAB_PID"]
try:
    environ = open(f"/proc/{pid}/environ", "rb").read()
    print("read", b"sk-provider-secret" in environ)
except PermissionError:
    print("denied")
try:
    open(f"/proc/{pid}/mem", "rb").close()
    print("mem open")
except PermissionError:
    print("mem denied")
"""
)


@linux_only
@pytest.mark.parametrize("with_key", [True, False], ids=["key-set", "no-key"])
def test_a_child_cannot_read_the_environment_of_a_looplab_holding_a_key(with_key: bool) -> None:
    looplab = python(
        DROP_CAPABILITIES
        + f"""
import pathlib
from looplab.adapters.boundary.processes import run_bounded
env = {{"PATH": os.environ["PATH"], "LOOPLAB_PID": str(os.getpid())}}
code, lines = run_bounded({python(READS_PARENTS_ENVIRON)!r}, env, pathlib.Path("/"), 30)
print(code, *lines, sep="\\n")
"""
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    if with_key:
        env["OPENAI_API_KEY"] = "sk-provider-secret"
    done = subprocess.run(looplab, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    code, *lines = done.stdout.splitlines() or ["none"]
    assert code == "0", (done.stdout, done.stderr)
    # without the key the same child reads it all: the test can tell the two apart
    assert lines == (["denied", "mem denied"] if with_key else ["read False", "mem open"])


@given(
    st.dictionaries(st.text(max_size=_child.COUNTER_NAME_MAX + 20), st.integers() | st.booleans() | st.text())
    | st.lists(st.integers())
    | st.none()
)
def test_an_outcomes_counters_keep_only_named_whole_numbers_within_bounds(raw: object) -> None:
    kept = _child._counters(raw)
    assert len(kept) <= _child.COUNTERS_MAX
    assert all(len(k) <= _child.COUNTER_NAME_MAX and isinstance(v, int) for k, v in kept.items())
    if isinstance(raw, dict):  # the first good ones, in the program's order
        good = [k for k, v in raw.items() if len(k) <= _child.COUNTER_NAME_MAX and isinstance(v, int)]
        assert list(kept) == good[: _child.COUNTERS_MAX]


def test_the_counters_a_program_writes_reach_the_record_and_bad_ones_do_not(
    monkeypatch: pytest.MonkeyPatch, model_server: ScriptedModelServer
) -> None:
    counters = {"steps.done": 2, "flag": True, "name": "x", "x" * (_child.COUNTER_NAME_MAX + 1): 1}
    outcome = {"ended": "returned", "text": None, "counters": counters}
    write = f"import json, os; json.dump({outcome!r}, open(os.environ['LOOPLAB_RESULT'], 'w'))"
    monkeypatch.setenv(EXTERNAL_COMMAND_ENV, shlex.join(python(write)))
    result = run_runner("external", model_server)
    assert result.native_end is not None and result.native_end.counters == {"steps.done": 2}
