from __future__ import annotations

import dataclasses
import functools
import json
import threading
import time
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looplab.shared_tools import Guard, Workspace, default_tools, with_faults
from looplab.shared_tools.faults import Fault
from looplab.shared_tools.guard import Tool
from tests.tiers import scaled_examples

KINDS = typing.get_args(Fault.model_fields["kind"].annotation)


def test_every_default_tool_has_a_schema_and_a_description(guard: Guard) -> None:
    assert guard.names == ["run_tests", "read_file", "search_code"]
    for tool in guard.tools:
        assert tool.description and "Use it" in tool.description
        assert tool.parameters["type"] == "object" and tool.parameters["required"]
        assert "timeout_s" not in tool.parameters["properties"]


def test_a_successful_call_is_recorded_with_timing(guard: Guard) -> None:
    record = guard.call("search_code", {"query": "def apply_discount"}, call_id="c1")
    assert (record.outcome, record.is_error, record.call_id) == ("ok", False, "c1")
    assert record.result.startswith("billing/discount.py:15:")
    assert record.duration_s >= 0 and guard.records == [record]


def test_arguments_may_arrive_as_json_text(guard: Guard) -> None:
    record = guard.call("read_file", json.dumps({"path": "billing/money.py"}))
    assert record.outcome == "ok" and record.args == {"path": "billing/money.py"}


@pytest.mark.parametrize(
    ("name", "args", "outcome", "message"),
    [
        (
            "delete_repo",
            {},
            "refused",
            "UnknownTool: no tool named 'delete_repo'; available tools: run_tests, read_file, search_code",
        ),
        ("read_file", "{path: 1", "error", "not valid JSON"),
        ("read_file", {"path": 7}, "error", "path: Input should be a valid string"),
        ("read_file", {}, "error", "path: Field required"),
        ("read_file", {"path": "a", "mode": "w"}, "error", "mode: Extra inputs are not permitted"),
        ("read_file", {"path": "../../etc/passwd"}, "refused", "PathRefused"),
        ("read_file", {"path": "/etc/passwd"}, "refused", "absolute paths are refused"),
        ("read_file", {"path": ".env"}, "refused", "secret"),
        (
            "read_file",
            {"path": "tests/test_invoce.py"},
            "error",
            "FileNotFoundError: tests/test_invoce.py — did you mean tests/test_invoice.py?",
        ),
        ("write_file", {"path": "x.py", "content": ""}, "refused", "UnknownTool"),
    ],
)
def test_failures_become_error_observations(guard: Guard, name: str, args: object, outcome: str, message: str) -> None:
    record = guard.call(name, args)
    assert record.outcome == outcome and record.is_error
    assert message in record.result


def test_effects_are_denied_when_no_one_can_approve(workspace: Workspace) -> None:
    before = workspace.fingerprint()
    guard = Guard(workspace, tools=default_tools(allow_writes=True))
    record = guard.call("write_file", {"path": "tests/test_invoice.py", "content": "def test_ok(): pass\n"})
    assert record.outcome == "rejected" and "no approver is configured" in record.result
    assert guard.stop is not None and guard.stop.reason == "rejected"
    assert workspace.fingerprint() == before


def test_effects_run_when_the_approver_agrees(workspace: Workspace) -> None:
    seen = []
    guard = Guard(workspace, tools=default_tools(allow_writes=True), approver=lambda n, a: seen.append((n, a)) or True)
    record = guard.call("write_file", {"path": "notes.md", "content": "x"})
    assert record.outcome == "ok" and (workspace.root / "notes.md").read_text() == "x"
    assert seen == [("write_file", {"path": "notes.md", "content": "x"})]


def test_repeating_a_call_max_repeats_times_stops_the_run(workspace: Workspace) -> None:
    guard = Guard(workspace, max_repeats=3)
    outcomes = [guard.call("read_file", {"path": "README.md"}).outcome for _ in range(3)]
    assert outcomes == ["ok", "ok", "repetition"]
    assert guard.stop is not None and guard.stop.reason == "repetition"


def test_a_different_call_in_between_resets_the_count(workspace: Workspace) -> None:
    guard = Guard(workspace, max_repeats=3)
    for args in ({"path": "README.md"}, {"path": "README.md"}, {"path": "billing/money.py"}, {"path": "README.md"}):
        guard.call("read_file", args)
    assert guard.stop is None


def test_a_tool_crash_is_an_observation(workspace: Workspace) -> None:
    def crash(ws: Workspace, query: str) -> str:
        return str(1 / 0)

    crashing = [dataclasses.replace(t, fn=crash) if t.name == "search_code" else t for t in default_tools()]
    guard = Guard(workspace, tools=crashing)
    record = guard.call("search_code", {"query": "x"})
    assert record.outcome == "error" and record.result.startswith("ZeroDivisionError")


def test_the_run_deadline_bounds_run_tests_and_signals_timeout(tmp_path) -> None:
    repo = tmp_path / "slow"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_slow.py").write_text("import time\ndef test_slow():\n    time.sleep(30)\n")
    with Workspace(repo) as ws:
        guard = Guard(ws)
        guard.deadline = guard.clock() + 1.5
        started = time.monotonic()
        record = guard.call("run_tests", {"target": "tests/test_slow.py"})
        assert time.monotonic() - started < 3
    assert record.outcome == "timeout" and guard.stop is not None and guard.stop.reason == "timeout"


# Each example waits out a tool's deadline: a third of the profile's examples.
@settings(max_examples=scaled_examples(0.3), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(faults=st.dictionaries(st.sampled_from(["run_tests", "read_file", "search_code"]), st.sampled_from(KINDS)))
def test_only_a_tool_that_stops_itself_at_the_deadline_runs_on_the_calling_thread(
    workspace: Workspace, faults: dict[str, str]
) -> None:
    """The default tools take the deadline as `timeout_s` and stop there; a slow fault sleeps before its tool sees
    the deadline, so the Guard hands that tool to a worker thread it can stop waiting for."""
    threads: dict[str, int] = {}

    def watched(tool: Tool) -> Tool:
        @functools.wraps(tool.fn)
        def fn(*args: object, **kwargs: object) -> str:
            threads[tool.name] = threading.get_ident()
            return tool.fn(*args, **kwargs)

        return dataclasses.replace(tool, fn=fn)

    injected = [Fault(tool=name, kind=kind, seconds=0.01) for name, kind in faults.items()]
    guard = Guard(workspace, tools=[watched(t) for t in with_faults(default_tools(), injected)])
    guard.deadline = guard.clock() + 60
    guard.call("run_tests", {"target": "tests/test_invoice.py"})
    guard.call("read_file", {"path": "billing/money.py"})
    guard.call("search_code", {"query": "def apply_discount"})
    here = threading.get_ident()
    for name in ("run_tests", "read_file", "search_code"):
        stops_itself = faults.get(name) != "slow"
        assert (threads.get(name, here) == here) == stops_itself, (name, faults)


@given(kind=st.sampled_from(KINDS), text=st.text(max_size=20), seconds=st.floats(0, 1))
def test_a_faulted_copy_of_a_tool_shares_its_schema_which_still_says_what_the_signature_says(
    kind: str, text: str, seconds: float
) -> None:
    """The schema is built once per argument model, so a fault's copy (made for every run of its case) does not
    build it again; what the model is told stays what the signature says."""
    for tool in default_tools(allow_writes=True):
        faulted = with_faults([tool], [Fault(tool=tool.name, kind=kind, text=text, seconds=seconds)])[0]
        assert faulted.fn is not tool.fn and faulted.parameters is tool.parameters
        assert faulted.parameters == Tool.from_function(tool.fn).parameters


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    calls=st.lists(st.sampled_from(["read_file", "search_code", "write_file", "no_such_tool"]), max_size=8),
    open_for=st.integers(min_value=0, max_value=8),
)
def test_after_the_cutoff_no_call_runs_is_recorded_or_asks_for_approval(
    workspace: Workspace, calls: list[str], open_for: int
) -> None:
    asked: list[str] = []
    made = 0

    def cutoff() -> str | None:
        return "max_steps=2 model calls made" if made >= open_for else None

    guard = Guard(
        workspace,
        tools=default_tools(allow_writes=True),
        max_repeats=100,
        approver=lambda name, args: asked.append(name) is None,
        cutoff=cutoff,
    )
    args = {
        "read_file": {"path": "README.md"},
        "search_code": {"query": "x"},
        "write_file": {"path": "N.md", "content": ""},
    }
    replies = []
    for name in calls:
        replies.append(guard.call(name, args.get(name, {})))
        made += 1
    ran = calls[:open_for]
    assert [r.name for r in guard.records] == ran
    assert asked == [n for n in ran if n == "write_file"]
    assert all(r.outcome == "skipped" and r.is_error and "did not run" in r.result for r in replies[len(ran) :])
    if len(calls) > open_for:
        assert guard.stop is not None and guard.stop.reason == "max_steps"
        assert guard.stop.detail.startswith("max_steps=2 model calls made")
    else:
        assert guard.stop is None


# --- a stopped run runs no more tools ----------------------------------------------------------------------

#: Calls that end a run, each as (Guard options, the calls): an effect denied, a repetition, the deadline passed.
ENDINGS: dict[str, tuple[dict[str, object], list[tuple[str, dict[str, str]]]]] = {
    "rejected": ({}, [("write_file", {"path": "notes.md", "content": "x"})]),
    "repetition": ({}, [("read_file", {"path": "README.md"})] * 3),
    "timeout": ({"deadline": -1.0}, [("read_file", {"path": "README.md"})]),
}
#: Any call a client might make next: the tools with arguments good and bad, and names that are no tool.
LATER_CALLS = st.lists(
    st.tuples(
        st.one_of(st.sampled_from(["run_tests", "read_file", "search_code", "write_file"]), st.text(max_size=12)),
        st.one_of(
            st.fixed_dictionaries({"path": st.sampled_from(["README.md", "billing/discount.py", "../x"])}),
            st.fixed_dictionaries({"target": st.just("tests/test_invoice.py")}),
            st.fixed_dictionaries({"query": st.text(max_size=20)}),
            st.fixed_dictionaries({"path": st.just("notes.md"), "content": st.text(max_size=20)}),
            st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
            st.text(max_size=30),
            st.none(),
        ),
    ),
    min_size=1,
    max_size=6,
)


def spied(tools: list[Tool], ran: list[str]) -> list[Tool]:
    """The tools, each noting its name in `ran` when its function is called."""

    def spy(tool: Tool) -> Tool:
        @functools.wraps(tool.fn)
        def fn(*args: object, **kwargs: object) -> str:
            ran.append(tool.name)
            return tool.fn(*args, **kwargs)

        return dataclasses.replace(tool, fn=fn)

    return [spy(tool) for tool in tools]


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ending=st.sampled_from(sorted(ENDINGS)), later=LATER_CALLS)
def test_once_the_run_has_ended_no_call_runs_is_recorded_or_asks_for_approval(
    workspace: Workspace, ending: str, later: list[tuple[str, object]]
) -> None:
    options, ending_calls = ENDINGS[ending]
    ran: list[str] = []
    asked: list[str] = []
    guard = Guard(
        workspace,
        tools=spied(default_tools(allow_writes=True), ran),
        approver=lambda name, args: asked.append(name) is None and False,
        **options,  # type: ignore[arg-type]
    )
    for name, args in ending_calls:
        guard.call(name, args)
    assert guard.stop is not None and guard.stop.reason == ending
    stop, records, ran_before, asked_before = guard.stop, list(guard.records), list(ran), list(asked)

    replies = [guard.call(name, args, f"later-{i}") for i, (name, args) in enumerate(later)]
    assert [r.outcome for r in replies] == ["skipped"] * len(later)
    assert all(r.is_error and "did not run" in r.result and f"({ending}: " in r.result for r in replies)
    assert [r.call_id for r in replies] == [f"later-{i}" for i in range(len(later))]
    assert (ran, asked, guard.records, guard.stop) == (ran_before, asked_before, records, stop)
    assert all(json.loads(r.model_dump_json())["outcome"] == "skipped" for r in replies)  # every record serializes


def _nesting(value: object) -> int:
    """How many levels of arrays and objects `value` nests (0 for a scalar)."""
    if isinstance(value, dict):
        return 1 + max(map(_nesting, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_nesting, value), default=0)
    return 0


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(0, 300), as_text=st.booleans(), tool=st.sampled_from(["read_file", "nope"]))
def test_arguments_of_any_depth_are_recorded_within_the_depth_a_results_document_reads(
    guard: Guard, depth: int, as_text: bool, tool: str
) -> None:
    from looplab.records.validation import MAX_DEPTH

    nested: object = "x"
    for _ in range(depth):
        nested = [nested]
    args = {"path": nested}
    record = guard.call(tool, json.dumps(args) if as_text else args)
    assert record.is_error
    kept = record.args
    assert _nesting(kept) <= 32
    if depth < 31:  # shallow arguments keep their shape
        assert kept in (args, json.dumps(args))
    # A record sits 8 levels down in a results document (results[i].trace.steps[j].tool_calls[k]), which reads
    # nesting up to MAX_DEPTH: every record fits.
    assert 8 + _nesting(json.loads(record.model_dump_json())) <= MAX_DEPTH
