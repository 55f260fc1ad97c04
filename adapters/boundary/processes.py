"""Runner processes: how looplab starts another program and bounds it, whatever it does.

What bounds a child (`run_bounded`, which also runs looplab's other helper programs):

- **Time.** At the run's deadline the child and everything it started get SIGTERM, and SIGKILL
  `TERM_GRACE_S` later; looplab waits at most `STOP_WAIT_S` for that. With the servers' close, a run
  ends within `max_seconds` + 1 s, as an in-process one does, and its stop is `timeout`.
- **Descendants.** On Linux the child runs under a reaper of its own (`shared_tools/reaper.py`, a
  `PR_SET_CHILD_SUBREAPER` process): whatever the child starts, in any session or process group,
  is killed and reaped when the child ends, at the deadline, when looplab is interrupted, and when
  looplab dies (`PR_SET_PDEATHSIG`). It costs one small Python process a run: about 10 MB, and
  about 40 ms of CPU before the child starts. Elsewhere the child leads its own process group,
  which is killed whole: a descendant that leaves the group (`setsid`) survives there.
- **Output.** stdout and stderr share a pipe read by a thread that keeps the last `TAIL_BYTES`:
  memory stays bounded and nothing is written to disk, however much the child prints.
- **Interrupts.** Ctrl-C or SIGTERM to looplab kills every runner process (`live_children`) and
  removes its scratch folder (`live_folders`), as it does for test processes and workspaces.
- **Secrets.** A process that holds a provider key in its environment makes itself non-dumpable
  (`keep_keys_from_children`) before it starts any child, so a same-user child can read neither
  its environment nor its memory through /proc, nor attach to it with ptrace.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from looplab.adapters.contract.model import KEY_VARIABLES
from looplab.shared_tools.confine import reaped, with_output_tail
from looplab.shared_tools.live import WAIT_SLICE_S, Live

__all__ = [
    "CHILD_ENV_ALLOWED",
    "OUTCOME_MAX_BYTES",
    "STDERR_LINES",
    "child_environment",
    "keep_keys_from_children",
    "kill_group",
    "live_children",
    "live_folders",
    "run_bounded",
    "scratch_folder",
]

#: Variables of looplab's own environment a child may see (never a provider key).
CHILD_ENV_ALLOWED = ("PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")
#: Seconds looplab waits for a child told to end (the grace, the reaper's SIGKILL rounds, its exit) before
#: killing its process group itself.
STOP_WAIT_S = 0.6
#: Bytes of a child's output (stdout and stderr together) kept for the run's warnings and error.
TAIL_BYTES = 64_000
#: Lines of that tail kept in the run's warnings.
STDERR_LINES = 20
#: The largest outcome file read.
OUTCOME_MAX_BYTES = 1 << 20
#: `PR_SET_CHILD_SUBREAPER`, `PR_SET_PDEATHSIG` and `PR_SET_DUMPABLE` are Linux's.
LINUX = sys.platform.startswith("linux")
#: Whether children run under a reaper (else in a process group of their own, killed whole).
REAPS = LINUX
PR_SET_DUMPABLE = 4


def child_environment(**contract: str) -> dict[str, str]:
    """The allowlisted part of looplab's environment, plus the contract's `LOOPLAB_*` variables."""
    env = {k: v for k, v in os.environ.items() if k in CHILD_ENV_ALLOWED}
    return env | {f"LOOPLAB_{k.upper()}": v for k, v in contract.items()}


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """Kill the process group `proc` leads (started with `start_new_session=True`) and reap it, within a bound."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def _tell_to_end(proc: subprocess.Popen[Any], *, at_once: bool = True) -> None:
    """Ask a child (its reaper, on Linux) to end with everything it started: SIGKILL `at_once`, else SIGTERM first."""
    if REAPS:  # the reaper passes it on to every descendant (SIGHUP: kill now; SIGTERM: after the grace)
        proc.send_signal(signal.SIGHUP if at_once else signal.SIGTERM)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL if at_once else signal.SIGTERM)


def _gone(proc: subprocess.Popen[Any], wait_s: float = STOP_WAIT_S) -> None:
    """Wait up to `wait_s` for a child told to end; then kill its process group."""
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)


#: Runner processes still running, so an interrupted looplab ends them (and what they started).
live_children: Live[subprocess.Popen[Any]] = Live(_tell_to_end, _gone)
#: Scratch folders of runner processes, removed by an interrupted looplab after `live_children`.
live_folders: Live[Path] = Live(lambda folder: shutil.rmtree(folder, ignore_errors=True))


@contextlib.contextmanager
def scratch_folder() -> Iterator[Path]:
    """A fresh `looplab-child-*` folder in the temporary directory, removed afterwards or on an interrupt."""
    folder = Path(tempfile.mkdtemp(prefix="looplab-child-"))
    live_folders.add(folder)
    try:
        yield folder
    finally:
        live_folders.discard(folder)
        shutil.rmtree(folder, ignore_errors=True)


def run_bounded(
    command: list[str], env: dict[str, str], cwd: Path, seconds: float, stop: threading.Event | None = None
) -> tuple[int | None, list[str]]:
    """Run `command` to its end or for `seconds`, whichever comes first (or until `stop` is set: a cancelled run);
    its exit code (None: stopped at the bound) and the lines of the tail of its output.

    At the bound it gets SIGTERM and, `TERM_GRACE_S` later, SIGKILL; whatever it started is killed when it
    ends (see the module's docstring for how, and where that is weaker). Returns within `seconds` +
    `STOP_WAIT_S` + 0.1 s (the last wait for its output), unless a process SIGKILL cannot end holds it.
    """
    keep_keys_from_children()

    def begin(fd: int) -> subprocess.Popen[Any]:
        line = reaped(command, reaps=REAPS)
        return subprocess.Popen(
            line, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, start_new_session=True
        )

    proc, tail = with_output_tail(begin, TAIL_BYTES)
    live_children.add(proc)  # ended at once if looplab is already ending
    try:
        code = _wait(proc, seconds, stop)
    finally:
        if proc.poll() is None:  # its bound, or an exception here
            _tell_to_end(proc, at_once=False)
            _gone(proc)
        elif not REAPS:
            kill_group(proc)  # whatever it left running in its group
        live_children.discard(proc)
        text = tail.close().decode("utf-8", errors="replace")
    return code, [line for line in text.splitlines() if line.strip()]


def _wait(proc: subprocess.Popen[Any], seconds: float, stop: threading.Event | None) -> int | None:
    """`proc`'s exit code once it ends within `seconds`; None at the bound or once `stop` is set (looked at every
    `WAIT_SLICE_S`)."""
    ends = time.monotonic() + max(0.0, seconds)
    while True:
        left = max(0.0, ends - time.monotonic())
        wait = left if stop is None else min(left, WAIT_SLICE_S)
        try:
            return proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            if wait >= left or (stop is not None and stop.is_set()):
                return None


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def keep_keys_from_children() -> bool:
    """Make this process non-dumpable if a provider key is in its environment; whether it is now protected.

    A non-dumpable process's /proc/PID/environ, /proc/PID/mem (and its other ptrace-guarded files) and
    ptrace itself are closed to every process without CAP_SYS_PTRACE, same user included, for as long as
    the process lives (a child's `exec` makes the child dumpable again, not this process). Linux only.
    """
    if not LINUX or not any(os.environ.get(name) for names in KEY_VARIABLES.values() for name in names):
        return False
    return _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
