"""Interrupted work loses nothing: Ctrl-C or SIGTERM ends `run` and `eval` at once, with what finished.

Each test drives a real `looplab` process with its own TMPDIR, so the workspaces and pytest
processes it leaves (or not) are its own to count.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import looplab.run.harness as harness
from looplab.adapters.contract.limits import Limits
from looplab.scenarios.cases import load_cases
from looplab.shared_tools import Guard, Workspace
from tests.tiers import BUSY_MACHINE_S

LOOPLAB = [sys.executable, "-m", "looplab"]


def live_tests_under(folder: Path) -> list[int]:
    """PIDs of processes whose command line names `folder` (the pytest runs of its workspaces)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if str(folder).encode() in cmdline and b"pytest" in cmdline:
            pids.append(int(proc.name))
    return pids


def in_the_slow_workspace(pid: int) -> bool:
    """Whether process `pid` works in a copy of the slow-tests variant (the only one with a tests/conftest.py)."""
    try:
        return (Path(os.readlink(f"/proc/{pid}/cwd")) / "tests" / "conftest.py").is_file()
    except OSError:
        return False


def wait_for_a_slow_test(
    folder: Path, proc: subprocess.Popen[str], timeout_s: float = 60.0, settle_s: float = 1.0
) -> None:
    """Until the slow case's pytest under `folder` has been running for `settle_s` (told apart by its workspace, not
    by how long it runs: on a busy machine a quick run takes a second too)."""
    first_seen: dict[int, float] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        now = time.monotonic()
        for pid in live_tests_under(folder):
            if in_the_slow_workspace(pid) and now - first_seen.setdefault(pid, now) >= settle_s:
                return
        time.sleep(0.05)
    raise AssertionError(f"no slow pytest run appeared under {folder} (exit code {proc.poll()})")


@pytest.mark.parametrize(
    ("command", "sig", "to_group"),
    [
        pytest.param(["run", "--quiet"], signal.SIGINT, False, id="run-SIGINT"),
        pytest.param(["run", "--quiet"], signal.SIGTERM, False, id="run-SIGTERM", marks=pytest.mark.full),
        pytest.param(["eval", "--jobs", "1"], signal.SIGTERM, False, id="eval-jobs1-SIGTERM", marks=pytest.mark.full),
        # Ctrl-C in a terminal reaches the workers too
        pytest.param(["eval", "--jobs", "2"], signal.SIGINT, True, id="eval-jobs2-ctrl-c", marks=pytest.mark.full),
    ],
)
def test_an_interrupt_exits_at_once_keeping_finished_results_and_leaving_nothing(
    tmp_path: Path, command: list[str], sig: signal.Signals, to_group: bool
) -> None:
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    out = tmp_path / "out"
    output = ["--out", str(out)] if command[0] == "run" else ["--json", str(out / "eval.json")]
    cases = ["--case", "vip-compound", "--case", "slow-tests", "--runner", "handrolled"]
    if command[0] == "eval":
        cases += ["--repeat", "3"]
    proc = subprocess.Popen(
        [*LOOPLAB, *command, *cases, *output],
        env={**os.environ, "TMPDIR": str(private_tmp)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        # An eval's other worker runs vip-compound meanwhile: on a busy machine its first result takes more than a
        # second, so the interrupt waits longer there (within the slow case's 3 s budget).
        wait_for_a_slow_test(private_tmp, proc, settle_s=2.0 if command[0] == "eval" else 1.0)
        sent = time.monotonic()
        if to_group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    assert proc.returncode == 128 + sig, stderr
    assert took < 2.0 + BUSY_MACHINE_S, f"exit took {took:.2f} s"  # 2 s promised; a busy machine ends slower
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"looplab: interrupted by {sig.name}"), stderr
    assert not list(private_tmp.iterdir()), "a workspace was left behind"
    assert not live_tests_under(private_tmp), "a pytest process outlived looplab"
    written = json.loads(((out / "results.json") if command[0] == "run" else (out / "eval.json")).read_text())
    assert written["incomplete"].startswith(f"interrupted by {sig.name} after")
    finished = [r["case"] for r in written["results"]]
    assert "vip-compound" in finished and "slow-tests" not in finished
    if command[0] == "run":
        traces = (out / "traces.jsonl").read_text().splitlines()
        assert traces and all(json.loads(line)["case"] == "vip-compound" for line in traces)


@pytest.mark.full  # a whole eval in a new process
def test_eval_creates_the_folders_of_its_outputs(tmp_path: Path) -> None:
    target = tmp_path / "not" / "yet" / "eval.json"
    done = subprocess.run(
        [*LOOPLAB, "eval", "--runner", "handrolled", "--case", "vip-compound", "--jobs", "1", "--json", str(target)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(target.read_text())["results"][0]["case"] == "vip-compound"


class _Hangs:
    """A runner whose run outlives its limits: it holds its workspace until released."""

    name, apis = "hangs", ("chat",)

    def __init__(self) -> None:
        self.release = threading.Event()
        self.workspace: Path | None = None

    def run(self, task: str, guard: Guard, limits: Limits, model: object, *, system_prompt: str) -> None:
        self.workspace = guard.workspace.root
        self.release.wait(30)
        raise RuntimeError("finished late")


def test_a_run_abandoned_as_hung_keeps_its_hung_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    hangs = _Hangs()
    monkeypatch.setattr(harness.registry, "load", lambda name: hangs)
    case = load_cases()["vip-compound"]
    case = case.model_copy(update={"limits": Limits(max_seconds=0.2)})
    where = harness.Endpoint(harness.ModelChoice(), {"openai": "http://127.0.0.1:9/v1", "anthropic": "x"})
    outcome = harness.run_one("hangs", case, where, grace_s=0.3)
    assert outcome.error is not None and outcome.error.startswith("hung")
    hangs.release.set()  # the run now ends (with an error) after its outcome was reported
    deadline = time.monotonic() + 5
    while hangs.workspace is not None and hangs.workspace.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert outcome.result is None and outcome.error.startswith("hung") and not outcome.checks


def test_a_workspace_still_held_by_a_hung_run_is_removed_at_exit(tmp_path: Path) -> None:
    script = (
        "import threading, time\n"
        "from looplab.shared_tools import Workspace\n"
        "from tests.conftest import FIXTURE_REPO\n"
        "ws = Workspace(FIXTURE_REPO)\n"
        "print(ws.root, flush=True)\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()  # the hung run, never closing it\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    root = Path(done.stdout.strip())
    assert root.name and not root.exists()


def test_close_all_removes_every_open_workspace(fixture_repo: Path) -> None:
    first, second = Workspace(fixture_repo), Workspace(fixture_repo)
    try:
        assert Workspace.close_all() >= 2
        assert not first.root.exists() and not second.root.exists()
    finally:
        first.close()
        second.close()


@pytest.mark.full  # a looplab process interrupted while its runner process runs
def test_an_interrupt_ends_a_runner_process_and_removes_its_folder(tmp_path: Path) -> None:
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    pid_file = tmp_path / "runner.pid"
    runner = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    command = shlex.join([sys.executable, "-c", runner])
    proc = subprocess.Popen(
        [*LOOPLAB, "run", "--runner", "external", "--cmd", command, "--case", "vip-compound", "--quiet"]
        + ["--out", str(tmp_path / "out")],
        env={**os.environ, "TMPDIR": str(private_tmp)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.is_file() and pid_file.read_text()) and proc.poll() is None:
            assert time.monotonic() < deadline, "the runner process did not start within 60 s"
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    assert proc.returncode == 130, stderr
    assert not Path(f"/proc/{pid}").exists(), "the runner process outlived looplab"
    assert not list(private_tmp.glob("looplab-child-*")), "a runner's folder was left behind"
    assert "1 runner process ended" in stderr
    assert not list(private_tmp.iterdir()), "a workspace was left behind"
