"""The scripted investigator on repositories it has never seen: it follows the failing assertion's value through any
kind of call, names the function and file where the evidence ends, and states a cause only where the code shows one.

Each repository under tests/fixtures/investigations holds one failing test and one bug, reached through a different
kind of call; `frost`'s bug is in a data file the investigator never reads.
"""

from __future__ import annotations

import ast
import keyword
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looplab.adapters.contract.limits import StopReason
from looplab.scenarios.scripted import diagnosis, policy, probes, reading
from looplab.scenarios.scripted.conversation import Conversation, ToolCall, ToolResult
from looplab.scenarios.scripted.policy import MAX_HOPS, TOOLS_IT_DRIVES, Investigator
from looplab.shared_tools import default_tools
from tests.paths import TESTS
from tests.runs import ALL_RUNNERS, run_runner
from tests.scenarios.test_policy import investigate
from tests.tiers import by_tier, scaled_examples

REPOS = TESTS / "fixtures" / "investigations"


@dataclass(frozen=True)
class Investigation:
    """A fixture repository, its failing test, and what the answer must say."""

    repo: str
    target: str
    function: str
    file: str
    expected: str
    actual: str
    cause: str | None  # words of the cause the code shows; None: it must say it could not establish one

    @property
    def task(self) -> str:
        return f"The test {self.target} fails in CI. Find out why and propose the fix."


INVESTIGATIONS = {
    # a boundary off by one (`>` for `>=`), reached through a module attribute (`scale.grade_for(...)`)
    "gradebook": Investigation(
        "gradebook",
        "tests/test_transcript.py::test_an_average_of_ninety_is_an_a",
        "grade_for",
        "gradebook/scale.py",
        "'A'",
        "'B'",
        None,
    ),
    # a wrong operator, reached through an attribute chain (`self.tariff.levy(...)`) on an instance
    "parcels": Investigation(
        "parcels",
        "tests/test_shipment.py::test_a_three_kilo_parcel_to_a_near_zone",
        "levy",
        "parcels/tariff.py",
        "10",
        "-2",
        None,
    ),
    # floor division, reached through a plain imported function
    "telemetry": Investigation(
        "telemetry",
        "tests/test_summary.py::test_missing_samples_are_left_out",
        "mean_of",
        "telemetry/average.py",
        "2.5",
        "2",
        "floor division",
    ),
    # a wrong dict key, reached through a classmethod (`Length.from_yards(...)`)
    "gauges": Investigation(
        "gauges",
        "tests/test_fence.py::test_a_square_fence_of_two_yard_sides",
        "from_yards",
        "gauges/length.py",
        "7312",
        "2440",
        None,
    ),
    # a fee subtracted twice, reached through a method on an instance held in a local (`policy.refund_for(...)`)
    "rentals": Investigation(
        "rentals",
        "tests/test_desk.py::test_a_cancellation_keeps_the_fee_once",
        "refund_for",
        "rentals/refunds.py",
        "85",
        "70",
        "subtracted twice",
    ),
    # the bug is a value in a data file: the evidence ends at the function that reads it, and no cause is stated
    "frost": Investigation(
        "frost",
        "tests/test_forecast.py::test_only_the_night_below_zero_freezes",
        "is_frost",
        "frost/alerts.py",
        "1",
        "2",
        None,
    ),
}


def check_answer(answer: str, case: Investigation) -> None:
    """The answer names where the evidence ends, the values, and a cause only where the code shows one."""
    assert f"`{case.function}` in {case.file}" in answer, answer
    assert f"expected {case.expected}, got {case.actual}" in answer, answer
    assert f"{case.file} " in answer.split("Read: ", 1)[1], answer  # the lines read include the function's
    if case.cause:
        assert "The cause is" in answer and case.cause in answer, answer
    else:
        assert "The cause is" not in answer and "could not establish" in answer, answer


@pytest.mark.parametrize("name", INVESTIGATIONS)
def test_the_answer_names_where_the_evidence_ends(name: str) -> None:
    case = INVESTIGATIONS[name]
    path, decision = investigate(REPOS / case.repo, task=case.task)
    assert decision.answer is not None, path
    check_answer(decision.answer, case)
    assert path[-1] == f"read_file({case.file})"  # the function named is the last one read


@pytest.mark.parametrize(("runner", "name"), by_tier((r, n) for r in ALL_RUNNERS for n in INVESTIGATIONS))
def test_every_runner_answers_with_the_right_function_and_file(model_server, runner: str, name: str) -> None:
    case = INVESTIGATIONS[name]
    result = run_runner(runner, model_server, repo=REPOS / case.repo, task=case.task)
    assert result.stop_reason == StopReason.FINAL_ANSWER, (result.stop_reason, result.error)
    assert case.function in result.answer and case.file in result.answer, result.answer


def test_the_expected_value_is_the_side_the_test_writes_out(tmp_path: Path) -> None:
    """`assert "A" == mark` expects 'A' though it is on the left, as pytest prints it."""
    repo = tmp_path / "gradebook"
    shutil.copytree(REPOS / "gradebook", repo)
    test = repo / "tests" / "test_transcript.py"
    test.write_text(test.read_text().replace('assert mark == "A"', 'assert "A" == mark'))
    case = INVESTIGATIONS["gradebook"]
    _, decision = investigate(repo, task=case.task)
    assert "expected 'A', got 'B' (`assert 'A' == 'B'`)" in decision.answer


def test_a_repo_where_nothing_leads_past_the_test_says_so(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_plain.py").write_text("def test_sum():\n    assert sum([1, 2]) == 4\n")
    _, decision = investigate(tmp_path, task="The test tests/test_plain.py::test_sum fails.")
    assert "expected 4, got 3" in decision.answer
    assert "ends at the test itself" in decision.answer and "could not establish" in decision.answer
    assert "The cause is" not in decision.answer


def test_a_definition_in_several_files_is_taken_from_where_the_import_points(tmp_path: Path) -> None:
    """Two modules define `levy`; the caller imports the tariff from the second, so that is the one read."""
    repo = tmp_path / "parcels"
    shutil.copytree(REPOS / "parcels", repo)
    decoy = repo / "parcels" / "customs.py"
    decoy.write_text("class Duty:\n    def levy(self, kilos: int) -> int:\n        return kilos\n")
    assert sorted(p.name for p in (repo / "parcels").glob("*.py"))[1] == "customs.py"  # found before tariff.py
    case = INVESTIGATIONS["parcels"]
    path, decision = investigate(repo, task=case.task)
    assert "read_file(parcels/customs.py)" not in path
    check_answer(decision.answer, case)


# --- tests that are not Python, or output that is not pytest's ------------------------------------------------

NODE_OUTPUT = """exit code 1
\u2716 cart total (1.1ms)
  AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:

  3 !== 4

\u2139 tests 1
\u2139 pass 0
\u2139 fail 1
"""


def answer_after_one_run(task: str, output: str) -> tuple[Conversation, str]:
    """The policy's first decision (one run_tests call), then its answer given `output` for it."""
    conv = Conversation(task=task, tools=sorted(TOOLS_IT_DRIVES - {"write_file"}))
    first = Investigator().decide(conv)
    assert first.answer is None and len(first.calls) == 1 and first.calls[0].name == "run_tests"
    call = first.calls[0]
    conv.results.append(ToolResult(ToolCall("c1", call.name, call.args), output, False))
    conv.assistant_turns = 1
    second = Investigator().decide(conv)
    assert second.calls == () and second.answer is not None
    return conv, second.answer


def test_a_test_in_another_language_is_run_once_and_its_failure_quoted() -> None:
    conv, answer = answer_after_one_run("The test test/cart.test.js fails. Find out why.", NODE_OUTPUT)
    assert conv.results[0].call.args == {"target": "test/cart.test.js"}
    assert "`AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:`" in answer
    assert "follows Python code and pytest output only" in answer and "could not establish" in answer


def test_a_python_test_whose_output_is_not_pytests_is_answered_without_reading() -> None:
    unittest_output = "exit code 1\nF\n=====\nFAIL: test_total (test_cart.CartTest)\nAssertionError: 3 != 4\n"
    _, answer = answer_after_one_run("The test tests/test_cart.py fails.", unittest_output)
    assert "`FAIL: test_total (test_cart.CartTest)`" in answer and "`AssertionError: 3 != 4`" in answer
    assert "follows Python code and pytest output only" in answer


def test_the_tools_it_drives_are_the_built_in_tools() -> None:
    assert {tool.name for tool in default_tools(allow_writes=True)} == TOOLS_IT_DRIVES


# --- repositories it has never seen -----------------------------------------------------------------------------

NAMES = st.from_regex(r"[a-z][a-z0-9]{2,8}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n) and not n.startswith("test") and n not in dir(__builtins__)
)
#: How a function reaches the next one: by its imported name, through its module, through a class, through an
#: instance, through an attribute chain on `self`.
KINDS = ["function", "module", "classmethod", "instance", "attribute"]


def generated_repo(root: Path, names: list[str], kinds: list[str]) -> tuple[str, str, str]:
    """A package whose test calls a chain of functions, each reaching the next by one of `kinds`, the last one
    wrong by one; the test's target, the last function's name and its file.

    The names are lowercase words without `_`: the classes (`Holder`, `Next`, `Owner`) and `pass_on` cannot
    clash with them.
    """
    package, *rest = names
    modules, functions = rest[: len(kinds) + 1], rest[len(kinds) + 1 :]
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (root / "tests").mkdir()
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    for level, (module, function) in enumerate(zip(modules, functions, strict=True)):
        reached_by = kinds[level - 1] if level else "function"
        parts, value = [], "x * 3 - 1"
        if level < len(kinds):
            there, callee = modules[level + 1], functions[level + 1]
            kind = kinds[level]
            if kind == "module":
                parts.append(f"from {package} import {there}\n")
            else:
                parts.append(f"from {package}.{there} import {'Holder as Next' if kind != 'function' else callee}\n")
            value = {
                "function": f"{callee}(x)",
                "module": f"{there}.{callee}(x)",
                "classmethod": f"Next.{callee}(x)",
                "instance": f"Next().{callee}(x)",
                "attribute": "Owner().pass_on(x)",
            }[kind]
            if kind == "attribute":
                parts.append(
                    "class Owner:\n    def __init__(self):\n        self.part = Next()\n\n"
                    f"    def pass_on(self, x):\n        return self.part.{callee}(x)\n"
                )
        if reached_by in ("function", "module"):
            parts.append(f"def {function}(x):\n    return {value}\n")
        elif reached_by == "classmethod":
            parts.append(f"class Holder:\n    @classmethod\n    def {function}(cls, x):\n        return {value}\n")
        else:
            parts.append(f"class Holder:\n    def {function}(self, x):\n        return {value}\n")
        (root / package / f"{module}.py").write_text("\n\n".join(parts))
    (root / "tests" / "test_chain.py").write_text(
        f"from {package}.{modules[0]} import {functions[0]}\n\n\ndef test_chain():\n"
        f"    assert {functions[0]}(4) == 12\n"
    )
    return "tests/test_chain.py::test_chain", functions[-1], f"{package}/{modules[-1]}.py"


@settings(
    deadline=None,
    max_examples=scaled_examples(0.5),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    # Each level is one function read, an attribute level two (the owner's method, then the callee): within MAX_HOPS.
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=3).filter(
        lambda kinds: len(kinds) + 1 + kinds.count("attribute") <= MAX_HOPS
    ),
    data=st.data(),
)
def test_a_generated_repo_is_followed_to_its_last_function(tmp_path_factory, kinds: list[str], data) -> None:
    count = 1 + 2 * (len(kinds) + 1)  # the package, a module and a function a level
    names = data.draw(st.lists(NAMES, min_size=count, max_size=count, unique=True))
    root = tmp_path_factory.mktemp("generated")
    target, leaf, file = generated_repo(root, names, kinds)
    _, decision = investigate(root, task=f"The test {target} fails.", max_turns=20)
    assert f"`{leaf}` in {file}" in decision.answer, (kinds, decision.answer)
    assert "expected 12, got 11" in decision.answer and "The cause is" not in decision.answer


# --- it knows no repository in advance --------------------------------------------------------------------------


def fixture_names() -> set[str]:
    """Every file, folder, function, class and module-level name the fixture repositories define."""
    names: set[str] = set()
    for path in REPOS.rglob("*"):
        if path.name in ("conftest.py", "__init__.py", "tests", "pyproject.toml"):
            continue
        names.add(path.stem)
        if path.suffix == ".py":
            tree = ast.parse(path.read_text())
            names.update(n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))
            names.update(
                t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
            )
    return {n for n in names if not n.startswith("__")}


def test_the_policy_names_nothing_from_the_fixture_repos() -> None:
    names = fixture_names()
    assert {"gradebook", "grade_for", "levy", "thresholds", "from_yards", "RefundPolicy"} <= names  # it read them
    for module in (policy, reading, diagnosis, probes):
        words = set(re.findall(r"[A-Za-z_]\w*", Path(module.__file__).read_text()))
        assert not names & words, f"{module.__name__} names {sorted(names & words)} from the fixture repos"
