"""The tool boundary under attack: nothing a model sends can hang a run, reach a secret or crash the Guard.

Each regression test here failed before its fix; the hypothesis properties throw generated input
(paths, argument JSON of any depth and encoding, regular expressions, layouts with symlinks) at the
Workspace and the Guard, bounded in examples and time.
"""

from __future__ import annotations

import json
import os
import string
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looplab.adapters.contract.limits import Limits, StopReason
from looplab.records import results
from looplab.run import harness
from looplab.scenarios.scripted.conversation import Conversation
from looplab.scenarios.scripted.policy import Call, Decision
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import Fault, Guard, PathRefused, Workspace, default_tools, tools, with_faults
from looplab.shared_tools.confine import TEST_ENV_ALLOWED
from looplab.shared_tools.workspace import SECRET_PATTERNS
from tests.runs import ALL_RUNNERS, run_runner
from tests.tiers import BUSY_MACHINE_S, by_tier, scaled_examples

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
#: Any character, lone surrogates and NUL included.
ANY_CHAR = st.characters(codec=None, categories=None)


def guard_with_deadline(ws: Workspace, seconds: float, **kwargs: object) -> Guard:
    guard = Guard(ws, **kwargs)  # type: ignore[arg-type]
    guard.deadline = guard.clock() + seconds
    return guard


# --- hangs -------------------------------------------------------------------------------------------


def test_a_backtracking_search_ends_at_the_run_deadline(workspace: Workspace) -> None:
    guard = guard_with_deadline(workspace, 1.5)
    started = time.monotonic()
    record = guard.call("search_code", {"query": r"(.|.)*x$"})  # exponential on any line without an x at the end
    assert time.monotonic() - started < 1.5 + BUSY_MACHINE_S
    assert (record.outcome, guard.stop and guard.stop.reason) == ("timeout", "timeout")


def test_a_backtracking_search_with_time_left_is_an_error_the_model_can_act_on(workspace: Workspace) -> None:
    guard = guard_with_deadline(workspace, 60)
    record = guard.call("search_code", {"query": r"(.|.)*x$"})
    assert record.outcome == "error" and guard.stop is None
    # The regex engine checks its clock now and then; unbounded, this pattern would run for hours (the margin is for
    # a machine busy with other work).
    assert "backtracks" in record.result and record.duration_s < 3 * tools.SEARCH_TIMEOUT_S


def test_the_nested_quantifier_from_the_report_is_fast(workspace: Workspace) -> None:
    guard = guard_with_deadline(workspace, 3)
    record = guard.call("search_code", {"query": r"(\w+\s?)*$"})
    assert record.outcome == "ok" and record.duration_s < 3


def test_a_ten_megabyte_query_is_refused_without_being_echoed(workspace: Workspace) -> None:
    record = Guard(workspace).call("search_code", {"query": "x" * 10_000_000})
    assert record.outcome == "error" and "at most 1000 characters" in record.result
    assert len(record.result) < 500 and len(json.dumps(record.args)) < 3_000


def test_any_slow_tool_ends_the_run_as_timeout_on_time(workspace: Workspace) -> None:
    slow = with_faults(default_tools(), [Fault(tool="read_file", kind="slow", seconds=30)])
    guard = guard_with_deadline(workspace, 1.0, tools=slow)
    started = time.monotonic()
    record = guard.call("read_file", {"path": "billing/discount.py"})
    assert time.monotonic() - started < 1.5
    assert record.outcome == "timeout" and guard.stop is not None and guard.stop.reason == "timeout"


def test_a_fifo_in_the_workspace_blocks_no_tool_and_not_the_fingerprint(workspace: Workspace) -> None:
    os.mkfifo(workspace.root / "pipe.txt")
    results: list[object] = []
    worker = threading.Thread(
        target=lambda: results.extend(
            [
                workspace.fingerprint(),
                Guard(workspace).call("read_file", {"path": "pipe.txt"}).outcome,
                Guard(workspace).call("search_code", {"query": "def"}).outcome,
                Guard(workspace, approver=lambda *_: True, tools=default_tools(allow_writes=True))
                .call("write_file", {"path": "pipe.txt", "content": "x"})
                .outcome,
            ]
        ),
        daemon=True,
    )
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "a tool or the fingerprint blocked on the FIFO"
    assert results[1:] == ["error", "ok", "error"]


# --- leaks ---------------------------------------------------------------------------------------


def test_search_code_cannot_read_a_secret_through_a_symlink_or_a_credentials_folder(workspace: Workspace) -> None:
    (workspace.root / ".env").write_text("OPENAI_API_KEY=sk-leaked-through-search\n")
    (workspace.root / "notes.txt").symlink_to(".env")
    (workspace.root / "credentials").mkdir()
    (workspace.root / "credentials" / "prod.txt").write_text("password = sk-leaked-from-folder\n")
    guard = Guard(workspace)
    found = guard.call("search_code", {"query": "sk-leaked"}).result
    assert found.startswith("no matches") and "through-search" not in found and "from-folder" not in found
    for path in ("notes.txt", "credentials/prod.txt"):
        assert guard.call("read_file", {"path": path}).outcome == "refused"


SECRET_NAMES = st.sampled_from([".env", ".env.prod", "id_rsa", "key.pem", "credentials", "secrets.yaml", ".netrc"])
PLAIN_NAMES = st.text(string.ascii_lowercase, min_size=1, max_size=6).map(lambda s: f"{s}.txt")


@FAST
@given(
    secrets=st.lists(st.tuples(st.booleans(), SECRET_NAMES, PLAIN_NAMES), min_size=1, max_size=4),
    links=st.lists(st.tuples(PLAIN_NAMES, st.integers(0, 3)), max_size=4),
)
@pytest.mark.full  # a workspace per example; the symlink and credentials cases above stay fast
def test_search_code_reads_exactly_what_read_file_may_read(
    workspace: Workspace, secrets: list[tuple[bool, str, str]], links: list[tuple[str, int]]
) -> None:
    """Secret files (by name, or inside a secret-named folder) hold a marker; links with plain names point at them."""
    root = Path(tempfile.mkdtemp(dir=workspace.root, prefix="gen"))
    targets = []
    for i, (in_folder, secret, plain) in enumerate(secrets):
        path = root / f"s{i}" / secret / plain if in_folder else root / f"s{i}" / secret
        path.parent.mkdir(parents=True)
        path.write_text("MARKER-SECRET-VALUE\n")
        targets.append(path)
    for name, i in links:
        link = root / f"link-{name}"
        if not link.exists():
            link.symlink_to(os.path.relpath(targets[i % len(targets)], root))
    guard = Guard(workspace, max_repeats=10**6)
    assert "MARKER-SECRET-VALUE" not in guard.call("search_code", {"query": "MARKER-SECRET"}).result
    for path in root.rglob("*"):
        record = guard.call("read_file", {"path": workspace.relative(path)})
        assert "MARKER-SECRET-VALUE" not in record.result
    readable = {workspace.relative(p) for p in workspace.text_files()}
    for path in readable:
        assert guard.call("read_file", {"path": path}).outcome == "ok", path


@FAST
@given(
    path=st.text(ANY_CHAR, max_size=40)
    | st.lists(st.sampled_from(["..", ".", "~", "", "a", ".env", "\0"])).map("/".join)
)
def test_resolve_keeps_every_path_inside_and_away_from_secrets(workspace: Workspace, path: str) -> None:
    try:
        resolved = workspace.resolve(path)
    except PathRefused:
        return
    assert resolved.is_relative_to(workspace.root)
    assert not any(Path(part).match(p) for part in resolved.relative_to(workspace.root).parts for p in SECRET_PATTERNS)


@pytest.fixture
def bare_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repo with no pytest config, whose workspaces are made inside a folder holding a hostile config."""
    hostile = tmp_path / "tmp"
    hostile.mkdir()
    (hostile / "conftest.py").write_text("print('HOSTILE CONFTEST LOADED')\nraise SystemExit(3)\n")
    (hostile / "pytest.ini").write_text("[pytest]\naddopts = -p hostile_plugin --hostile-option\n")
    monkeypatch.setattr(tempfile, "tempdir", str(hostile))
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_env.py").write_text(
        "import os\n\ndef test_ok():\n    pass\n\ndef test_env():\n    assert False, sorted(os.environ.items())\n"
    )
    return repo


def test_run_tests_loads_no_config_or_conftest_from_outside_the_workspace(bare_repo: Path) -> None:
    with Workspace(bare_repo) as ws:
        assert ws.root.is_relative_to(Path(tempfile.tempdir or ""))
        out = tools.run_tests(ws, "tests/test_env.py::test_ok")
    assert out.startswith("exit code 0") and "1 passed" in out and "HOSTILE" not in out


# Each example runs pytest in a subprocess: a tenth of the profile's examples.
@settings(max_examples=scaled_examples(0.1), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    secrets=st.dictionaries(
        st.text(string.ascii_uppercase + "_", min_size=3, max_size=12).filter(lambda k: k not in TEST_ENV_ALLOWED),
        st.text(string.ascii_letters + string.digits, min_size=12, max_size=24),
        min_size=1,
        max_size=6,
    )
)
def test_a_test_process_sees_none_of_looplabs_secrets(bare_repo: Path, secrets: dict[str, str]) -> None:
    names = {"OPENAI_API_KEY": "sk-openai-secret-value", "ANTHROPIC_API_KEY": "sk-ant-secret-value", **secrets}
    with pytest.MonkeyPatch.context() as env, Workspace(bare_repo) as ws:
        for name, value in names.items():
            env.setenv(name, value)
        out = tools.run_tests(ws, "tests/test_env.py::test_env")
    assert out.startswith("exit code 1") and "PATH" in out  # the assertion printed the environment it had
    for value in names.values():
        assert value not in out


# --- the Guard never raises, and its records always serialize ------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(ANY_CHAR, max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(ANY_CHAR, max_size=8), inner, max_size=4),
    max_leaves=20,
)
RAW_ARGUMENTS = (
    JSON_VALUES
    | JSON_VALUES.map(json.dumps)
    | st.binary(max_size=64)
    | st.text(ANY_CHAR, max_size=64)
    | st.integers(1, 200_000).map(lambda n: "[" * n + "]" * n)
    | st.integers(1, 50_000).map(lambda n: '{"path": ' + "[" * n + "]" * n + "}")
    | st.dictionaries(st.sampled_from(["path", "query", "target", "content"]), st.text(ANY_CHAR, max_size=30))
)


@FAST
@given(
    name=st.sampled_from(["read_file", "search_code", "run_tests", "write_file"]) | st.text(ANY_CHAR, max_size=12),
    args=RAW_ARGUMENTS,
)
def test_the_guard_answers_any_input_with_a_record_that_serializes(
    workspace: Workspace, name: str, args: object
) -> None:
    guard = guard_with_deadline(workspace, 20)
    record = guard.call(name, args, call_id="\udcff")
    assert record.outcome in ("ok", "error", "refused", "rejected")
    assert json.loads(record.model_dump_json())["name"] == record.name
    record.result.encode("utf-8")


def test_a_lone_surrogate_in_a_path_is_an_observation(workspace: Workspace) -> None:
    record = Guard(workspace).call("read_file", '{"path": "notes\\udcff.txt"}')
    assert record.outcome == "error" and "\ufffd" in record.result
    assert json.loads(record.model_dump_json())["args"] == {"path": "notes\ufffd.txt"}


@pytest.mark.parametrize("args", ["[" * 10_000 + "]" * 10_000, b'{"path": "\xff\xfe"}', b"\xc3\x28"])
def test_deep_json_and_invalid_utf8_are_invalid_arguments(workspace: Workspace, args: str | bytes) -> None:
    record = Guard(workspace).call("read_file", args)
    assert record.outcome == "error" and record.result.startswith("InvalidArguments: read_file")


# --- repetition sees through spelling and parallelism ---------------------------------------------------

SPELLINGS = st.builds(
    lambda dots, slashes, spaces: (
        " " * spaces[0] + "./" * dots + "billing" + "/" * slashes + "money.py" + " " * spaces[1]
    ),
    st.integers(0, 3),
    st.integers(1, 3),
    st.tuples(st.integers(0, 2), st.integers(0, 2)),
)


@FAST
@given(spellings=st.lists(SPELLINGS, min_size=3, max_size=3))
def test_three_spellings_of_one_path_are_a_repetition(workspace: Workspace, spellings: list[str]) -> None:
    guard = Guard(workspace, max_repeats=3)
    outcomes = [guard.call("read_file", {"path": path}).outcome for path in spellings]
    assert outcomes == ["ok", "ok", "repetition"]


def test_identical_calls_in_parallel_count_as_repeats(workspace: Workspace) -> None:
    slow = with_faults(default_tools(), [Fault(tool="read_file", kind="slow", seconds=0.5)])
    guard = Guard(workspace, tools=slow, max_repeats=3)
    threads = [
        threading.Thread(target=guard.call, args=("read_file", {"path": "billing/money.py"}), daemon=True)
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert sorted(r.outcome for r in guard.records) == ["ok", "ok", "repetition"]
    assert guard.stop is not None and guard.stop.reason == "repetition"


# --- regular expressions of any shape ------------------------------------------------------------

REGEX_PIECES = st.sampled_from(["(", ")", "*", "+", "?", ".", r"\w", r"\s", "|", "a", "x", "$", "^", "{2,}", "[", "]"])


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.lists(REGEX_PIECES, min_size=1, max_size=14).map("".join))
def test_any_query_ends_within_the_deadline(workspace: Workspace, query: str) -> None:
    guard = guard_with_deadline(workspace, 1.0, max_repeats=10**6)
    started = time.monotonic()
    record = guard.call("search_code", {"query": query})
    assert time.monotonic() - started < 2.0
    assert record.outcome in ("ok", "error", "timeout")


# --- a run's record always serializes --------------------------------------------------------------


def _surrogate_path(conv: Conversation) -> Decision:
    if conv.assistant_turns == 0:  # the arguments as the model wrote them: JSON text with a lone surrogate escape
        return Decision((Call("read_file", '{"path": "notes\\udcff.txt"}'),))
    return Decision(answer="The file could not be read.")


@pytest.mark.parametrize("runner", by_tier(ALL_RUNNERS))
def test_a_lone_surrogate_from_the_model_still_leaves_a_complete_record(runner: str, tmp_path: Path) -> None:
    with ScriptedModelServer(_surrogate_path) as server:
        result = run_runner(runner, server, Limits(max_steps=4, max_seconds=30))
    # Some frameworks cannot send the surrogate back in the next request: that is an `error` stop, not a crash.
    assert result.stop_reason in (StopReason.FINAL_ANSWER, StopReason.ERROR), result.stop_detail
    result.case = "surrogate"
    outcome = harness.RunOutcome(runner, "surrogate", result=result)
    results_path, traces_path = harness.write_outputs(results.build([outcome]), tmp_path)
    assert json.loads(results_path.read_text())["results"][0]["runner"] == runner
    assert all(json.loads(line)["runner"] == runner for line in traces_path.read_text().splitlines())
