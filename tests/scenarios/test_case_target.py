"""A team's case investigates its target: the target is checked when the case is read, stated in the task the
runners send, and investigated whatever the task's wording; what the investigator concludes stays within what the
code read shows."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looplab import cli
from looplab.adapters import registry
from looplab.adapters.contract.errors import LooplabError
from looplab.cli.suite import write_suite
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.scenarios import strict
from looplab.scenarios.cases import BUILTIN_SUITE, load_case, load_cases
from looplab.scenarios.scripted.conversation import Conversation
from looplab.scenarios.scripted.diagnosis import explain
from looplab.scenarios.scripted.policy import Investigator
from looplab.scenarios.scripted.reading import Site, function_sites
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.scenarios.target import TARGET_LINE, stated_task, target_problem
from looplab.shared_tools import BUILTIN_TOOLS
from tests.paths import TESTS
from tests.runs import ALL_RUNNERS
from tests.team_suite import TARGET_CASES, TILL_TARGET, write_target_suite
from tests.tiers import by_tier

#: The runners the target suite is run through here: the hand-rolled loop and a framework's.
RUNNERS = ["handrolled", "langgraph"]

names = st.from_regex(r"test_[a-z][a-z0-9_]{0,10}", fullmatch=True)
paths = st.from_regex(r"[a-z][a-z0-9_]{0,6}(/[a-z][a-z0-9_]{0,6}){0,2}/test_[a-z0-9_]{1,8}\.py", fullmatch=True)
#: Words a task is made of: plain prose, punctuation and other tests' ids.
prose = st.lists(
    st.sampled_from(["Find", "out", "why.", "The", "total", "is", "wrong,", "e.g.", "off", "by", "one.", "fix", "it"]),
    max_size=12,
).map(" ".join)


@pytest.fixture(scope="module")
def where() -> Iterator[Endpoint]:
    with ScriptedModelServer() as server:
        yield Endpoint(ModelChoice(), {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url})


def _first_call(task: str) -> tuple[str, dict]:
    """What the scripted investigator asks first for a conversation holding only `task`."""
    decision = Investigator().decide(Conversation(task=task, tools=["run_tests", "read_file", "search_code"]))
    assert decision.calls, decision.answer
    call = decision.calls[0]
    return call.name, call.args  # type: ignore[return-value]


# --- the task runners send states the target ---------------------------------------------------------------------


def test_the_default_cases_send_their_task_byte_for_byte() -> None:
    cases = load_cases([BUILTIN_SUITE])
    assert cases and all(case.stated_task == case.task for case in cases.values())


@given(target_path=paths, target_name=names, before=prose, after=prose)
def test_a_task_naming_its_target_and_no_other_test_is_sent_unchanged(
    target_path: str, target_name: str, before: str, after: str
) -> None:
    target = f"{target_path}::{target_name}"
    task = f"{before} The test {target} fails. {after}"
    assert stated_task(task, target) == task


@given(target_path=paths, target_name=names, task=prose)
def test_a_task_naming_no_test_gets_the_target_stated_and_the_investigator_runs_it(
    target_path: str, target_name: str, task: str
) -> None:
    target = f"{target_path}::{target_name}"
    sent = stated_task(task, target)
    assert sent.startswith(task.rstrip()) and sent.endswith(TARGET_LINE.format(target=target))
    assert _first_call(sent) == ("run_tests", {"target": target})


@given(target_path=paths, target_name=names, other_path=paths, other_name=names, before=prose)
def test_where_the_task_names_another_test_the_target_wins_and_the_text_says_so(
    target_path: str, target_name: str, other_path: str, other_name: str, before: str
) -> None:
    target, other = f"{target_path}::{target_name}", f"{other_path}::{other_name}"
    if target.startswith(other):
        return  # the same test
    sent = stated_task(f"{before} The test {other} fails.", target)
    assert f"the task also names {other}; investigate {target}" in sent
    assert _first_call(sent) == ("run_tests", {"target": target})


# --- the target is checked when the case is read -----------------------------------------------------------------


def _suite_with(tmp_path: Path, target: str, test_file: str, tools: list[str] | None = None) -> Path:
    """A suite of one case on `target`, whose repo's tests/test_a.py is `test_file`; the case file's path."""
    suite = tmp_path / "suite"
    (suite / "repo" / "tests").mkdir(parents=True)
    (suite / "repo" / "tests" / "test_a.py").write_text(test_file, encoding="utf-8")
    (suite / "cases").mkdir()
    case = suite / "cases" / "own.toml"
    listed = f"tools = {json.dumps(tools)}\n" if tools is not None else ""
    case.write_text(f'id = "own"\nrepo = "../repo"\ntarget = "{target}"\ntask = "Find out why."\n{listed}')
    return case


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(defined=st.lists(names, min_size=1, max_size=5, unique=True), asked=names)
def test_a_target_test_the_file_does_not_define_is_one_line_naming_the_file_and_key(
    defined: list[str], asked: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    source = "".join(f"def {name}():\n    assert 1 == 2\n\n\n" for name in defined)
    case = _suite_with(tmp_path_factory.mktemp("t"), f"tests/test_a.py::{asked}", source)
    if asked in defined:
        assert load_case(case).target == f"tests/test_a.py::{asked}"
        return
    with pytest.raises(LooplabError) as info:
        load_cases([case])
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{case}: target: tests/test_a.py defines no test {asked!r}")
    assert message.endswith(strict.nearest(asked, sorted(defined)) or "'")


def test_a_target_naming_a_missing_file_is_refused_with_the_near_file(tmp_path: Path) -> None:
    case = _suite_with(tmp_path, "tests/test_b.py::test_gone", "def test_x():\n    pass\n")
    with pytest.raises(LooplabError) as info:
        load_case(case)
    repo = (case.parent / "../repo").resolve()
    assert str(info.value) == f"{case}: target: no file tests/test_b.py in {repo}; did you mean tests/test_a.py?"


def test_a_target_that_moved_loads_for_the_model_to_find_by_searching() -> None:
    # looplab's wrong-path case names the test's old path on purpose: the test is defined under another one.
    assert load_cases([BUILTIN_SUITE])["wrong-path"].target.startswith("qa/")
    problem = target_problem("qa/gone.py::test_nowhere_at_all", BUILTIN_SUITE / "repo")
    assert problem is not None and problem.startswith("no file qa/gone.py")


def test_a_case_offering_no_run_tests_is_not_held_to_its_target(tmp_path: Path) -> None:
    case = _suite_with(tmp_path, "t.py", "", tools=["read_file"])
    assert load_case(case).target == "t.py"
    case.write_text(case.read_text().replace('tools = ["read_file"]', 'tools = ["read_file", "run_tests"]'))
    with pytest.raises(LooplabError, match="target: no file t.py"):
        load_case(case)


def test_new_suite_refuses_a_target_test_the_file_does_not_define(tmp_path: Path) -> None:
    repo = _suite_with(tmp_path, "tests/test_a.py::test_x", "def test_x():\n    pass\n").parent.parent / "repo"
    with pytest.raises(LooplabError, match="defines no test 'test_y'; did you mean test_x"):
        write_suite(tmp_path / "new", repo, "tests/test_a.py::test_y")


def test_an_unknown_tool_lists_the_built_in_tools_too(tmp_path: Path) -> None:
    case = _suite_with(tmp_path, "tests/test_a.py", "", tools=["grep"])
    with pytest.raises(LooplabError) as info:
        load_case(case)
    assert "no tool named 'grep'" in str(info.value) and all(t in str(info.value) for t in BUILTIN_TOOLS)


# --- runs investigate the target -------------------------------------------------------------------------------


@pytest.mark.parametrize("runner", by_tier(dict.fromkeys([*RUNNERS, *ALL_RUNNERS])))
def test_a_case_is_investigated_on_its_target_whatever_its_task_names(runner: str, tmp_path: Path) -> None:
    if not registry.RUNNERS[runner].installed():
        pytest.skip(f"{runner} is not installed here")
    suite = write_target_suite(tmp_path)
    out = tmp_path / "out"
    assert cli.main(["run", "--cases", str(suite), "--runner", runner, "--out", str(out), "--quiet"]) == 0
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert sorted(cell["case"] for cell in doc["cells"] if cell["passed"]) == sorted(TARGET_CASES)
    for result in doc["results"]:
        first = result["trace"]["steps"][0]["tool_calls"][0]
        assert (first["name"], first["args"]) == ("run_tests", {"target": TILL_TARGET})
        assert result["answer"].startswith(f"{TILL_TARGET} fails")


@pytest.mark.parametrize(
    "gone", ["tests/test_change.py::test_change_for_a_fifty", "tests/test_gone.py::test_nowhere"], ids=["test", "file"]
)
def test_a_target_test_that_does_not_exist_ends_in_one_line_saying_so(
    gone: str, tmp_path: Path, where: Endpoint
) -> None:
    suite = write_target_suite(tmp_path)
    path = suite / "cases" / "till-unnamed.toml"
    path.write_text(path.read_text().replace(TILL_TARGET, gone))
    case = load_case(path, check_target=False)  # the test is gone by the time the run starts
    outcome = run_one("handrolled", case, where)
    answer = outcome.result.answer or ""
    assert outcome.result.stop_reason == "final_answer" and "\n" not in answer
    assert "test not found" in answer and not outcome.passed


def test_a_run_that_investigated_nothing_does_not_pass(tmp_path: Path, where: Endpoint) -> None:
    case_file = _suite_with(tmp_path, "NOTES", "", tools=["read_file"])  # no test to run: the model answers at once
    outcome = run_one("handrolled", load_case(case_file), where)
    assert outcome.result.stop_reason == "final_answer" and not outcome.result.trace.tool_calls
    assert [c.name for c in outcome.checks if not c.passed] == ["investigated before answering"]


# --- what the investigator concludes ---------------------------------------------------------------------------

factors = st.sampled_from(["1 - {r}", "1 + {r}", "{r}"])
rates = st.sampled_from(["RATE", "FUEL_SURCHARGE", "0.1", "extra", "cfg.rate"])


@given(first=factors, second=factors, rate_a=rates, rate_b=rates)
def test_a_fix_is_proposed_only_where_the_code_shows_what_the_combined_rate_is(
    first: str, second: str, rate_a: str, rate_b: str
) -> None:
    one, two = first.format(r=rate_a), second.format(r=rate_b)
    source = f"def price(base, cfg, extra):\n    cost = base * ({one})\n    cost = cost * ({two})\n    return cost\n"
    finding = explain(source, "price", "p.py")
    assert finding is not None
    same_form = first == second and first != "{r}"
    if one == two:  # the same factor twice: the cause, and no rate made up from it
        assert "applied twice" in finding.cause and "combined" not in finding.cause
    elif same_form:
        sign = first[2]
        assert finding.cause.endswith(f"`* (1 {sign} ({rate_a} + {rate_b}))`.")
    else:
        assert "combined" not in finding.cause and "Apply" not in finding.cause


SHELF = """
    from shelf import supply


    class Inventory:
        def __init__(self) -> None:
            self.levels: dict[str, int] = {}

        def restock(self, sku: str, cases: int) -> None:
            self.levels.setdefault(sku, 0)
            self.levels[sku] += supply.units_in(cases)

        def count(self, sku: str) -> int:
            return self.levels[sku]
"""


@pytest.mark.parametrize(
    "write", ["self.levels[sku] += {v}", "self.levels[sku] = {v}", "self.levels.update({{sku: {v}}})"]
)
def test_a_value_read_from_object_state_is_followed_to_the_methods_that_write_it(write: str) -> None:
    written = write.format(v="supply.units_in(cases)")
    source = textwrap.dedent(SHELF).replace("self.levels[sku] += supply.units_in(cases)", written)
    assert Site("restock", ("self",)) in function_sites(source, "count")
    assert Site("units_in", ("supply",)) in function_sites(source, "restock")


def test_a_run_follows_object_state_to_the_module_function_that_fills_it(tmp_path: Path, where: Endpoint) -> None:
    suite = tmp_path / "suite"
    files = {
        "repo/shelf/__init__.py": "",
        "repo/shelf/inventory.py": SHELF,
        "repo/shelf/supply.py": """
            CASE_SIZE = 12


            def units_in(cases: int) -> int:
                units = cases * CASE_SIZE
                return units * 2
        """,
        "repo/tests/test_inventory.py": """
            from shelf.inventory import Inventory


            def test_restock_adds_the_units():
                inventory = Inventory()
                inventory.restock("a", 2)
                assert inventory.count("a") == 24
        """,
        "cases/inventory.toml": """
            id = "inventory"
            repo = "../repo"
            target = "tests/test_inventory.py::test_restock_adds_the_units"
            task = "Restocking counts the wrong number of units."
        """,
    }
    for name, text in files.items():
        (suite / name).parent.mkdir(parents=True, exist_ok=True)
        (suite / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    outcome = run_one("handrolled", load_case(suite / "cases" / "inventory.toml"), where)
    answer = outcome.result.answer or ""
    assert "-> `restock` (shelf/inventory.py) -> `units_in` (shelf/supply.py)" in answer, answer


# --- a suite with a case the scripted model cannot play ----------------------------------------------------------


def test_a_case_offering_its_own_tool_is_skipped_in_one_line_and_the_others_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = write_target_suite(tmp_path)
    (suite / "tools.py").write_text('def deploy(version: str) -> str:\n    """Deploy `version`."""\n    return "ok"\n')
    own = suite / "cases" / "till-unnamed.toml"
    own.write_text(own.read_text().replace('task = "', 'tools = ["run_tests", "read_file", "deploy"]\ntask = "', 1))
    out = tmp_path / "out"
    assert cli.main(["run", "--cases", str(suite), "--runner", "handrolled", "--out", str(out), "--quiet"]) == 0
    skipped = [line for line in capsys.readouterr().err.splitlines() if "skipped" in line]
    assert len(skipped) == 1 and "'till-unnamed'" in skipped[0] and "deploy" in skipped[0]
    assert "--model PROVIDER:NAME" in skipped[0]
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert [cell["case"] for cell in doc["cells"]] == ["till-other"]


def test_a_suite_whose_every_case_needs_a_real_model_is_refused(tmp_path: Path) -> None:
    suite = write_target_suite(tmp_path)
    (suite / "tools.py").write_text('def deploy(version: str) -> str:\n    """Deploy `version`."""\n    return "ok"\n')
    for case in (suite / "cases").glob("*.toml"):
        case.write_text(case.read_text().replace('task = "', 'tools = ["read_file", "deploy"]\ntask = "', 1))
    with pytest.raises(LooplabError, match=r"offers deploy.*\(and 1 more cases like it\)"):
        ModelChoice().check_drivable(load_cases([suite]).values())


# --- new-suite speaks the repository's language -----------------------------------------------------------------


def test_new_suite_on_a_node_repo_writes_a_prompt_naming_javascript(tmp_path: Path) -> None:
    repo = TESTS / "fixtures" / "node_project"
    written = write_suite(tmp_path / "s", repo, "test/cart.test.js")
    prompt = next(p for p in written if p.name == "system_prompt.txt").read_text(encoding="utf-8")
    assert "in a JavaScript repository" in prompt and "Python" not in prompt


def test_the_did_you_mean_walk_is_bounded_and_never_enters_tool_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from looplab.scenarios import target

    (tmp_path / "node_modules" / "pkg").mkdir(parents=True)
    (tmp_path / "node_modules" / "pkg" / "test_a.py").write_text("def test_a():\n    pass\n", encoding="utf-8")
    for n in range(40):
        (tmp_path / f"test_{n:02d}.py").write_text("", encoding="utf-8")
    monkeypatch.setattr(target, "_MAX_CANDIDATES", 10)
    found = target._repo_files(tmp_path, None)
    assert len(found) == 10 and not any("node_modules" in f for f in found)
    monkeypatch.setattr(target, "_MAX_CANDIDATES", 1_000)
    assert not any("node_modules" in f for f in target._repo_files(tmp_path, None))
