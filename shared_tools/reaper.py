"""A reaper: it starts one command and, when that ends, ends everything the command started.

looplab runs each runner process, suite test command and suite tool host under one (Linux only), as
`python -I -S reaper.py PARENT_PID GRACE_S -- COMMAND ...`; it uses the standard library only, so it starts
in a few milliseconds and reads nothing of looplab's. It makes itself the child subreaper
(`prctl(PR_SET_CHILD_SUBREAPER)`): any process the command starts that loses its parent, whatever session
or process group it moved to (a double fork and `setsid` included), becomes the reaper's child instead of
init's. Then:

- the command exits: every descendant still running gets SIGKILL and is reaped, and the reaper exits
  as the command did (its exit code, or the same signal);
- SIGTERM (the run's deadline): every descendant gets SIGTERM, and SIGKILL once the command has
  ended or GRACE_S has passed;
- SIGHUP (looplab ending at once), or looplab's death (`PR_SET_PDEATHSIG`): every descendant gets
  SIGKILL at once.

Killing goes round by round (find the descendants in /proc, SIGKILL each, reap) until the reaper has no
child left, within KILL_BOUND_S. What escapes: a process that another service starts on the command's
behalf (`systemd-run`, a container daemon) is not a descendant.
"""

from __future__ import annotations

import _signal as signal  # the C module: `signal` imports enum, a third of the start-up time
import ctypes
import os
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: Seconds the SIGKILL rounds may take (a descendant that forks faster than it is killed is left after it).
KILL_BOUND_S = 0.2
#: Seconds between SIGKILL rounds while something is still being killed.
ROUND_S = 0.005
#: Exit code when the command could not be started (a shell's).
NOT_STARTED = 127
WATCHED = {signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP}


def descendants(root: int) -> list[int]:
    """Every process below `root`, found by each process's parent in /proc/PID/stat."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                after_name = stat.read().rpartition(b")")[2].split()
        except OSError:  # it ended while the scan ran
            continue
        if len(after_name) > 1:
            children.setdefault(int(after_name[1]), []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def reap(command: int) -> int | None:
    """Reap every child that has ended; the command's wait status if it was one of them."""
    status = None
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == command:
            status = code


def signal_all(sig: int) -> bool:
    """Send `sig` to every descendant; whether there was any."""
    found = descendants(os.getpid())
    for pid in found:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return bool(found)


def has_children() -> bool:
    """Whether any child is left, ended or not (without reaping it)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def kill_all(command: int, status: int | None) -> int | None:
    """SIGKILL every descendant, round by round, and reap it; the command's wait status if reaped meanwhile."""
    ends = time.monotonic() + KILL_BOUND_S
    while has_children():  # with no child left there is no descendant either: each would have been adopted
        signal_all(signal.SIGKILL)
        reaped = reap(command)
        status = status if reaped is None else reaped
        if not has_children() or time.monotonic() >= ends:
            break
        signal.sigtimedwait({signal.SIGCHLD}, ROUND_S)
    return status


def terminate(command: int, grace_s: float) -> int | None:
    """SIGTERM every descendant; wait for the command up to `grace_s` (or a SIGHUP); its wait status if it ended."""
    signal_all(signal.SIGTERM)
    ends = time.monotonic() + grace_s
    status = reap(command)
    while status is None and (left := ends - time.monotonic()) > 0:
        got = signal.sigtimedwait({signal.SIGCHLD, signal.SIGHUP}, left)
        if got is None or got.si_signo == signal.SIGHUP:
            break
        status = reap(command)
    return status


def start(command: list[str]) -> int:
    """Fork and exec `command` with the signals as looplab left them; in the child, 127 if it cannot start."""
    pid = os.fork()
    if pid:
        return pid
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        os.execvp(command[0], command)
    except OSError as exc:
        os.write(2, f"looplab: cannot start {command[0]!r}: {exc.strerror}\n".encode(errors="replace"))
    finally:
        os._exit(NOT_STARTED)


def exit_as(status: int) -> int:
    """The reaper's own end, mirroring the command's wait status (a signal is raised again on itself)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig != signal.SIGKILL:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.waitstatus_to_exitcode(status)


def main(argv: list[str]) -> int:
    """Run the command under this reaper (arguments: PARENT_PID GRACE_S -- COMMAND ...)."""
    parent, grace_s, command = int(argv[1]), float(argv[2]), argv[4:]
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)  # taken by sigwaitinfo below, never by a handler
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGHUP, 0, 0, 0)
    if os.getppid() != parent:  # looplab died before the line above could ask to be told
        return 128 + signal.SIGHUP
    command_pid = start(command)
    status = None
    while status is None:
        got = signal.sigwaitinfo(WATCHED).si_signo
        if got == signal.SIGCHLD:
            status = reap(command_pid)
            continue
        if got == signal.SIGTERM:
            status = terminate(command_pid, grace_s)
        kill_all(command_pid, status)
        return 128 + got
    kill_all(command_pid, status)
    return exit_as(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
