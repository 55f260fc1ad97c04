"""A suite's own tools and its own test command.

A team's plain typed function becomes a tool (`tool_from_function`) that the Guard serves like the built-in ones:
validated, timed, bounded by the deadline, counted for repetition, behind approval when it is an effect, its
failures observations. Every runner, in process, over MCP, in Node and as an external agent, leaves the same
records of it. `run_tests` runs a suite's own command (here a small Node project's `node --test`) confined as
pytest is: the workspace root, the environment allowlist, its process group killed at the deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from looplab.adapters import registry
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import ToolTransport
from looplab.adapters.contract.pricing import Pricing
from looplab.adapters.contract.result import RunResult
from looplab.adapters.runners.external import EXTERNAL_COMMAND_ENV
from looplab.run.harness import Endpoint, ModelChoice
from looplab.scenarios.scripted.conversation import Conversation
from looplab.scenarios.scripted.policy import Call, Decision
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import (
    BUILTIN_TOOLS,
    Guard,
    Tool,
    Workspace,
    builtin_tool,
    default_tools,
    tools,
)
from looplab.shared_tools.custom import tool_from_function
from tests.conftest import SYSTEM_PROMPT
from tests.paths import REPO, TESTS
from tests.runs import ALL_RUNNERS
from tests.tiers import by_tier

NODE_PROJECT = TESTS / "fixtures" / "node_project"
NODE_FAILURE = "1620 !== 1800"  # the failing test's assertion, as node --test reports it
EXAMPLE_AGENT = REPO / "examples" / "stdlib_agent.py"

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH")


# --- a team's tools ---------------------------------------------------------------------------------------------


def lookup(
    ws: Workspace,
    code: Annotated[str, Field(description="A product code, e.g. 'B7'.")],
    count: int,
) -> str:
    """The product a code names, `count` times, from codes.txt in the repository.

    Use it to find what a code stands for.
    """
    lines = ws.text_file("codes.txt").read_text(encoding="utf-8").splitlines()
    table = dict(line.split("=", 1) for line in lines if "=" in line)
    return " | ".join([table[code]] * count)


def stock(
    code: str,
    warehouses: list[str] | None = None,
    unit: Literal["each", "box"] = "each",
    weights: dict[str, float] | None = None,
    urgent: bool = False,
) -> dict[str, Any]:
    """How many of a product are left, per warehouse."""
    left = {w: len(w) * (weights or {}).get(w, 1.0) for w in warehouses or ["main"]}
    return {"code": code, "left": left, "unit": unit, "urgent": urgent}


def catalogue(ws: Workspace) -> list[str]:
    """Every product code in the repository's table."""
    return [line.split("=", 1)[0] for line in ws.text_file("codes.txt").read_text(encoding="utf-8").splitlines()]


def order(code: str, quantity: int = 1) -> str:
    """Order more of a product: an effect."""
    return f"ordered {quantity} of {code}"


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A repo holding the table `lookup` reads."""
    repo = tmp_path / "shop"
    repo.mkdir()
    (repo / "codes.txt").write_text("B7=blue widget\nR2=red gadget\n", encoding="utf-8")
    return repo


@pytest.fixture
def shop_ws(shop: Path) -> Iterator[Workspace]:
    with Workspace(shop) as ws:
        yield ws


def test_a_function_becomes_a_tool_with_its_name_docstring_and_typed_parameters() -> None:
    tool = tool_from_function(lookup)
    assert (tool.name, tool.effect) == ("lookup", False)
    assert tool.description == (
        "The product a code names, `count` times, from codes.txt in the repository.\n\n"
        "Use it to find what a code stands for."
    )
    # the Workspace is bound by the Guard, never shown to the model
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "A product code, e.g. 'B7'."},
            "count": {"type": "integer"},
        },
        "required": ["code", "count"],
        "additionalProperties": False,
    }
    # a team's tool takes no timeout of its own: the Guard runs it on a worker bounded by the run's deadline
    assert tool.timeout_default is None and not tool.bounds_itself


def test_a_function_without_the_workspace_takes_only_the_models_arguments() -> None:
    def pick(kind: Literal["a", "b"], limit: int = 3, tags: dict[str, float] | None = None) -> str:
        """Pick one."""
        return f"{kind}:{limit}:{tags}"

    tool = tool_from_function(pick)
    assert tool.parameters["properties"]["kind"] == {"enum": ["a", "b"], "type": "string"}
    assert tool.parameters["required"] == ["kind"]
    with Workspace(NODE_PROJECT) as ws:
        record = Guard(ws, tools=[tool]).call("pick", {"kind": "b"})
    assert (record.outcome, record.result) == ("ok", "b:3:None")


def test_the_workspace_parameter_reads_the_runs_copy_through_its_path_rule(shop_ws: Workspace) -> None:
    guard = Guard(shop_ws, tools=[tool_from_function(lookup)])
    assert guard.call("lookup", {"code": "R2", "count": 2}).result == "red gadget | red gadget"
    (shop_ws.root / "codes.txt").write_text("R2=green gadget\n", encoding="utf-8")  # the copy, not the source
    assert guard.call("lookup", {"code": "R2", "count": 1}).result == "green gadget"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(st.characters(exclude_categories=("Cs",)), max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_JSON)
def test_a_result_that_is_not_text_reaches_the_model_as_json(shop_ws: Workspace, value: Any) -> None:
    def report(ws: Workspace) -> Any:
        """A value of any JSON shape."""
        return value

    record = Guard(shop_ws, tools=[tool_from_function(report)], max_repeats=10**6).call("report", {})
    expected = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    assert (record.outcome, record.result) == ("ok", expected)


def test_a_result_json_cannot_hold_is_sent_as_its_text(shop_ws: Workspace) -> None:
    record = Guard(shop_ws, tools=[tool_from_function(stock)]).call("stock", {"code": "B7", "warehouses": ["ab"]})
    assert json.loads(record.result) == {"code": "B7", "left": {"ab": 2.0}, "unit": "each", "urgent": False}

    def when() -> Any:
        """A value JSON has no type for."""
        return {"at": Path("a/b")}

    assert Guard(shop_ws, tools=[tool_from_function(when)]).call("when", {}).result == '{"at": "a/b"}'


BAD_FUNCTIONS = {
    "def f(x):\n    'Doc.'": "f: parameter 'x' has no type annotation",
    "def f(*xs: int):\n    'Doc.'": "f: parameter 'xs': *args and **kwargs",
    "def f(**kw: int):\n    'Doc.'": "f: parameter 'kw': *args and **kwargs",
    "def f(x: int, /):\n    'Doc.'": "f: parameter 'x': positional-only",
    "def f(x: int):\n    pass": "f: no docstring",
    "def f(x: object):\n    'Doc.'": "f: parameter 'x': type object is not supported",
    "def f(x: Path):\n    'Doc.'": "f: parameter 'x': type Path is not supported",
    "def f(x: list):\n    'Doc.'": "f: parameter 'x': give the list's item type",
    "def f(x: dict[int, str]):\n    'Doc.'": "f: parameter 'x': a dict's keys are strings",
    "def f(x: int = object()):\n    'Doc.'": "f: parameter 'x': its default",
    "def f(ws: Workspace, other: Workspace):\n    'Doc.'": "f: parameter 'other': only the first parameter",
    "def f(x: 'Undefined'):\n    'Doc.'": "f: its type annotations do not resolve",
    "async def f(x: int):\n    'Doc.'": "f: a tool is a plain function",
    "def f(x: int):\n    'Doc.'\n    yield x": "f: a tool is a plain function",
    "def read_file(x: int):\n    'Doc.'": "read_file: the name of a built-in tool",
    "def f(_x: int):\n    'Doc.'": "f: parameter '_x': a name starting with '_'",
}


@pytest.mark.parametrize(("source", "message"), BAD_FUNCTIONS.items(), ids=range(len(BAD_FUNCTIONS)))
def test_a_function_the_model_cannot_be_offered_is_a_one_line_type_error(source: str, message: str) -> None:
    namespace: dict[str, Any] = {"Workspace": Workspace, "Path": Path}
    exec(source, namespace)  # noqa: S102 - the test's own source text
    fn = next(v for k, v in namespace.items() if k not in ("Workspace", "Path", "__builtins__"))
    with pytest.raises(TypeError) as info:
        tool_from_function(fn)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


@pytest.mark.parametrize("thing", [lambda x: x, len, print, str.upper], ids=["lambda", "len", "print", "method"])
def test_only_a_named_plain_function_is_a_tool(thing: Any) -> None:
    with pytest.raises(TypeError) as info:
        tool_from_function(thing)
    assert "\n" not in str(info.value)


def test_an_effect_tool_runs_only_when_approved(shop_ws: Workspace) -> None:
    tool = tool_from_function(order, effect=True)
    denied = Guard(shop_ws, tools=[tool])
    record = denied.call("order", {"code": "B7", "quantity": 2})
    assert record.outcome == "rejected" and "ApprovalDenied" in record.result
    assert denied.stop is not None and denied.stop.reason == "rejected"

    asked: list[tuple[str, dict[str, Any]]] = []
    approved = Guard(shop_ws, tools=[tool], approver=lambda name, args: asked.append((name, args)) or True)
    assert approved.call("order", {"code": "B7", "quantity": 2}).result == "ordered 2 of B7"
    assert asked == [("order", {"code": "B7", "quantity": 2})] and approved.stop is None


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    args=st.dictionaries(
        st.sampled_from(["code", "count", "extra"]),
        st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["B7", "R2", "3", ""]) | st.just([1]),
    )
    | st.text(max_size=30)
    | st.integers()
)
def test_arguments_are_validated_by_the_guard_before_the_function_runs(shop_ws: Workspace, args: Any) -> None:
    calls: list[dict[str, Any]] = []

    def counted(code: str, count: int) -> str:
        """Counts its calls."""
        calls.append({"code": code, "count": count})
        return "ran"

    tool = tool_from_function(counted)
    record = Guard(shop_ws, tools=[tool]).call("counted", args)
    try:
        valid = isinstance(args, dict) and tool.args_model.model_validate(args) is not None
    except ValueError:
        valid = False
    if valid:
        assert (record.outcome, record.result, calls) == ("ok", "ran", [record.args])
    else:
        assert record.outcome == "error" and record.result.startswith("InvalidArguments: counted") and not calls
        assert '"code": "string", "count": "integer"' in record.result  # the shape it expects


def test_a_raising_tool_is_an_observation_timed_and_counted_for_repetition(shop_ws: Workspace) -> None:
    def slow_then_fail(code: str) -> str:
        """Waits, then fails."""
        time.sleep(0.05)
        raise LookupError(f"no product {code}")

    guard = Guard(shop_ws, tools=[tool_from_function(slow_then_fail)], max_repeats=3, deadline=60.0)
    first, second, third = (guard.call("slow_then_fail", {"code": "Q"}) for _ in range(3))
    assert (first.outcome, first.is_error, first.result) == ("error", True, "LookupError: no product Q")
    assert first.duration_s >= 0.05 and second.started_at >= first.started_at + first.duration_s - 1e-5
    assert second.outcome == "error" and third.outcome == "repetition"
    assert guard.stop is not None and guard.stop.reason == "repetition"


def test_a_tool_still_running_at_the_deadline_ends_the_run_and_is_not_awaited(shop_ws: Workspace) -> None:
    release = threading.Event()

    def wait_forever(code: str) -> str:
        """Blocks until released."""
        release.wait(30)
        return "released"

    guard = Guard(shop_ws, tools=[tool_from_function(wait_forever)], deadline=0.3)
    try:
        record = guard.call("wait_forever", {"code": "B7"})
    finally:
        release.set()
    assert record.outcome == "timeout" and "still running at the run's deadline" in record.result
    assert guard.stop is not None and guard.stop.reason == "timeout"


# --- the built-in tools ------------------------------------------------------------------------------------------


def test_the_built_in_tools_by_name_are_built_once_per_process() -> None:
    assert BUILTIN_TOOLS == ("run_tests", "read_file", "search_code", "write_file")
    built = [builtin_tool(name) for name in BUILTIN_TOOLS]
    assert [t.name for t in built] == list(BUILTIN_TOOLS) and [t.effect for t in built] == [False] * 3 + [True]
    assert all(a is b for a, b in zip(built, map(builtin_tool, BUILTIN_TOOLS), strict=True))
    assert default_tools(allow_writes=True) == built and default_tools() == built[:3]
    assert built[0].fn is tools.run_tests  # no command: today's pinned pytest invocation
    with pytest.raises(ValueError, match="no built-in tool named 'lookup'; the built-in tools are run_tests"):
        builtin_tool("lookup")


def test_run_tests_with_a_command_keeps_its_bounds_and_names_the_command() -> None:
    tool = builtin_tool("run_tests", test_command=["node", "--test"])
    assert tool is builtin_tool("run_tests", test_command=("node", "--test"))  # cached per command
    assert tool.timeout_default == tools.RUN_TESTS_TIMEOUT_S and tool.bounds_itself  # it kills at `timeout_s`
    assert tool.description.startswith("Run the project's tests with `node --test` on a test file")
    assert "pytest" not in json.dumps(tool.parameters) and "::" not in json.dumps(tool.parameters)
    assert builtin_tool("read_file", test_command=["node", "--test"]) is builtin_tool("read_file")
    assert [t.name for t in default_tools(test_command=["node", "--test"])] == list(BUILTIN_TOOLS[:3])


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("node --test", "is one string; give it as a list of arguments, e.g. ['node', '--test']"),
        ([], "a test command is a non-empty list"),
        (["node", 3], "every argument must be a string"),
        (["", "--test"], "its first argument must name the program"),
        (["{target}"], "its first argument must name the program"),
    ],
)
def test_a_test_command_that_is_not_a_list_of_arguments_is_a_one_line_error(command: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        builtin_tool("run_tests", test_command=command)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_read_file_and_search_code_work_on_a_node_project_and_secrets_stay_refused() -> None:
    with Workspace(NODE_PROJECT) as ws:
        (ws.root / ".env").write_text("TOKEN=secret\n")
        (ws.root / "logo.png").write_bytes(b"\x89PNG")
        guard = Guard(ws, tools=default_tools(), max_repeats=10)
        assert "function total(lines, percent)" in guard.call("read_file", {"path": "src/cart.js"}).result
        hits = guard.call("search_code", {"query": "applyCoupon\\("}).result
        assert "src/cart.js:" in hits and "src/coupon.js:" in hits
        assert guard.call("read_file", {"path": "package.json"}).outcome == "ok"
        assert guard.call("read_file", {"path": ".env"}).outcome == "refused"
        png = guard.call("read_file", {"path": "logo.png"})
        assert png.outcome == "error" and "not '.png' files" in png.result
        assert "secret" not in guard.call("search_code", {"query": "TOKEN"}).result


# --- the test command --------------------------------------------------------------------------------------------


@pytest.fixture
def node_ws() -> Iterator[Workspace]:
    with Workspace(NODE_PROJECT) as ws:
        yield ws


@needs_node
@pytest.mark.parametrize("command", [["node", "--test", "{target}"], ["node", "--test"]], ids=["placeholder", "append"])
def test_run_tests_runs_node_test_on_the_target_and_returns_its_failure(node_ws: Workspace, command: list[str]) -> None:
    guard = Guard(node_ws, tools=[builtin_tool("run_tests", test_command=command)])
    record = guard.call("run_tests", {"target": "./test/cart.test.js"})
    assert record.outcome == "ok" and record.args == {"target": "test/cart.test.js"}
    assert record.result.startswith("exit code 1\n") and NODE_FAILURE in record.result
    assert "# pass 1" in record.result and "# fail 1" in record.result


@needs_node
def test_run_tests_on_a_folder_runs_the_tests_in_it(node_ws: Workspace) -> None:
    out = tools.run_tests(node_ws, "test", command=("node", "--test"))
    assert out.startswith("exit code 1\n") and NODE_FAILURE in out


def test_the_target_is_one_argument_substituted_where_the_placeholder_is_or_appended(node_ws: Workspace) -> None:
    line = tools.command_for_target(node_ws, ["python", "-m", "x", "--file={target}", "{target}"], "a b.js")
    assert line == [sys.executable, "-m", "x", "--file=a b.js", "a b.js"]  # python: looplab's own interpreter
    appended = tools.command_for_target(node_ws, ["python3", "-m", "x"], "t.py::k")
    assert appended == [sys.executable, "-m", "x", "t.py::k"]


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("-x", "would be read as an option"),
        ("--require=./evil.js", "would be read as an option"),
        ("../outside.js", "'..' leaves the repository"),
        ("/etc/passwd", "absolute paths are refused"),
        (".env", "secret-looking"),
    ],
)
def test_a_target_that_is_an_option_or_leaves_the_workspace_is_refused(
    node_ws: Workspace, target: str, why: str
) -> None:
    guard = Guard(node_ws, tools=[builtin_tool("run_tests", test_command=["python", "-c", "print('ran')"])])
    record = guard.call("run_tests", {"target": target})
    assert record.outcome == "refused" and why in record.result and "ran" not in record.result


def test_a_program_not_found_is_an_observation(node_ws: Workspace) -> None:
    guard = Guard(node_ws, tools=[builtin_tool("run_tests", test_command=["no-such-test-runner-xyz", "--all"])])
    record = guard.call("run_tests", {"target": "test/cart.test.js"})
    assert record.outcome == "error"
    assert record.result == (
        "ToolError: the test command's program 'no-such-test-runner-xyz' was not found on PATH; "
        "it cannot run the tests here"
    )


def test_the_command_runs_in_the_workspace_root_with_the_allowlisted_environment(
    node_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-shown")
    show = "import json, os, sys; print(json.dumps([os.getcwd(), sorted(os.environ), sys.argv[1:]]))"
    out = tools.run_tests(node_ws, "test/cart.test.js", command=("python", "-c", show))
    assert out.startswith("exit code 0\n")
    cwd, names, argv = json.loads(out.split("\n", 1)[1])
    assert Path(cwd) == node_ws.root and argv == ["test/cart.test.js"]
    assert "OPENAI_API_KEY" not in names and set(names) <= set(tools.child_environment())


def test_the_output_keeps_its_tail(node_ws: Workspace) -> None:
    loud = "print('\\n'.join(f'line {i}' for i in range(2000)))"
    out = tools.run_tests(node_ws, "x", command=("python", "-c", loud), max_chars=100)
    assert "earlier characters truncated" in out and out.rstrip().endswith("line 1999")


def _spawner(repo: Path, name: str, *, own_session: bool) -> None:
    """A test command `name` in `repo` that starts a child sleeping 60 s (writing its pid to child.pid), says
    `started`, and sleeps 60 s itself; the child in a session of its own when `own_session`."""
    repo.mkdir(exist_ok=True)
    (repo / name).write_text(
        "import pathlib, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
        f"start_new_session={own_session})\n"
        "pathlib.Path('child.pid').write_text(str(child.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )


@pytest.fixture
def hanging_repo(tmp_path: Path) -> Path:
    # A grandchild that would outlive a plain kill of the test command.
    _spawner(tmp_path / "hangs", "hang.py", own_session=False)
    return tmp_path / "hangs"


def _gone(pid: int) -> bool:
    """Whether `pid` has ended (a killed child stays a zombie until its parent, here init, reaps it)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return not stat.exists() or stat.read_text().split()[2] in ("Z", "X")


def test_a_command_that_overruns_is_killed_with_its_process_group(hanging_repo: Path) -> None:
    with Workspace(hanging_repo) as ws:
        guard = Guard(ws, tools=[builtin_tool("run_tests", test_command=["python", "{target}"])], deadline=2.0)
        record = guard.call("run_tests", {"target": "hang.py"})
        assert record.outcome == "timeout" and "python hang.py did not finish" in record.result
        assert "was killed" in record.result
        pid = int((ws.root / "child.pid").read_text())
    waited = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < waited:
        time.sleep(0.05)
    assert _gone(pid), f"grandchild {pid} survived the deadline"


def test_a_process_that_leaves_the_group_holding_the_output_cannot_hold_the_tool_past_its_bound(tmp_path: Path) -> None:
    repo = tmp_path / "escapes"
    # A child in a session of its own keeps the output pipe open after the group is killed.
    _spawner(repo, "escape.py", own_session=True)
    with Workspace(repo) as ws:
        guard = Guard(ws, tools=[builtin_tool("run_tests", test_command=["python", "{target}"])], deadline=1.0)
        started = time.monotonic()
        try:
            record = guard.call("run_tests", {"target": "escape.py"})
            took = time.monotonic() - started
        finally:
            pid_file = ws.root / "child.pid"
            if pid_file.exists():  # it left the group: where no reaper ends it, this test's to end
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert record.outcome == "timeout" and "started" in record.result
    assert took < 1.0 + 2 * tools.DRAIN_S + 5.0, f"held {took:.1f} s"  # the bound, not the child's 60 s


# --- through every runner ----------------------------------------------------------------------------------------

#: What the policy asks for, in order: a tool without arguments, a good lookup, one whose code is missing (the
#: tool raises), a JSON result from arguments of several types.
CALLS = (
    Call("catalogue", {}),
    Call("lookup", {"code": "B7", "count": 2}),
    Call("lookup", {"code": "ZZ", "count": 1}),
    Call("stock", {"code": "B7", "warehouses": ["north", "east"], "unit": "box", "weights": {"east": 0.5}}),
)
#: The records every runner must leave: (name, args, outcome, result).
EXPECTED = [
    ("catalogue", {}, "ok", '["B7", "R2"]'),
    ("lookup", {"code": "B7", "count": 2}, "ok", "blue widget | blue widget"),
    ("lookup", {"code": "ZZ", "count": 1}, "error", "KeyError: 'ZZ'"),
    (
        "stock",
        {"code": "B7", "warehouses": ["north", "east"], "unit": "box", "weights": {"east": 0.5}, "urgent": False},
        "ok",
        '{"code": "B7", "left": {"north": 5.0, "east": 2.0}, "unit": "box", "urgent": false}',
    ),
]


def calls_the_suites_tools(conv: Conversation) -> Decision:
    """One of CALLS a turn, then an answer quoting what the first call returned."""
    if conv.assistant_turns < len(CALLS):
        return Decision((CALLS[conv.assistant_turns],))
    first = next((r.content for r in conv.results if r.call.name == "lookup"), "nothing")
    return Decision(answer=f"B7 is: {first}")


IN_PROCESS = [r for r in ALL_RUNNERS if not registry.RUNNERS[r].commands]
CELLS = [
    *((runner, "in-process") for runner in ALL_RUNNERS),
    *((runner, "mcp") for runner in IN_PROCESS),  # the others serve their tools over MCP anyway
    ("external", "mcp"),
]


@pytest.fixture(scope="module")
def suite_model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(calls_the_suites_tools) as server:
        yield server


def run_with_suite_tools(runner: str, server: ScriptedModelServer, shop: Path, transport: ToolTransport) -> RunResult:
    """One run of `runner` offering the built-in tools and the suite's three, in a workspace of `shop`."""
    adapter = registry.load(runner)
    urls = {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url}
    spec = Endpoint(ModelChoice(pricing=Pricing()), urls).spec_for(adapter)
    offered: list[Tool] = [*default_tools(), *map(tool_from_function, (catalogue, lookup, stock))]
    limits = Limits(max_steps=len(CALLS) + 2)
    with Workspace(shop) as ws:
        guard = Guard(ws, tools=offered, max_repeats=limits.max_repeats)
        return adapter.run("What is product B7?", guard, limits, spec, tools=transport, system_prompt=SYSTEM_PROMPT)


@pytest.mark.parametrize(("runner", "transport"), by_tier(CELLS))
def test_every_runner_leaves_the_same_records_of_the_suites_tools(
    runner: str, transport: ToolTransport, suite_model: ScriptedModelServer, shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if runner == "external":
        monkeypatch.setenv(EXTERNAL_COMMAND_ENV, f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE_AGENT))}")
    result = run_with_suite_tools(runner, suite_model, shop, transport)
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert result.tool_transport == ("in-process" if transport == "in-process" and runner in IN_PROCESS else "mcp")
    records = [(c.name, c.args, c.outcome, c.result) for c in result.trace.tool_calls]
    assert records == EXPECTED
    assert result.answer == "B7 is: blue widget | blue widget"  # what the tool returned reached the model
