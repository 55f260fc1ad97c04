"""How the team's own code runs (a suite's test command, its tool host): confined and bounded.

What holds for a process started here (`start`):

- **Where and with what.** In the workspace root, with an allowlist of looplab's environment
  (`child_environment`: never a provider key), stdin closed unless the caller gives one, in a session
  (process group) of its own.
- **Descendants.** On Linux it runs under a reaper (`shared_tools/reaper.py`, a `PR_SET_CHILD_SUBREAPER`
  process): whatever it starts, in any session or process group (a double fork and `setsid` included),
  is killed and reaped when it ends, when it is stopped (`stop`), when its run is halted
  (`Workspace.processes`), when looplab is interrupted (`live_tests`), and when the thread that started
  it ends or looplab dies (`PR_SET_PDEATHSIG`: start a long-lived process from a thread that outlives it).
  Elsewhere it leads its own process group, which is killed whole: a descendant that leaves the group
  survives there.
- **Sandbox** (`Workspace(sandbox=True)`, `--sandbox`; Linux with bubblewrap). Inside `bwrap`: no network
  (a network namespace of its own with only a loopback, the host's loopback unreachable), its own IPC,
  PID and UTS namespaces where the kernel allows them, every file outside the workspace read-only, a
  private empty `/tmp` (`TMPDIR=/tmp`), a fresh `/dev` and `/proc`, a new session (no terminal to type
  into). It does not limit CPU, memory or disk, does not hide files that are readable anyway (outside
  the workspace they are read-only, not invisible), and is no boundary against a kernel exploit.

A process's output is read by `OutputTail`, which keeps its tail in a buffer of a fixed size.
"""

from __future__ import annotations

import functools
import math
import os
import select
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any

from looplab.shared_tools.live import LEADER_WAIT_S, Live, end_group, hang_up, kill_process_group
from looplab.shared_tools.workspace import ToolError, Workspace

__all__ = ["reaped", "sandbox_problem", "with_output_tail"]

#: What a confined process inherits from looplab's environment: enough to run Python, nothing secret.
#: Provider keys, tokens and any other variable stay out (a failing test would print them).
TEST_ENV_ALLOWED = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")
#: The reaper script; it runs as `python -I -S reaper.py PARENT_PID GRACE_S -- COMMAND ...`.
REAPER = Path(__file__).with_name("reaper.py")
#: Whether confined processes run under the reaper (`PR_SET_CHILD_SUBREAPER` is Linux's).
REAPS = sys.platform.startswith("linux")
#: Seconds the reaper gives descendants between SIGTERM and SIGKILL when it is sent SIGTERM.
TERM_GRACE_S = 0.3
#: The Debian (and Ubuntu, Fedora, Arch) package that provides `bwrap`.
BWRAP_PACKAGE = "bubblewrap"
#: The sandbox's temporary folder: an empty tmpfs of its own.
SANDBOX_TMP = "/tmp"
#: Namespaces a sandbox also gets when the kernel allows them (a network namespace it always gets).
_OPTIONAL_UNSHARE = ("--unshare-ipc", "--unshare-pid", "--unshare-uts")
#: How often an output reader looks whether it was told to stop while the pipe is quiet.
_POLL_MS = 100
_READ_BYTES = 1 << 16


#: The process groups of confined processes still running, so an interrupted looplab can end them all.
live_tests: Live[int] = Live(hang_up, end_group)


def child_environment() -> dict[str, str]:
    """The environment of a confined process: an allowlist of looplab's, plus what makes runs quiet and repeatable."""
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


def confined(ws: Workspace, argv: Sequence[str]) -> list[str]:
    """`argv` wrapped to run confined for `ws`: under the reaper (Linux), and inside bubblewrap when `ws.sandbox`.

    For a process this process starts itself (the reaper checks that its parent is this process); `start`
    also sets its folder, environment, session and bookkeeping. Raises `ToolError` when `ws.sandbox` and no
    sandbox can be made here (`sandbox_problem`).
    """
    line = list(argv)
    if ws.sandbox:
        line = [*_bwrap(ws), *line]
    return reaped(line)


def reaped(argv: Sequence[str], *, reaps: bool = REAPS) -> list[str]:
    """`argv` run under the reaper when `reaps` (Linux; elsewhere `argv` as it is): whatever it starts ends when it
    ends, and SIGTERM to the reaper reaches every descendant, SIGKILL following `TERM_GRACE_S` later."""
    if not reaps:
        return list(argv)
    return [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), f"{TERM_GRACE_S:g}", "--", *argv]


def with_output_tail(
    begin: Callable[[int], subprocess.Popen[Any]], limit: int
) -> tuple[subprocess.Popen[Any], OutputTail]:
    """The process `begin(fd)` starts with its stdout and stderr on `fd`, a pipe of which an `OutputTail` keeps the
    last `limit` bytes; the pipe is closed again if it cannot start (what `begin` raises propagates)."""
    reading, writing = os.pipe()
    try:
        proc = begin(writing)
    except BaseException:
        os.close(reading)
        raise
    finally:
        os.close(writing)  # the child holds its own copy: the tail sees the end when every writer is gone
    return proc, OutputTail(reading, limit)


def start(
    ws: Workspace, argv: Sequence[str], *, env: Mapping[str, str] | None = None, **popen: Any
) -> subprocess.Popen[Any]:
    """Start `argv` confined for `ws`: `confined(ws, argv)` run in the workspace root, with `child_environment()`
    (plus `env`), in a session of its own, registered so that a halted run (`ws.processes`) and an interrupted
    looplab (`live_tests`) end it. End it with `stop`.

    `popen` takes `subprocess.Popen`'s stdin, stdout, stderr and text options (stdin is closed unless given).
    Raises `ToolError` (a one-line reason) when it cannot start; a program that the reaper cannot start exits
    with 127 after one line `looplab: cannot start ...` on its stderr.
    """
    variables = child_environment() | ({"TMPDIR": SANDBOX_TMP} if ws.sandbox else {}) | dict(env or {})
    popen.setdefault("stdin", subprocess.DEVNULL)
    line = confined(ws, argv)
    try:
        proc = subprocess.Popen(line, cwd=ws.root, env=variables, start_new_session=True, **popen)
    except OSError as exc:  # not executable, a bad interpreter line: the caller's observation says why
        raise ToolError(f"could not start {PurePath(argv[0]).name}: {exc.strerror or exc}") from None
    live_tests.add(proc.pid)  # ended at once if looplab is already ending
    ws.processes.add(proc.pid)  # ended at once if the run is already halted
    return proc


def wait(proc: subprocess.Popen[Any], timeout_s: float) -> int | None:
    """`proc`'s exit code once it ends within `timeout_s`, else None.

    Woken the moment it ends, through a pidfd on Linux (`Popen.wait` with a timeout looks in sleeps of up to
    50 ms); elsewhere `Popen.wait`.
    """
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux, or already reaped
        fd = None
    if fd is None:
        try:
            return proc.wait(timeout=max(0.0, timeout_s))
        except subprocess.TimeoutExpired:
            return None
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)  # readable once the process has ended
        if not poller.poll(math.ceil(max(0.0, timeout_s) * 1000)):
            return None
    finally:
        os.close(fd)
    return proc.wait()


def stop(ws: Workspace, proc: subprocess.Popen[Any]) -> int | None:
    """End `proc` (started by `start`) and everything it started, reap it and forget it; its exit code.

    Returns within about `LEADER_WAIT_S` twice, unless a process SIGKILL cannot end holds it.
    """
    try:
        if proc.poll() is None:
            hang_up(proc.pid)  # the reaper SIGKILLs every descendant, in any session, and exits
            wait(proc, LEADER_WAIT_S)
        kill_process_group(proc.pid)  # what is left in its group (all of it, where no reaper leads it)
        wait(proc, LEADER_WAIT_S)
    finally:
        live_tests.discard(proc.pid)
        ws.processes.discard(proc.pid)
    return proc.returncode


def sandbox_problem() -> str | None:
    """Why no sandbox can be made on this machine, in one line; None when it can (checked once a process)."""
    return _probe()[1]


@functools.cache
def _probe() -> tuple[tuple[str, ...], str | None]:
    """The `--unshare-*` options a sandbox gets here, or why there is no sandbox."""
    if not sys.platform.startswith("linux"):
        return (), f"the sandbox runs on Linux only (bubblewrap); this is {sys.platform}"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return (), f"bubblewrap (bwrap) is not on PATH; install the Debian package {BWRAP_PACKAGE!r}"
    base = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--die-with-parent", "--new-session")
    why = "it failed"
    for unshare in (("--unshare-net", *_OPTIONAL_UNSHARE), ("--unshare-net",)):  # the most the kernel allows
        try:
            done = subprocess.run(
                [bwrap, *base, *unshare, "--", "true"], capture_output=True, timeout=10, env=child_environment()
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = str(exc)
            continue
        if done.returncode == 0:
            return unshare, None
        said = done.stderr.decode(errors="replace").strip().splitlines()
        why = said[-1] if said else f"exit code {done.returncode}"
    return (), f"bubblewrap (bwrap) cannot make a sandbox on this machine: {why}"


def _bwrap(ws: Workspace) -> list[str]:
    """The bubblewrap command line that runs a command in `ws`'s sandbox."""
    unshare, problem = _probe()
    if problem is not None:
        raise ToolError(problem)
    root = str(ws.root)
    # Order matters: later mounts go on top, so the workspace is writable inside the private /tmp.
    mounts = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", SANDBOX_TMP]
    for folder in dict.fromkeys((sys.prefix, sys.base_prefix)):  # looplab's Python, if /tmp holds it
        if Path(folder).is_relative_to(SANDBOX_TMP):
            mounts += ["--ro-bind", folder, folder]
    mounts += ["--bind", root, root]
    session = ("--die-with-parent", "--new-session", "--chdir", root, "--")
    return [shutil.which("bwrap") or "bwrap", *mounts, *unshare, *session]


class OutputTail:
    """The last `limit` bytes that come down a pipe, read by a thread of its own into a buffer of that size;
    `dropped` counts the bytes before them."""

    def __init__(self, fd: int, limit: int) -> None:
        self._fd, self._limit = fd, limit
        self._kept = bytearray()
        self.dropped = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._read, name="looplab-child-output", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        try:
            while not self._closing.is_set():
                if not poller.poll(_POLL_MS):
                    continue
                chunk = os.read(self._fd, _READ_BYTES)
                if not chunk:  # every writer has closed it
                    return
                with self._lock:
                    self._kept += chunk
                    over = len(self._kept) - self._limit
                    if over > 0:
                        del self._kept[:over]
                        self.dropped += over
        finally:
            os.close(self._fd)

    def close(self, wait_s: float = 0.1) -> bytes:
        """What was kept, once the pipe has closed or `wait_s` has passed; the thread ends soon after."""
        self._thread.join(wait_s)  # the writers have ended, so the end of the pipe is at most a read away
        self._closing.set()
        with self._lock:
            return bytes(self._kept)
