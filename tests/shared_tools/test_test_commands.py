"""A team's test command runs inside bounds: what it starts ends with it, the run's time holds, the target cannot
inject a command, the environment is the allowlist, and `--sandbox` keeps it off the network and out of the files
outside its workspace.

Timed assertions compare against the run's bound with a generous slack (a busy 2-core machine), never against how
fast it usually is.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looplab.adapters.contract.errors import LooplabError
from looplab.cli import main
from looplab.records.outcome import RunOutcome
from looplab.run import harness, matrix, schedule
from looplab.run.options import RunOptions
from looplab.scenarios.cases import load_cases
from looplab.shared_tools import Guard, PathRefused, Workspace, builtin_tool, confine, tools

LINUX = sys.platform.startswith("linux")
linux_only = pytest.mark.skipif(not LINUX, reason="the reaper is Linux's")
#: Why a sandbox test cannot run here, or None.
NO_SANDBOX = confine.sandbox_problem()
needs_sandbox = pytest.mark.skipif(NO_SANDBOX is not None, reason=f"no sandbox here: {NO_SANDBOX}")
SANDBOX = [False, pytest.param(True, marks=needs_sandbox, id="sandbox")]
#: Slack over a run's bound for a loaded machine (the bound itself is met within about 0.1 s).
SLACK_S = 1.5
CHECKS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def write(folder: Path, name: str, source: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(textwrap.dedent(source))


def guard_for(ws: Workspace, command: list[str], deadline: float | None = None) -> Guard:
    return Guard(ws, tools=[builtin_tool("run_tests", test_command=command)], deadline=deadline)


# --- 1. what a test command starts ends with it; the run's time holds ---------------------------------------------


def daemon_script(token: str, *, hang: bool) -> str:
    """A test command that double-forks a daemon (its own session, holding the output pipe, `token` in its
    command line), says `started`, then exits or (`hang`) sleeps 60 s."""
    return f"""
        import os, sys, time
        if os.fork() == 0:
            if os.fork() == 0:
                os.setsid()
                open("daemon.up", "w").close()
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", {token!r}])
            os._exit(0)
        while not os.path.exists("daemon.up"):
            time.sleep(0.01)
        print("started", flush=True)
        if {hang!r}:
            time.sleep(60)
    """


def running_with(token: str) -> list[int]:
    """The processes (not zombies) whose command line holds `token`, found in /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if token.encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def gone_within(token: str, seconds: float) -> bool:
    ends = time.monotonic() + seconds
    while running_with(token):
        if time.monotonic() >= ends:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def token() -> Iterator[str]:
    """A unique word for a daemon's command line; whatever still carries it afterwards is killed."""
    word = f"looplab-daemon-{uuid.uuid4().hex}"
    yield word
    for pid in running_with(word):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@linux_only
@pytest.mark.parametrize("sandbox", SANDBOX)
def test_a_daemon_the_test_command_double_forks_is_gone_and_the_result_comes_at_once(
    tmp_path: Path, token: str, sandbox: bool
) -> None:
    write(tmp_path / "repo", "spawn.py", daemon_script(token, hang=False))
    with Workspace(tmp_path / "repo", sandbox=sandbox) as ws:
        started = time.monotonic()
        record = guard_for(ws, ["python", "{target}"], deadline=10.0).call("run_tests", {"target": "spawn.py"})
        took = time.monotonic() - started
    # The daemon held the output pipe: the result waited for it (up to the deadline) before the reaper.
    assert record.outcome == "ok" and record.result.startswith("exit code 0\nstarted"), record.result
    assert took < 10.0 / 2, f"took {took:.1f} s"
    assert gone_within(token, 5.0), "the daemon outlived its test command"


@linux_only
@pytest.mark.parametrize("sandbox", SANDBOX)
def test_a_run_whose_test_command_overruns_with_a_daemon_holding_the_output_ends_by_its_deadline(
    tmp_path: Path, token: str, sandbox: bool
) -> None:
    write(tmp_path / "repo", "spawn.py", daemon_script(token, hang=True))
    max_seconds = 3.0
    with Workspace(tmp_path / "repo", sandbox=sandbox) as ws:
        guard = guard_for(ws, ["python", "{target}"], deadline=max_seconds)
        record = guard.call("run_tests", {"target": "spawn.py"})
        took = guard.clock()
    assert record.outcome == "timeout" and "started" in record.result, record.result
    assert took < max_seconds + SLACK_S, f"the run ended {took:.1f} s in, its max_seconds is {max_seconds:g}"
    assert gone_within(token, 5.0), "the daemon outlived the run"


def test_where_there_is_no_reaper_the_output_still_cannot_hold_the_run_past_its_deadline(
    tmp_path: Path, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confine, "REAPS", False)  # how it runs off Linux: the process group, killed whole
    write(tmp_path / "repo", "spawn.py", daemon_script(token, hang=True))
    max_seconds = 2.0
    with Workspace(tmp_path / "repo") as ws:
        guard = guard_for(ws, ["python", "{target}"], deadline=max_seconds)
        record = guard.call("run_tests", {"target": "spawn.py"})
        took = guard.clock()
    assert record.outcome == "timeout" and "started" in record.result, record.result
    assert took < max_seconds + SLACK_S, f"the run ended {took:.1f} s in, its max_seconds is {max_seconds:g}"


@linux_only
def test_a_halted_run_ends_the_daemon_its_test_command_started(tmp_path: Path, token: str) -> None:
    write(tmp_path / "repo", "spawn.py", daemon_script(token, hang=True))
    with Workspace(tmp_path / "repo") as ws:
        guard = guard_for(ws, ["python", "{target}"])
        records: list[Any] = []
        call = threading.Thread(target=lambda: records.append(guard.call("run_tests", {"target": "spawn.py"})))
        call.start()
        ends = time.monotonic() + 10
        while not (ws.root / "daemon.up").exists() and time.monotonic() < ends:
            time.sleep(0.01)
        guard.halt("cancelled by the test")
        call.join(5)
    assert not call.is_alive() and records[0].outcome == "cancelled"
    assert gone_within(token, 5.0), "the daemon outlived the halted run"


def test_the_output_kept_is_the_tail_and_says_how_much_was_cut(tmp_path: Path) -> None:
    write(tmp_path / "repo", "loud.py", "import sys\nsys.stdout.write('x' * 3_000_000 + '\\nthe end\\n')\n")
    with Workspace(tmp_path / "repo") as ws:
        out = tools.run_tests(ws, "loud.py", command=("python", "{target}"), max_chars=100)
    head, _, kept = out.partition("\n")
    assert head == "exit code 0" and kept.endswith("the end\n")
    # Every character written is counted, those the reader never held included.
    assert kept.startswith(f"[... {3_000_009 - 100} earlier characters truncated ...]\n")


# --- 2. a target cannot inject a command ----------------------------------------------------------------------

#: What a shell acts on, each way a target could hold it.
METAS = [";", "&", "|", "$", "`", "(", ")", "<", ">", "'", '"', "\\", "\n", "\r", "\t", "\x0b", "\x1b", "\u2028"]
#: Targets that would run `touch pwned` (or write `pwned`) through `sh -c 'echo {target}'`.
INJECTIONS = [
    "t.py; touch pwned",
    "t.py && touch pwned",
    "t.py | touch pwned",
    "$(touch pwned)",
    "`touch pwned`",
    "t.py\ntouch pwned",
    "t.py > pwned",
    "t.py' ; touch pwned ; '",
    't.py" ; touch pwned ; "',
    "t.py::test[$(touch pwned)]",
    "t.py::test[x;touch pwned]",
]
safe_text = st.text(st.characters(blacklist_characters="".join(METAS), blacklist_categories=("C", "Z")), max_size=12)


@pytest.fixture
def shell_ws(tmp_path: Path) -> Iterator[Workspace]:
    write(tmp_path / "repo", "t.py", "")
    with Workspace(tmp_path / "repo") as ws:
        yield ws


@CHECKS
@given(payload=st.sampled_from(INJECTIONS), before=safe_text)
def test_a_target_that_would_run_a_command_through_a_shell_runs_nothing(
    shell_ws: Workspace, payload: str, before: str
) -> None:
    guard = guard_for(shell_ws, ["sh", "-c", "echo {target}"])
    record = guard.call("run_tests", {"target": before.lstrip("-~/") + payload})
    assert record.outcome == "refused" and "not a test target" in record.result, record.result
    assert "\n" not in record.result  # one line for the model
    assert not (shell_ws.root / "pwned").exists()


@CHECKS
@given(before=safe_text, meta=st.sampled_from(METAS), after=st.text(max_size=12))
def test_a_target_holding_a_shell_character_or_a_control_character_is_refused(
    before: str, meta: str, after: str
) -> None:
    target = "t.py" + before + meta + after
    with pytest.raises(PathRefused, match="not a test target; a target is a path"):
        tools.check_target(target)


identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
paths = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,10}(/[A-Za-z0-9_.\-]{1,10}){0,2}\.py", fullmatch=True)
param_ids = st.text(
    st.characters(whitelist_categories=("L", "N"), whitelist_characters=" =,-._:/[]+@%*?!#~^{}"), max_size=24
)


@CHECKS
@given(path=paths, names=st.lists(identifiers, max_size=2), param=st.none() | param_ids)
def test_a_pytest_node_id_is_a_target(path: str, names: list[str], param: str | None) -> None:
    target = path + "".join(f"::{name}" for name in names)
    if names and param is not None:
        target += f"[{param}]"
    assert tools.check_target(target) == target


def test_a_parametrized_test_id_with_spaces_and_signs_runs_under_pytest_and_a_test_command(tmp_path: Path) -> None:
    write(
        tmp_path / "repo",
        "test_p.py",
        """
        import pytest

        @pytest.mark.parametrize("v", [1, 2], ids=["a b=1,c:d", "other"])
        def test_x(v):
            assert v == 1
        """,
    )
    target = "test_p.py::test_x[a b=1,c:d]"
    with Workspace(tmp_path / "repo") as ws:
        by_pytest = tools.run_tests(ws, target)
        echoed = tools.run_tests(ws, target, command=("python", "-c", "import sys; print(sys.argv[1:])", "{target}"))
    assert by_pytest.startswith("exit code 0\n") and "1 passed" in by_pytest, by_pytest
    assert echoed == f"exit code 0\n{[target]!r}\n"


def test_the_pytest_path_refuses_the_same_targets(shell_ws: Workspace) -> None:
    guard = Guard(shell_ws, tools=[builtin_tool("run_tests")])
    record = guard.call("run_tests", {"target": "t.py; touch pwned"})
    assert record.outcome == "refused" and "not a test target" in record.result


# --- 3. the environment is the allowlist, on every path -------------------------------------------------------

SHOW_ENV = "import json, os; open('env.json', 'w').write(json.dumps(sorted(os.environ)))"


@pytest.mark.parametrize("sandbox", SANDBOX)
@pytest.mark.parametrize("how", ["pytest", "command"])
def test_the_tests_see_only_the_allowlisted_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox: bool, how: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-shown")
    write(tmp_path / "repo", "test_env.py", f"def test_env():\n    {SHOW_ENV}\n")
    with Workspace(tmp_path / "repo", sandbox=sandbox) as ws:
        command = ("python", "-c", SHOW_ENV) if how == "command" else None
        out = tools.run_tests(ws, "test_env.py", command=command)
        names = json.loads((ws.root / "env.json").read_text())
    assert out.startswith("exit code 0\n"), out
    own = {"PYTEST_CURRENT_TEST", "PYTEST_VERSION"} if how == "pytest" else set()  # what pytest sets for a test
    # In the sandbox: its own TMPDIR, and the PWD bubblewrap sets (the workspace root).
    assert set(names) - own == set(tools.child_environment()) | ({"TMPDIR", "PWD"} if sandbox else set()), names


# --- 4. the sandbox -------------------------------------------------------------------------------------------

PROBE = """
    import os, pathlib, socket, sys
    port, outside_tmp, outside_var = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        print("network: connected")
    except OSError as exc:
        print("network: refused", exc.errno)
    for where in (outside_tmp, outside_var):
        try:
            pathlib.Path(where, "escaped.txt").write_text("out")
            print("outside: written")
        except OSError as exc:
            print("outside: refused", exc.strerror)
    print("workspace:", pathlib.Path("data.txt").read_text())
    pathlib.Path("inside.txt").write_text("in")
"""


@pytest.fixture
def outside_var() -> Iterator[Path]:
    """A folder outside /tmp that this test may write to (a sandbox sees it read-only)."""
    try:
        folder = Path(tempfile.mkdtemp(prefix="looplab-outside-", dir="/var/tmp"))
    except OSError:
        pytest.skip("/var/tmp cannot be written here")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@linux_only
@pytest.mark.parametrize("sandbox", SANDBOX)
def test_the_sandbox_holds_the_network_and_the_files_outside_the_workspace(
    tmp_path: Path, outside_var: Path, sandbox: bool
) -> None:
    write(tmp_path / "repo", "probe.py", PROBE)
    (tmp_path / "repo" / "data.txt").write_text("the workspace's own")
    outside_tmp = tmp_path / "outside"
    outside_tmp.mkdir()
    with socket.create_server(("127.0.0.1", 0)) as listener, Workspace(tmp_path / "repo", sandbox=sandbox) as ws:
        port = listener.getsockname()[1]
        command = ["python", "{target}", str(port), str(outside_tmp), str(outside_var)]
        out = tools.run_tests(ws, "probe.py", command=command)
        inside = (ws.root / "inside.txt").read_text()
    assert out.startswith("exit code 0\n") and "workspace: the workspace's own" in out and inside == "in", out
    if not sandbox:  # what the same command does unconfined: what the sandbox takes away
        assert "network: connected" in out and out.count("outside: written") == 2
        return
    assert "network: refused" in out and "connected" not in out
    assert "outside: refused Read-only file system" in out  # /var/tmp: the host's, read-only
    assert "outside: refused No such file or directory" in out  # /tmp: the sandbox's own, empty
    assert not (outside_tmp / "escaped.txt").exists() and not (outside_var / "escaped.txt").exists()


@needs_sandbox
def test_pytest_uses_its_own_tmp_inside_the_sandbox(tmp_path: Path) -> None:
    write(
        tmp_path / "repo",
        "test_tmp.py",
        """
        import tempfile

        def test_tmp(tmp_path):
            (tmp_path / "x.txt").write_text("x")
            with tempfile.NamedTemporaryFile() as f:
                assert f.name.startswith("/tmp/")
        """,
    )
    with Workspace(tmp_path / "repo", sandbox=True) as ws:
        out = tools.run_tests(ws, "test_tmp.py")
    assert out.startswith("exit code 0\n") and "1 passed" in out, out


# --- 5. --sandbox on the command line ---------------------------------------------------------------------------


def exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code  # type: ignore[return-value]


@pytest.fixture
def without_bwrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This machine as one without bubblewrap (and nothing runs: the refusal comes first)."""
    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None if name == "bwrap" else which(name))
    confine._probe.cache_clear()

    def started(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a run started")

    for module, name in ((harness, "endpoint"), (harness, "run_one"), (matrix, "run_matrix")):
        monkeypatch.setattr(module, name, started)
    yield
    confine._probe.cache_clear()


@pytest.mark.parametrize(
    "argv", [["run", "--runner", "handrolled"], ["eval", "--runner", "handrolled"], ["serve-tools"]], ids=lambda a: a[0]
)
def test_sandbox_without_bubblewrap_is_one_line_naming_the_package(
    argv: list[str], without_bwrap: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_code([*argv, "--sandbox"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("looplab: --sandbox: ") and "'bubblewrap'" in err, err


def test_a_workspace_asking_for_a_sandbox_that_cannot_be_made_refuses_the_command(
    shell_ws: Workspace, without_bwrap: None
) -> None:
    shell_ws.sandbox = True
    record = guard_for(shell_ws, ["sh", "-c", "touch pwned"]).call("run_tests", {"target": "t.py"})
    assert record.outcome == "error" and "bubblewrap" in record.result
    assert not (shell_ws.root / "pwned").exists()


@needs_sandbox
@pytest.mark.parametrize("command", ["run", "eval"])
def test_sandbox_reaches_every_run(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[RunOptions] = []

    def run_one(runner: str, case: Any, where: Any, options: RunOptions, **_: Any) -> RunOutcome:
        asked.append(options)
        return RunOutcome(runner, case.id, error="not run: the test looks at its options")

    def run_matrix(runners: Any, cases: Any, where: Any, options: RunOptions, **_: Any) -> list[RunOutcome]:
        asked.append(options)
        return []

    monkeypatch.setattr(schedule, "run_one", run_one)
    monkeypatch.setattr(matrix, "run_matrix", run_matrix)
    argv = [command, "--runner", "handrolled", "--case", "vip-compound", "--sandbox"]
    exit_code(argv + (["--out", str(tmp_path)] if command == "run" else []))
    capsys.readouterr()
    assert asked and all(options.sandbox is True for options in asked), asked


def test_run_one_makes_a_sandboxed_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[bool] = []

    class Recorded(Workspace):
        def __init__(self, *args: Any, sandbox: bool = False, **kwargs: Any) -> None:
            made.append(sandbox)
            raise LooplabError("not run: the test looks at the workspace")

    monkeypatch.setattr(harness, "Workspace", Recorded)
    case = load_cases()["vip-compound"]
    with harness.endpoint(harness.ModelChoice()) as where:
        outcome = harness.run_one("handrolled", case, where, sandbox=True)
    assert made == [True] and outcome.error == "not run: the test looks at the workspace"


@linux_only
@pytest.mark.parametrize("sandbox", SANDBOX)
def test_with_sandbox_a_suites_tools_py_is_described_inside_it_too(
    tmp_path: Path, outside_var: Path, sandbox: bool
) -> None:
    # Loading a suite runs its tools.py (in a host of its own) to describe its tools: with --sandbox that host is
    # in the sandbox as the run's are, here and in a process the case is sent to (a lane, a runner environment).
    from looplab.scenarios.cases import case_from_wire, case_to_wire, load_cases

    suite = tmp_path / "suite"
    write(suite / "repo", "test_a.py", "def test_a():\n    assert True\n")
    case_toml = 'id = "a"\ntask = "t"\nrepo = "../repo"\ntarget = "test_a.py"\ntools = ["probe"]\n'
    write(suite / "cases", "a.toml", case_toml)
    marker = outside_var / "described.txt"
    tools_py = f"""
        import pathlib
        try:
            pathlib.Path({str(marker)!r}).write_text("written")
        except OSError:
            pass

        def probe() -> str:
            \"\"\"A tool.\"\"\"
            return "x"
    """
    write(suite, "tools.py", tools_py)
    case = load_cases([suite], sandbox=sandbox)["a"]
    assert [t.name for t in case.tool_set()] == ["probe"] and marker.exists() is not sandbox
    marker.unlink(missing_ok=True)
    sent = json.loads(json.dumps(case_to_wire(case)))
    assert case_from_wire(sent).suite.sandbox is sandbox
