"""A team's cases, from anywhere: case files and suite folders named by path, read strictly, with the suite's own
prompt, tools and defaults; looplab's own suite stays the default."""

from __future__ import annotations

import json
import pickle
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looplab import cli
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.cli.sources import PROJECT_FILE, case_sources
from looplab.run.harness import ModelChoice
from looplab.scenarios import strict
from looplab.scenarios.cases import (
    BUILTIN_SUITE,
    Case,
    Checks,
    ScriptedModel,
    case_from_wire,
    case_to_wire,
    load_case,
    load_cases,
)
from looplab.shared_tools import Workspace
from tests.team_suite import write_team_suite

VALID = {
    "id": "own",
    "repo": "../repo",
    "target": "tests/test_x.py::test_y",
    "task": "The test tests/test_x.py::test_y fails. Find out why.",
}
#: Each table of a case file and the model whose fields are its keys.
TABLES = {"limits": Limits, "model": ScriptedModel, "checks": Checks}


def _suite(root: Path, files: dict[str, str] | None = None) -> Path:
    """A suite folder under `root` with a repo and `files` (by path in the suite: `tools.py`, `repo/stock.txt`)."""
    suite = root / "suite"
    (suite / "repo" / "tests").mkdir(parents=True, exist_ok=True)
    (suite / "repo" / "tests" / "test_x.py").write_text("def test_y():\n    assert 1 == 2\n", encoding="utf-8")
    (suite / "cases").mkdir(exist_ok=True)
    for name, text in (files or {}).items():
        path = suite / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return suite


def _toml(data: dict) -> str:
    """A flat TOML document for `data` (top-level keys, then one table per dict value); JSON strings are TOML's."""
    lines = [f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in data.items() if not isinstance(v, dict)]
    for table, keys in data.items():
        if isinstance(keys, dict):
            lines += [f"[{table}]", *(f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in keys.items())]
    return "\n".join(lines) + "\n"


def _load(tmp: Path, data: dict) -> Case:
    suite = _suite(tmp)
    path = suite / "cases" / "own.toml"
    path.write_text(_toml(data), encoding="utf-8")
    return load_case(path)


def _one_line(exc: pytest.ExceptionInfo[LooplabError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


# --- read strictly -----------------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=st.sampled_from(sorted(TABLES)), data=st.data())
def test_a_misspelt_key_in_any_table_is_refused_naming_the_file_the_table_and_the_nearest_key(
    table: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    key = data.draw(st.sampled_from(sorted(TABLES[table].model_fields)))
    cut = data.draw(st.integers(0, len(key) - 1))
    typo = key[:cut] + key[cut + 1 :]  # one letter dropped: `max_step`
    if typo in TABLES[table].model_fields or not typo:
        return
    tmp = tmp_path_factory.mktemp("typo")
    with pytest.raises(LooplabError) as info:
        _load(tmp, {**VALID, table: {typo: 1}})
    message = _one_line(info)
    assert message.startswith(f"{tmp / 'suite' / 'cases' / 'own.toml'}: [{table}] {typo}: unknown key")
    assert strict.nearest(typo, list(TABLES[table].model_fields)) in message


def test_the_issues_own_typo_names_max_steps(tmp_path: Path) -> None:
    with pytest.raises(LooplabError) as info:
        _load(tmp_path, {**VALID, "limits": {"max_step": 4}})
    assert _one_line(info).endswith("[limits] max_step: unknown key; did you mean max_steps?")


def test_an_unknown_top_level_key_and_one_in_an_array_of_tables_are_refused(tmp_path: Path) -> None:
    with pytest.raises(LooplabError) as info:
        _load(tmp_path, {**VALID, "tagret": "x"})
    assert _one_line(info).endswith(": tagret: unknown key; did you mean target?")
    path = _suite(tmp_path) / "cases" / "own.toml"
    path.write_text(_toml(VALID) + '[[faults]]\ntool = "read_file"\nkind = "silent"\ntxt = "ok"\n', encoding="utf-8")
    with pytest.raises(LooplabError) as info:
        load_case(path)
    assert _one_line(info).endswith(": [[faults]] #1 txt: unknown key; did you mean text?")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    where=st.sampled_from(
        [("limits", "max_steps"), ("limits", "max_seconds"), ("checks", "answer_mentions"), (None, "task")]
    ),
    value=st.one_of(
        st.text(st.characters(categories=("L", "P", "Zs")), min_size=1, max_size=5).filter(lambda t: not t.isdigit()),
        st.booleans(),
    ),
)
def test_a_wrong_type_is_one_line_naming_the_key_and_what_it_got(
    where: tuple[str | None, str], value: object, tmp_path_factory: pytest.TempPathFactory
) -> None:
    table, key = where
    data = {**VALID, **({table: {key: value}} if table else {key: value})}
    if key == "task" and isinstance(value, str):
        return  # any text is a task
    tmp = tmp_path_factory.mktemp("type")
    with pytest.raises(LooplabError) as info:
        _load(tmp, data)
    message = _one_line(info)
    assert (f"[{table}] {key}: " if table else f": {key}: ") in message and "got" in message


@pytest.mark.parametrize("missing", ["id", "repo", "target", "task"])
def test_a_missing_field_is_named(missing: str, tmp_path: Path) -> None:
    with pytest.raises(LooplabError) as info:
        _load(tmp_path, {k: v for k, v in VALID.items() if k != missing})
    assert _one_line(info).endswith(f": {missing}: missing (a required key)")


def test_a_case_is_read_relative_to_its_own_file(tmp_path: Path) -> None:
    case = _load(tmp_path, VALID)
    assert case.repo_path == (tmp_path / "suite" / "repo").resolve()
    assert case.system_prompt and case.tools == ["run_tests", "read_file", "search_code"]
    with pytest.raises(LooplabError, match="does not exist"):
        _load(tmp_path, {**VALID, "repo": "repo"})  # relative to cases/, where there is none


# --- a suite's tools, test command and defaults ------------------------------------------------------------------

TOOLS_PY = '''
    from typing import Annotated

    from pydantic import Field

    from looplab.shared_tools import Workspace


    def shelf_count(ws: Workspace, sku: Annotated[str, Field(description="The product code.")]) -> str:
        """How many units of a product are on the shelf, from the repo's stock file."""
        for line in (ws.root / "stock.txt").read_text().splitlines():
            code, count = line.split()
            if code == sku:
                return count
        raise KeyError(f"no product {sku}")


    def reorder(sku: str, units: int) -> dict:
        """Order more units of a product."""
        return {"ordered": units, "sku": sku}


    def _helper() -> None:
        """Not a tool: its name starts with an underscore."""
'''


def test_a_suite_offers_its_own_tools_by_name_and_marks_effects(tmp_path: Path) -> None:
    suite = _suite(tmp_path, {"tools.py": TOOLS_PY, "repo/stock.txt": "A1 4\nB2 0\n"})
    path = suite / "cases" / "own.toml"
    path.write_text(_toml({**VALID, "tools": ["read_file", "shelf_count", "reorder"], "effects": ["reorder"]}))
    case = load_case(path)
    tools = {t.name: t for t in case.tool_set()}
    assert list(tools) == ["read_file", "shelf_count", "reorder"]
    assert tools["reorder"].effect and not tools["shelf_count"].effect
    assert tools["shelf_count"].description.startswith("How many units")
    with Workspace(case.repo_path) as ws:
        from looplab.shared_tools import Guard

        guard = Guard(ws, tools=case.tool_set())
        assert guard.call("shelf_count", {"sku": "A1"}).result == "4"
        assert guard.call("reorder", {"sku": "B2", "units": 3}).outcome == "rejected"  # no approver: denied


@pytest.mark.parametrize(
    ("listed", "effects", "expected"),
    [
        (["read_file", "shelf_cont"], [], "tools: no tool named 'shelf_cont'; did you mean shelf_count?"),
        (["read_file", "reorder"], ["write_file"], "effects: 'write_file' is not one of the case's own tools"),
        (["read_file"], ["reorder"], "effects: 'reorder' is not one of the case's own tools"),
        (["read_file", "read_file"], [], "read_file is listed twice"),
    ],
)
def test_a_case_naming_a_tool_wrongly_is_one_line(listed: list, effects: list, expected: str, tmp_path: Path) -> None:
    suite = _suite(tmp_path, {"tools.py": TOOLS_PY})
    path = suite / "cases" / "own.toml"
    path.write_text(_toml({**VALID, "tools": listed, "effects": effects}))
    with pytest.raises(LooplabError) as info:
        load_case(path)
    assert expected in _one_line(info)


def test_a_fault_on_a_tool_the_case_does_not_offer_is_refused(tmp_path: Path) -> None:
    path = _suite(tmp_path) / "cases" / "own.toml"
    path.write_text(_toml({**VALID, "tools": ["read_file"]}) + '[[faults]]\ntool = "run_tests"\nkind = "silent"\n')
    with pytest.raises(LooplabError) as info:
        load_case(path)
    assert "[[faults]] #1 tool: 'run_tests' is not a tool the case offers" in _one_line(info)


def test_a_tools_py_that_does_not_import_is_one_line_with_its_line(tmp_path: Path) -> None:
    suite = _suite(tmp_path, {"tools.py": "import os\n\nraise RuntimeError('no stock service')\n"})
    (suite / "cases" / "own.toml").write_text(_toml(VALID))
    with pytest.raises(LooplabError) as info:
        load_cases([suite])
    message = _one_line(info)
    assert "tools.py (line 3): importing it failed: RuntimeError: no stock service" in message


def test_suite_toml_sets_defaults_a_case_overrides_and_is_read_strictly(tmp_path: Path) -> None:
    suite = _suite(tmp_path, {"suite.toml": 'test_command = ["node", "--test"]\n'})
    (suite / "cases" / "own.toml").write_text(_toml(VALID))
    (suite / "cases" / "other.toml").write_text(_toml({**VALID, "id": "other", "test_command": ["make", "check"]}))
    cases = load_cases([suite])
    assert cases["own"].test_command == ["node", "--test"] and cases["other"].test_command == ["make", "check"]
    bad = _suite(tmp_path / "b", {"suite.toml": 'test_comand = ["x"]\n'})
    (bad / "cases" / "own.toml").write_text(_toml(VALID))
    with pytest.raises(LooplabError) as info:
        load_cases([bad])
    assert "suite.toml: test_comand: unknown key; did you mean test_command?" in _one_line(info)


def test_a_case_travels_to_another_process_with_its_suite(tmp_path: Path) -> None:
    suite = _suite(tmp_path, {"tools.py": TOOLS_PY})
    (suite / "cases" / "own.toml").write_text(_toml({**VALID, "tools": ["shelf_count", "reorder"]}))
    case = load_cases([suite])["own"].model_copy(update={"limits": Limits(max_steps=3)})
    for again in (case_from_wire(json.loads(json.dumps(case_to_wire(case)))), pickle.loads(pickle.dumps(case))):
        assert again.limits.max_steps == 3 and again.repo_path == case.repo_path
        assert [t.name for t in again.tool_set()] == ["shelf_count", "reorder"]


# --- from anywhere -----------------------------------------------------------------------------------------------


def test_sources_are_files_or_suite_folders_and_ids_are_unique(tmp_path: Path) -> None:
    team = write_team_suite(tmp_path)
    assert list(load_cases([team])) == ["ledger-balance", "shelf-restock"]
    assert list(load_cases([team / "cases" / "shelf-restock.toml"])) == ["shelf-restock"]
    assert "vip-compound" in load_cases() and "shelf-restock" not in load_cases()
    both = load_cases([team, BUILTIN_SUITE])
    assert {"shelf-restock", "vip-compound"} <= set(both)
    with pytest.raises(LooplabError, match="duplicate case id 'shelf-restock'"):
        load_cases([team, team / "cases" / "shelf-restock.toml"])
    with pytest.raises(LooplabError, match="no such case file or suite folder"):
        load_cases([tmp_path / "nowhere"])
    with pytest.raises(LooplabError, match="not a suite: no cases/"):
        load_cases([tmp_path])


def test_looplab_toml_names_the_cases_relative_to_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_team_suite(tmp_path)
    (tmp_path / PROJECT_FILE).write_text('cases = ["team-suite"]\n')
    monkeypatch.chdir(tmp_path)
    args = cli._parser().parse_args(["cases"])
    assert case_sources(args) == [tmp_path / "team-suite"]
    assert case_sources(cli._parser().parse_args(["cases", "--cases", "elsewhere"])) == [Path("elsewhere")]
    (tmp_path / PROJECT_FILE).write_text('case = ["team-suite"]\n')
    with pytest.raises(LooplabError) as info:
        case_sources(args)
    assert _one_line(info).endswith("looplab.toml: case: unknown key; did you mean cases?")


def test_the_cases_command_lists_a_teams_cases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = write_team_suite(tmp_path)
    assert cli.main(["cases", "--cases", str(team)]) == 0
    out = capsys.readouterr().out
    assert "shelf-restock" in out and "ledger-balance" in out and "vip-compound" not in out
    assert "own tools" not in out  # only the built-in tools and pytest: no columns for them


def test_the_cases_command_shows_a_cases_own_tools_and_test_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = _suite(tmp_path, {"tools.py": TOOLS_PY, "suite.toml": 'test_command = ["node", "--test"]\n'})
    (suite / "cases" / "own.toml").write_text(_toml({**VALID, "tools": ["read_file", "shelf_count"]}))
    assert cli.main(["cases", "--cases", str(suite)]) == 0
    out = capsys.readouterr().out
    assert "own tools" in out and "shelf_count" in out and "node --test" in out


def test_the_scripted_model_refuses_a_case_with_tools_it_does_not_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = _suite(tmp_path, {"tools.py": TOOLS_PY})
    (suite / "cases" / "own.toml").write_text(_toml({**VALID, "tools": ["read_file", "shelf_count"]}))
    case = load_case(suite / "cases" / "own.toml")
    with pytest.raises(LooplabError, match="offers shelf_count, which the scripted model does not call"):
        ModelChoice().check_cases([case])
    ModelChoice("openai:gpt-4.1-mini").check_drivable([case])  # a real model may call any tool
    for command in (["run", "--runner", "handrolled"], ["eval", "--runner", "handrolled"], ["serve-model"]):
        assert cli.main([*command, "--cases", str(suite)]) == 2  # before anything runs or serves
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--model PROVIDER:NAME" in err, command
