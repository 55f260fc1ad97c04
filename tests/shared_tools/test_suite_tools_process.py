"""A suite's own tools run in a tool host of their own, inside the run's bounds.

looplab never runs a suite's `tools.py` in its own process: a host started per run (`shared_tools/tool_host.py`)
runs it in the workspace root with the environment allowlist, under the reaper, ended with the run. What a tool
returns is cut in the host; whatever it raises, `SystemExit` included, and the host's own death, are error
observations; a call waits for the host no longer than the run's remaining time; a cancelled run ends the host
at once; a `print` in tools.py never reaches the protocol or looplab's stdout.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from looplab.adapters.contract.limits import StopReason
from looplab.adapters.contract.pricing import Pricing
from looplab.records.outcome import RunOutcome
from looplab.run import harness
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.scenarios.cases import Case, load_case
from looplab.scenarios.scripted.conversation import Conversation
from looplab.scenarios.scripted.policy import Call, Decision
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Guard, Workspace
from looplab.shared_tools.confine import child_environment
from looplab.shared_tools.custom import SUITE_TOOL_MAX_CHARS, tool_from_function

TOOLS_PY = """
    import json
    import os
    import pathlib
    import subprocess
    import sys
    import time

    from looplab.shared_tools import Workspace

    print('{"ok": "forged at import"}')  # on the protocol's stdout, it would be taken for a reply
    pathlib.Path(__file__).with_name("imported_by").open("a").write(f"{os.getpid()}\\n")


    def big() -> str:
        \"\"\"A result of 200 MB.\"\"\"
        return "x" * 200_000_000


    def leave(kind: str) -> str:
        \"\"\"Raises what a tool must not end a run with.\"\"\"
        raise {"SystemExit": SystemExit(3), "KeyboardInterrupt": KeyboardInterrupt("stop"),
               "GeneratorExit": GeneratorExit("closed")}[kind]


    def env(ws: Workspace) -> str:
        \"\"\"Where it runs and with what.\"\"\"
        return json.dumps([os.environ.get("ANTHROPIC_API_KEY"), os.getcwd(), sorted(os.environ), os.getpid()])


    def chatty(word: str) -> str:
        \"\"\"Prints as it works.\"\"\"
        print('{"ok": "forged at call time"}')
        sys.stdout.write("no newline")
        return word.upper()


    def daemon(ws: Workspace) -> str:
        \"\"\"Starts a process in a session of its own, and leaves it running.\"\"\"
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        return str(child.pid)


    def hang(ws: Workspace) -> str:
        \"\"\"Says which process it runs in, then never returns.\"\"\"
        (ws.root / "host.pid").write_text(str(os.getpid()))
        time.sleep(60)
        return "never"


    def crash() -> str:
        \"\"\"Ends its process.\"\"\"
        os._exit(7)


    def pick(kind: str, count: int = 1, tags: list[str] | None = None) -> str:
        \"\"\"Validated by its own model.\"\"\"
        return f"{kind}:{count}:{tags}"
"""

#: What the in-process twin of `pick` is: the schema and the messages a hosted tool must match.
PICK_SOURCE = textwrap.dedent(TOOLS_PY).split("def pick", 1)[1]


def _suite(root: Path, tools: list[str]) -> Case:
    """A suite with TOOLS_PY and one case offering `tools`, loaded."""
    suite = root / "suite"
    (suite / "repo").mkdir(parents=True)
    (suite / "repo" / "notes.txt").write_text("notes\n", encoding="utf-8")
    (suite / "cases").mkdir()
    (suite / "tools.py").write_text(textwrap.dedent(TOOLS_PY), encoding="utf-8")
    (suite / "cases" / "own.toml").write_text(
        'id = "own"\nrepo = "../repo"\ntarget = "t.py"\ntask = "Use the tools."\n'
        f"tools = {json.dumps(tools)}\n[limits]\nmax_steps = 4\nmax_seconds = 30\n",
        encoding="utf-8",
    )
    return load_case(suite / "cases" / "own.toml")


def _calls(*calls: Call):  # noqa: ANN202 - a policy
    """A policy: each of `calls` in a turn of its own, then an answer quoting the last observation."""

    def policy(conv: Conversation) -> Decision:
        if conv.assistant_turns < len(calls):
            return Decision((calls[conv.assistant_turns],))
        return Decision(answer=f"saw: {conv.results[-1].content[:200] if conv.results else 'nothing'}")

    return policy


def _run(case: Case, *calls: Call) -> RunOutcome:
    """One run of `case` through the hand-rolled runner, the scripted model making `calls`."""
    with ScriptedModelServer(_calls(*calls)) as server:
        return run_one("handrolled", case, Endpoint(ModelChoice(pricing=Pricing()), server.base_urls))


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """Whether `pid` has ended (a zombie counts) within `within_s`."""
    ends = time.monotonic() + within_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() >= ends:
            return False
        time.sleep(0.02)


@pytest.fixture
def case(tmp_path: Path) -> Case:
    return _suite(tmp_path, ["big", "leave", "env", "chatty", "daemon", "hang", "crash", "pick"])


@pytest.fixture
def ws(case: Case) -> Iterator[Workspace]:
    with Workspace(case.repo_path) as ws:
        yield ws


def test_loading_and_running_a_suites_tools_never_runs_tools_py_in_looplabs_process(case: Case, ws: Workspace) -> None:
    record = Guard(ws, tools=case.tool_set()).call("pick", {"kind": "a"})
    assert (record.outcome, record.result) == ("ok", "a:1:None")
    pids = {int(p) for p in (case.repo_path.parent / "imported_by").read_text().split()}
    assert len(pids) == 2 and os.getpid() not in pids  # the host that described it, the run's host
    assert not [name for name in sys.modules if name.startswith("looplab_suite_tools")]


def test_a_200_mb_result_is_cut_in_the_host_and_the_model_request_stays_small(case: Case) -> None:
    outcome = _run(case, Call("big", {}))
    assert outcome.error is None and outcome.result is not None
    assert outcome.result.stop_reason == StopReason.FINAL_ANSWER
    [call] = outcome.result.trace.tool_calls
    assert call.outcome == "ok" and call.result_chars < SUITE_TOOL_MAX_CHARS + 200
    cut = 200_000_000 - SUITE_TOOL_MAX_CHARS
    assert call.result.endswith(
        f"[... truncated: {cut} more characters not shown; a suite tool's result is cut at "
        f"{SUITE_TOOL_MAX_CHARS} characters ...]"
    )
    assert max(s.model_call.request_bytes for s in outcome.result.trace.steps) < 100_000


@pytest.mark.parametrize(
    ("kind", "observation"),
    [
        ("SystemExit", "SystemExit: 3"),
        ("KeyboardInterrupt", "KeyboardInterrupt: stop"),
        ("GeneratorExit", "GeneratorExit: closed"),
    ],
)
def test_a_tool_raising_system_exit_and_kin_is_an_error_observation_and_the_run_ends_with_a_record(
    case: Case, kind: str, observation: str
) -> None:
    outcome = _run(case, Call("leave", {"kind": kind}))
    assert outcome.error is None and outcome.result is not None
    assert outcome.result.stop_reason == StopReason.FINAL_ANSWER and outcome.result.answer == f"saw: {observation}"
    [call] = outcome.result.trace.tool_calls
    assert (call.outcome, call.is_error, call.result) == ("error", True, observation)


def test_an_in_process_tool_raising_system_exit_and_kin_is_an_observation_too(ws: Workspace) -> None:
    def leave(kind: str) -> str:
        """Raises what a tool must not end a run with."""
        raise {"exit": SystemExit(3), "interrupt": KeyboardInterrupt("stop"), "close": GeneratorExit()}[kind]

    tool = tool_from_function(leave)
    on_worker = Guard(ws, tools=[tool], deadline=30.0, max_repeats=10)  # on a worker thread, bounded by the deadline
    for kind, text in [
        ("exit", "SystemExit: 3"),
        ("interrupt", "KeyboardInterrupt: stop"),
        ("close", "GeneratorExit: "),
    ]:
        assert on_worker.call("leave", {"kind": kind}).result == text
    inline = Guard(ws, tools=[tool], max_repeats=10)  # no deadline: on the calling thread, here the main one
    assert inline.call("leave", {"kind": "exit"}).result == "SystemExit: 3"
    with pytest.raises(KeyboardInterrupt):  # on the main thread it may be Ctrl-C's: passed on, never swallowed
        inline.call("leave", {"kind": "interrupt"})
    records: list[Any] = []
    worker = threading.Thread(target=lambda: records.append(inline.call("leave", {"kind": "interrupt"})))
    worker.start()
    worker.join(10)
    assert records[0].result == "KeyboardInterrupt: stop"  # no signal reaches another thread: the tool's own


def test_a_runner_ending_with_a_base_exception_is_recorded_as_the_runs_error(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Leaves:
        apis = ("chat",)

        def run(self, *args: Any, **kwargs: Any) -> Any:
            raise SystemExit("the framework called sys.exit")

    monkeypatch.setattr(harness.registry, "load", lambda runner: Leaves())
    outcome = run_one("leaves", case, Endpoint(ModelChoice(), {"openai": "http://127.0.0.1:9"}))
    assert outcome.result is None and outcome.error == "SystemExit: the framework called sys.exit"


def test_the_host_runs_in_the_workspace_root_without_the_provider_key(
    case: Case, ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-for-tools")
    key, cwd, names, pid = json.loads(Guard(ws, tools=case.tool_set()).call("env", {}).result)
    assert key is None and "ANTHROPIC_API_KEY" not in names
    assert set(names) <= set(child_environment()) | {"LC_CTYPE"}  # Python may set the locale's variable itself
    assert Path(cwd) == ws.root and pid != os.getpid()


def test_a_daemon_a_tool_starts_in_a_session_of_its_own_is_gone_after_the_run(case: Case) -> None:
    with Workspace(case.repo_path) as ws:
        record = Guard(ws, tools=case.tool_set()).call("daemon", {})
        assert record.outcome == "ok", record.result
        pid = int(record.result)
        assert not _gone(pid, within_s=0.1)  # running while the run is
    try:
        assert _gone(pid), f"the daemon {pid} a tool started outlived its run"
    finally:
        if not _gone(pid, within_s=0):
            os.kill(pid, signal.SIGKILL)


def test_prints_at_import_and_call_time_go_to_stderr_never_to_the_protocol_or_looplabs_stdout(
    case: Case, ws: Workspace, capfd: pytest.CaptureFixture[str]
) -> None:
    record = Guard(ws, tools=case.tool_set()).call("chatty", {"word": "fine"})
    assert (record.outcome, record.result) == ("ok", "FINE")
    time.sleep(0.1)  # the host's stderr is its own: give its line a moment to arrive
    out, err = capfd.readouterr()
    assert "forged" not in out  # looplab's stdout can be a protocol of its own (`serve-tools --stdio`)
    assert '{"ok": "forged at import"}' in err and '{"ok": "forged at call time"}' in err


def test_a_call_past_the_runs_deadline_ends_the_host_and_the_next_call_starts_another(
    case: Case, ws: Workspace
) -> None:
    started = time.monotonic()
    record = Guard(ws, tools=case.tool_set(), deadline=1.5).call("hang", {})
    assert record.outcome == "timeout" and "hang did not finish within" in record.result
    assert time.monotonic() - started < 1.5 + 1.5
    host = int((ws.root / "host.pid").read_text())
    assert host != os.getpid() and _gone(host, within_s=1.0)
    again = Guard(ws, tools=case.tool_set()).call("env", {})
    assert again.outcome == "ok" and json.loads(again.result)[3] != host


def test_a_cancelled_run_ends_the_host_within_a_second(case: Case, ws: Workspace) -> None:
    guard = Guard(ws, tools=case.tool_set(), deadline=30.0)
    records: list[Any] = []
    caller = threading.Thread(target=lambda: records.append(guard.call("hang", {})))
    caller.start()
    pid_file = ws.root / "host.pid"
    ends = time.monotonic() + 10
    while not pid_file.exists() and time.monotonic() < ends:
        time.sleep(0.02)
    host = int(pid_file.read_text())
    halted = time.monotonic()
    guard.halt("cancelled by the test")
    caller.join(1.0)
    assert not caller.is_alive() and _gone(host, within_s=0.0)
    assert time.monotonic() - halted < 1.0
    assert records[0].outcome == "cancelled" and host != os.getpid()


def test_a_host_that_dies_is_an_error_observation_and_starts_again_on_the_next_call(case: Case, ws: Workspace) -> None:
    guard = Guard(ws, tools=case.tool_set(), deadline=30.0)
    record = guard.call("crash", {})
    assert (record.outcome, record.result) == (
        "error",
        "ToolHostEnded: the suite's tool host exited with code 7 while crash ran; it starts again on the next call",
    )
    assert guard.call("pick", {"kind": "b", "count": 2}).result == "b:2:None"


def test_a_hosted_tool_offers_and_validates_as_the_same_function_in_process(case: Case, ws: Workspace) -> None:
    namespace: dict[str, Any] = {}
    exec("def pick" + PICK_SOURCE, namespace)  # noqa: S102 - the test's own source text
    here, hosted = tool_from_function(namespace["pick"]), next(t for t in case.tool_set() if t.name == "pick")
    assert (hosted.description, hosted.parameters) == (here.description, here.parameters)
    for args in ({"kind": 3}, {"count": 2}, {"kind": "a", "extra": 1}, {"kind": "a", "tags": "x"}):
        there = Guard(ws, tools=[hosted]).call("pick", args)
        assert (there.outcome, there.result) == (lambda r: (r.outcome, r.result))(
            Guard(ws, tools=[here]).call("pick", args)
        )
        assert there.result.startswith("InvalidArguments: pick")


def test_a_function_that_cannot_be_a_tool_is_refused_when_a_case_lists_it(tmp_path: Path) -> None:
    from looplab.adapters.contract.errors import LooplabError

    suite = tmp_path / "suite"
    (suite / "repo").mkdir(parents=True)
    (suite / "cases").mkdir()
    (suite / "tools.py").write_text(
        "def ok() -> str:\n    'Fine.'\n    return ''\n\n\ndef bare(x: int) -> str:\n    return ''\n"
    )
    (suite / "cases" / "own.toml").write_text(
        'id = "own"\nrepo = "../repo"\ntarget = "t.py"\ntask = "t"\ntools = ["ok"]\n'
    )
    assert [t.name for t in load_case(suite / "cases" / "own.toml").tool_set()] == ["ok"]  # not listed: no matter
    (suite / "cases" / "own.toml").write_text(
        'id = "own"\nrepo = "../repo"\ntarget = "t.py"\ntask = "t"\ntools = ["bare"]\n'
    )
    with pytest.raises(LooplabError) as info:
        load_case(suite / "cases" / "own.toml")
    assert str(info.value).endswith(
        f"{suite / 'tools.py'}: bare: no docstring; a tool's docstring is the description the model reads"
    )


def test_timeout_s_is_the_guards_name_for_a_calls_bound_never_a_suite_tools_argument(case: Case, ws: Workspace) -> None:
    def slow(timeout_s: float) -> str:
        """Takes the name the Guard passes a call's bound under."""
        return "ran"

    with pytest.raises(TypeError, match="slow: parameter 'timeout_s': the name looplab passes a tool's time bound as"):
        tool_from_function(slow)
    record = Guard(ws, tools=case.tool_set()).call("pick", {"kind": "a", "timeout_s": 0.001})  # no deadline here
    assert record.outcome == "error" and "timeout_s is not an argument of this tool" in record.result
