"""The conformance checks every runner passes, as a pytest plugin a package shipping its own runner runs.

One `Limits`, one behaviour: each check runs a runner against a scripted policy on the built-in investigation and
reads what went over the wire (the recorder's counts), never the framework's own. The four that define a runner's
contract (`CONTRACT`): `max_steps=N` is N model calls on every wire API it speaks, an answer on call k with
`max_steps=k` is final, the tools the last allowed call asked for run nowhere, and a stopped run keeps its partial
trace. The rest pin the stops every runner shares (repetition, a rejected effect, a budget, a deadline, a model
that hangs) and parallel calls.

To run them against your runner (declared on its class, and named in the `looplab.runners` entry-point group):

    # conftest.py
    pytest_plugins = ["looplab.testing.conformance"]

    # test_conformance.py
    from looplab.testing.conformance import *  # noqa: F403

`pytest --looplab-runner NAME` picks runners (repeatable; also the `looplab_runners` ini option or the
LOOPLAB_RUNNERS variable, comma-separated); by default, the runners other packages ship, else looplab's own.
`--looplab-conformance contract` runs the four contract checks on each runner's first wire API only, with fewer
values of N and k (a quick tier).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from looplab.adapters import registry
from looplab.adapters.contract.cancel import Cancellation
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.pricing import Pricing
from looplab.adapters.contract.wire_apis import ENDPOINT_OF_API, WIRE_API
from looplab.scenarios.scripted.conversation import Conversation
from looplab.scenarios.scripted.policy import Call, Decision
from looplab.scenarios.scripted.probes import AnswersOnCall, NeverStops
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.shared_tools import default_tools, tree_fingerprint
from looplab.testing.runs import default_runners, investigation, run_runner, runners_from_environment

__all__ = [
    "CONTRACT",
    "test_a_cost_budget_ends_every_runner_as_budget",
    "test_a_model_call_that_hangs_ends_as_timeout",
    "test_a_run_cancelled_while_its_tests_run_ends_within_a_second_and_ends_them",
    "test_a_run_cancelled_while_the_model_answers_ends_within_a_second",
    "test_an_answer_on_call_k_with_max_steps_k_is_final",
    "test_an_api_a_runner_cannot_speak_is_refused_in_one_line",
    "test_an_unapproved_effect_ends_the_run_as_rejected",
    "test_every_declared_wire_api_investigates",
    "test_max_seconds_ends_every_runner_as_timeout",
    "test_max_steps_n_means_n_model_calls",
    "test_parallel_tool_calls_stay_in_one_step",
    "test_repetition_stops_every_runner_the_same_way",
    "test_the_investigation_answers_with_the_seed_trajectory",
    "test_the_last_allowed_calls_tools_do_not_run_nor_ask_for_approval",
]

#: The checks that define a runner's contract with looplab (run on every wire API).
CONTRACT = (
    "test_max_steps_n_means_n_model_calls",
    "test_an_answer_on_call_k_with_max_steps_k_is_final",
    "test_the_last_allowed_calls_tools_do_not_run_nor_ask_for_approval",
    "test_every_declared_wire_api_investigates",
)
#: The tool calls of the investigation as looplab's scripted investigator makes them, from what the tools return.
SEED_TRAJECTORY = [
    "run_tests(tests/test_invoice.py::test_invoice_total)",
    "read_file(tests/test_invoice.py)",
    "search_code(def apply_discount)",
    "read_file(billing/discount.py)",
]
#: What a runner in its own process may take to start its program, on top of a deadline test's limit.
PROGRAM_START_S = 6.0
#: The values each contract check runs with: every one in `all`, a few in `contract` (a quick tier).
STEPS = {"all": (1, 2, 3, 5), "contract": (1, 3)}
ANSWER_ON = {"all": (1, 2, 4), "contract": (2,)}
LAST_CALL = {"all": (1, 2), "contract": (2,)}


# --- the plugin ----------------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("looplab conformance")
    group.addoption(
        "--looplab-runner",
        action="append",
        default=[],
        metavar="NAME",
        help="a runner to check (repeatable); default: the runners other packages ship, else looplab's own",
    )
    group.addoption(
        "--looplab-conformance",
        choices=("all", "contract"),
        default=None,
        help="all: every check on every wire API (the default); contract: the four contract checks on each "
        "runner's first wire API",
    )
    parser.addini("looplab_runners", "runners to check (as --looplab-runner)", type="linelist", default=[])


def _runners(config: pytest.Config) -> list[str]:
    named = config.getoption("--looplab-runner") or config.getini("looplab_runners") or runners_from_environment()
    if named:
        unknown = [r for r in named if r not in registry.RUNNERS]
        if unknown:
            raise pytest.UsageError(f"unknown runner {unknown[0]!r}; known runners: {', '.join(registry.RUNNERS)}")
        return list(named)
    shipped = [name for name, info in registry.RUNNERS.items() if not info.module.startswith("looplab.")]
    return shipped or default_runners()


def _level(config: pytest.Config) -> str:
    return config.getoption("--looplab-conformance") or "all"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`conformance_runner`: each runner under check; `conformance_cell`: each (runner, wire API) it speaks;
    `conformance_unspoken`: each (runner, wire API) it does not."""
    names = metafunc.fixturenames
    if not {"conformance_runner", "conformance_cell", "conformance_unspoken"} & set(names):
        return
    level = _level(metafunc.config)
    for fixture, values in (("max_steps_n", STEPS), ("answer_on_k", ANSWER_ON), ("last_call_n", LAST_CALL)):
        if fixture in names:
            metafunc.parametrize(fixture, values[level])
    runners = _runners(metafunc.config)
    if "conformance_runner" in names:
        metafunc.parametrize("conformance_runner", runners)
    apis = {r: registry.RUNNERS[r].apis for r in runners}  # declared: read without importing a framework
    if "conformance_cell" in names:
        first = level == "contract"
        cells = [(r, a) for r in runners for a in (apis[r][:1] if first else apis[r])]
        metafunc.parametrize("conformance_cell", cells, ids=[f"{r}-{a}" for r, a in cells])
    if "conformance_unspoken" in names:
        cells = [(r, a) for r in runners for a in WIRE_API if a not in apis[r]]
        metafunc.parametrize("conformance_unspoken", cells, ids=[f"{r}-{a}" for r, a in cells])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--looplab-conformance contract`: leaves out the checks beyond the contract (pytest counts them deselected)."""
    if _level(config) != "contract":
        return
    ours = {f"{__name__}.{name}" for name in __all__ if name.startswith("test_")}
    beyond = [
        item
        for item in items
        if isinstance(item, pytest.Function)
        and f"{item.function.__module__}.{item.function.__name__}" in ours
        and item.function.__name__ not in CONTRACT
    ]
    if beyond:
        config.hook.pytest_deselected(items=beyond)
        items[:] = [item for item in items if item not in beyond]


@pytest.fixture(scope="session")
def scripted_model() -> Iterator[ScriptedModelServer]:
    """The scripted investigator, served for the whole session."""
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture(scope="session")
def never_stops() -> Iterator[ScriptedModelServer]:
    """A model that asks for another tool call on every call."""
    with ScriptedModelServer(NeverStops()) as server:
        yield server


@pytest.fixture(scope="session")
def slow_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repo whose one test sleeps for 30 s."""
    repo = tmp_path_factory.mktemp("slow") / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_slow.py").write_text("import time\n\ndef test_slow():\n    time.sleep(30)\n")
    return repo


def _hang(conv: Conversation) -> Decision:
    time.sleep(4)  # a model that does not answer within the run's 1.5 s
    return Decision(answer="too late")


@pytest.fixture(scope="session")
def hanging_model() -> Iterator[ScriptedModelServer]:
    """A model that answers 4 s late."""
    with ScriptedModelServer(_hang) as server:
        yield server


# --- the contract --------------------------------------------------------------------------------------------


def test_max_steps_n_means_n_model_calls(conformance_cell: tuple[str, str], max_steps_n: int, never_stops) -> None:
    (runner, api), n = conformance_cell, max_steps_n
    result = run_runner(runner, never_stops, Limits(max_steps=n), api=api)
    assert (result.stop_reason, result.answer) == (StopReason.MAX_STEPS, None), result.stop_detail
    assert result.totals.model_calls == n
    # the partial trace: every call, each with what it asked for and every tool that ran
    assert len(result.trace.steps) == n
    # every call asked for a tool; each ran but the last call's, which no model call was left to read
    assert [len(s.tool_calls) for s in result.trace.steps] == [1] * (n - 1) + [0]
    assert result.trace.steps[-1].model_call.tool_calls_requested == ["search_code"]


def test_an_answer_on_call_k_with_max_steps_k_is_final(conformance_cell: tuple[str, str], answer_on_k: int) -> None:
    (runner, api), k = conformance_cell, answer_on_k
    with ScriptedModelServer(AnswersOnCall(k)) as server:
        result = run_runner(runner, server, Limits(max_steps=k), api=api)
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert result.answer == f"answered on model call {k}" and result.totals.model_calls == k


def _always_write(conv: Conversation) -> Decision:
    return Decision((Call("write_file", {"path": "NOTES.md", "content": f"turn {conv.assistant_turns + 1}"}),))


def test_the_last_allowed_calls_tools_do_not_run_nor_ask_for_approval(
    conformance_cell: tuple[str, str], last_call_n: int
) -> None:
    (runner, api), n = conformance_cell, last_call_n
    asked: list[str] = []
    approve = lambda name, args: asked.append(args["content"]) or True  # noqa: E731
    with ScriptedModelServer(_always_write) as server:
        result = run_runner(
            runner, server, Limits(max_steps=n), api=api, tools=default_tools(allow_writes=True), approver=approve
        )
    assert (result.stop_reason, result.answer) == (StopReason.MAX_STEPS, None), result.stop_detail
    assert result.totals.model_calls == n
    assert asked == [f"turn {t}" for t in range(1, n)]  # every call's write was approved and ran but the last's
    assert [c.outcome for c in result.trace.tool_calls] == ["ok"] * (n - 1)
    assert result.stop_detail and f"max_steps={n}" in result.stop_detail


def test_every_declared_wire_api_investigates(conformance_cell: tuple[str, str], scripted_model) -> None:
    runner, api = conformance_cell
    result = run_runner(runner, scripted_model, api=api)
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert result.trace.trajectory() == SEED_TRAJECTORY
    assert {s.model_call.endpoint for s in result.trace.steps} == {ENDPOINT_OF_API[api]}


# --- the stops every runner shares ----------------------------------------------------------------------------


def test_the_investigation_answers_with_the_seed_trajectory(conformance_runner: str, scripted_model) -> None:
    repo = investigation().repo_path
    before = tree_fingerprint(repo)
    result = run_runner(conformance_runner, scripted_model)
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert result.trace.trajectory() == SEED_TRAJECTORY
    assert "apply_discount" in result.answer and "billing/discount.py" in result.answer
    assert result.totals.model_calls == 5 and len(result.trace.steps) == 5
    assert result.native_cap.knob and result.native_cap.value is not None
    assert tree_fingerprint(repo) == before


def _same_read(conv: Conversation) -> Decision:
    return Decision((Call("read_file", {"path": "README.md"}),))


def test_repetition_stops_every_runner_the_same_way(conformance_runner: str) -> None:
    with ScriptedModelServer(_same_read) as server:
        result = run_runner(conformance_runner, server, Limits(max_repeats=3))
    assert (result.stop_reason, result.answer) == (StopReason.REPETITION, None), result.stop_detail
    assert [c.outcome for c in result.trace.tool_calls] == ["ok", "ok", "repetition"]
    assert result.totals.model_calls == 3
    assert result.stop_detail == "read_file was called with the same arguments 3 times in a row"


def _overwrite_tests(conv: Conversation) -> Decision:
    if conv.results:
        return Decision(answer="done")
    return Decision((Call("write_file", {"path": "tests/test_invoice.py", "content": "def test_ok():\n    pass\n"}),))


def test_an_unapproved_effect_ends_the_run_as_rejected(conformance_runner: str) -> None:
    with ScriptedModelServer(_overwrite_tests) as server:
        result = run_runner(conformance_runner, server, tools=default_tools(allow_writes=True))
    assert (result.stop_reason, result.answer) == (StopReason.REJECTED, None), result.stop_detail
    assert [c.outcome for c in result.trace.tool_calls] == ["rejected"]
    assert result.totals.model_calls == 1
    assert result.stop_detail == "write_file was not approved: no approver is configured, so effects are denied"


def _two_reads(conv: Conversation) -> Decision:
    if conv.results:
        return Decision(answer="read " + " and ".join(sorted(r.call.args["path"] for r in conv.results)))
    return Decision(
        (Call("read_file", {"path": "tests/test_invoice.py"}), Call("read_file", {"path": "billing/discount.py"}))
    )


def test_parallel_tool_calls_stay_in_one_step(conformance_runner: str) -> None:
    with ScriptedModelServer(_two_reads) as server:
        result = run_runner(conformance_runner, server)
    assert result.stop_reason == StopReason.FINAL_ANSWER, result.stop_detail
    assert result.answer == "read billing/discount.py and tests/test_invoice.py"
    reads = ["billing/discount.py", "tests/test_invoice.py"]
    if registry.RUNNERS[conformance_runner].one_tool_a_reply:
        # A text protocol (DSPy's fields) names one tool a reply: the model's two reads come one a step.
        assert [len(s.tool_calls) for s in result.trace.steps] == [1, 1, 0]
        assert sorted(c.args["path"] for s in result.trace.steps for c in s.tool_calls) == reads
        return
    assert sorted(c.args["path"] for c in result.trace.steps[0].tool_calls) == reads
    assert [len(s.tool_calls) for s in result.trace.steps] == [2, 0]


def test_a_cost_budget_ends_every_runner_as_budget(conformance_runner: str, scripted_model) -> None:
    pricing = Pricing(input_per_mtok=1000.0, output_per_mtok=1000.0)
    # Room for every runner's first call: smolagents' own prompt template makes its first request about 6.5 KB
    # (1.64 at this price), DSPy's about 4 KB, most others' about 1.7 KB (0.44).
    result = run_runner(conformance_runner, scripted_model, Limits(max_cost_usd=2.0), pricing=pricing)
    assert (result.stop_reason, result.answer) == (StopReason.BUDGET, None), result.stop_detail
    assert 0 < result.totals.model_calls < 5
    assert result.totals.cost_usd <= 2.0  # stopped before the call that would have gone over


def _run_slow(conv: Conversation) -> Decision:
    return (
        Decision((Call("run_tests", {"target": "tests/test_slow.py"}),)) if not conv.results else Decision(answer="x")
    )


def test_max_seconds_ends_every_runner_as_timeout(conformance_runner: str, slow_repo: Path) -> None:
    # A runner in its own process starts a program (node, a bundled CLI) on the run's clock: on a busy machine
    # that takes seconds before the first model call, so its deadline leaves room for the start.
    info = registry.RUNNERS.get(conformance_runner.partition("@")[0])
    max_seconds = 2.0 + (PROGRAM_START_S if info is not None and info.out_of_process else 0.0)
    with ScriptedModelServer(_run_slow) as server:
        task = "Why does tests/test_slow.py hang?"
        result = run_runner(conformance_runner, server, Limits(max_seconds=max_seconds), repo=slow_repo, task=task)
    assert (result.stop_reason, result.answer) == (StopReason.TIMEOUT, None), result.stop_detail
    assert result.totals.wall_s < max_seconds + 1.5
    assert [c.outcome for c in result.trace.tool_calls] == ["timeout"]


def test_an_api_a_runner_cannot_speak_is_refused_in_one_line(
    conformance_unspoken: tuple[str, str], scripted_model
) -> None:
    runner, api = conformance_unspoken
    with pytest.raises(LooplabError) as info:
        run_runner(runner, scripted_model, api=api)
    assert "\n" not in str(info.value) and f"cannot use the {api} API" in str(info.value)


def test_a_model_call_that_hangs_ends_as_timeout(conformance_runner: str, hanging_model) -> None:
    result = run_runner(conformance_runner, hanging_model, Limits(max_seconds=1.5))
    assert (result.stop_reason, result.answer) == (StopReason.TIMEOUT, None), result.stop_detail
    assert result.totals.wall_s < 3 and result.totals.model_calls == 0


#: How soon after its cancel a run has ended: every wait of a run looks at its cancel switch each `WAIT_SLICE_S`.
CANCELLED_WITHIN_S = 1.0


def _cancel_when(ready: Callable[[], bool]) -> tuple[Cancellation, list[float]]:
    """A cancel switch thrown (from another thread) once `ready()`, and the list that gets the moment it was."""
    cancel, when = Cancellation(), []

    def watch() -> None:
        give_up = time.monotonic() + 60
        while not ready() and time.monotonic() < give_up:
            time.sleep(0.02)
        when.append(time.monotonic())
        cancel.cancel()

    threading.Thread(target=watch, name="looplab-cancel-when", daemon=True).start()
    return cancel, when


def _alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie, ended but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the process itself
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def test_a_run_cancelled_while_its_tests_run_ends_within_a_second_and_ends_them(
    conformance_runner: str, tmp_path: Path
) -> None:
    repo, started = tmp_path / "repo", tmp_path / "started"
    (repo / "tests").mkdir(parents=True)
    mark = f"pathlib.Path({str(started)!r}).write_text(str(os.getpid()))"  # the test says it started, and its pid
    test = f"import os, pathlib, time\n\ndef test_slow():\n    {mark}\n    time.sleep(30)\n"
    (repo / "tests" / "test_slow.py").write_text(test)
    cancel, when = _cancel_when(lambda: started.exists() and started.read_text() != "")
    with ScriptedModelServer(_run_slow) as server:
        task = "Why does tests/test_slow.py hang?"
        result = run_runner(conformance_runner, server, Limits(max_seconds=60), repo=repo, task=task, cancel=cancel)
        ended = time.monotonic()
    assert (result.stop_reason, result.answer) == (StopReason.CANCELLED, None), result.stop_detail
    assert ended - when[0] < CANCELLED_WITHIN_S
    assert result.totals.model_calls == 1 and [c.outcome for c in result.trace.tool_calls] == ["cancelled"]
    assert not _alive(int(started.read_text()))  # the test process ended with the run


def test_a_run_cancelled_while_the_model_answers_ends_within_a_second(conformance_runner: str) -> None:
    asked = threading.Event()

    def answers_late(conv: Conversation) -> Decision:
        asked.set()
        time.sleep(4)
        return Decision(answer="too late")

    cancel, when = _cancel_when(asked.is_set)
    with ScriptedModelServer(answers_late) as server:
        result = run_runner(conformance_runner, server, Limits(max_seconds=60), cancel=cancel)
        ended = time.monotonic()  # not the server's stop, which waits on the late reply
    assert (result.stop_reason, result.answer) == (StopReason.CANCELLED, None), result.stop_detail
    assert ended - when[0] < CANCELLED_WITHIN_S
    assert result.totals.model_calls == 0 and result.totals.failed_model_calls >= 1  # the cut exchange, recorded
