"""`looplab new-suite`: a suite folder that loads and runs at once, and the folders and targets it refuses."""

from __future__ import annotations

import ast
import os
import tomllib
from pathlib import Path

import pytest

from looplab.adapters.contract.errors import LooplabError
from looplab.cli import main
from looplab.cli.suite import case_id_of, write_suite
from looplab.scenarios.cases import load_case, load_cases
from looplab.scenarios.suite import default_system_prompt, suite_at

TARGET = "tests/test_ops.py::test_total"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small Python project of its own with one failing test, outside looplab's tree."""
    root = tmp_path / "projects" / "ops"
    (root / "calc").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    (root / "calc" / "__init__.py").write_text("")
    (root / "calc" / "ops.py").write_text("def total(prices):\n    return sum(prices) - prices[0]\n")
    (root / "tests" / "test_ops.py").write_text(
        "from calc.ops import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n"
    )
    return root


def test_the_written_case_loads_with_its_repo_relative_to_the_case_file(tmp_path: Path, repo: Path) -> None:
    folder = tmp_path / "suites" / "mine"
    written = write_suite(folder, repo, TARGET)

    case_file = folder / "cases" / "total.toml"
    assert written == [case_file, folder / "system_prompt.txt", folder / "tools.py"]
    data = tomllib.loads(case_file.read_text())
    assert data["repo"] == os.path.relpath(repo, case_file.parent) == "../../../projects/ops"
    case = load_case(case_file)
    assert case.id == "total"
    assert case.repo_path == repo.resolve()
    assert case.target == TARGET and TARGET in case.task
    assert case.limits.max_steps == 12
    assert case.checks.stop_reason == "final_answer"
    assert case.system_prompt == default_system_prompt()
    assert case.tools == ["run_tests", "read_file", "search_code"]
    # tools.py is valid Python that defines no tool, and its docstring shows how to write one.
    tools_py = (folder / "tools.py").read_text()
    assert suite_at(folder).functions == {}
    doc = ast.get_docstring(ast.parse(tools_py)) or ""
    assert "def count_lines(ws: Workspace, path: str) -> str:" in doc and "effects" in doc


def test_the_case_file_shows_the_optional_keys_as_comments(tmp_path: Path, repo: Path) -> None:
    case_file = write_suite(tmp_path / "s", repo, TARGET)[0]
    text = case_file.read_text()
    for key in ("tools", "effects", "test_command", "system_prompt"):
        assert f"\n# {key} = " in text, key
        assert key not in tomllib.loads(text)


def test_the_written_suite_runs_through_the_handrolled_runner(tmp_path: Path, repo: Path, capsys) -> None:
    folder = tmp_path / "suites" / "mine"
    write_suite(folder, repo, TARGET)
    code = main(["run", "--cases", str(folder), "--runner", "handrolled", "--steps", "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "looplab run · total" in out and "final_answer" in out


def test_the_built_in_suite_does_not_see_a_written_suite(tmp_path: Path, repo: Path) -> None:
    write_suite(tmp_path / "s", repo, TARGET)
    assert "total" not in load_cases()


def test_a_given_id_names_the_case_and_its_file(tmp_path: Path, repo: Path) -> None:
    case_file = write_suite(tmp_path / "s", repo, TARGET, case_id="sum-off-by-one")[0]
    assert case_file.name == "sum-off-by-one.toml"
    assert load_case(case_file).id == "sum-off-by-one"


def test_quotes_and_backslashes_in_the_repos_path_stay_valid_toml(tmp_path: Path, repo: Path) -> None:
    odd = repo.rename(repo.with_name('o"p\\s'))
    case_file = write_suite(tmp_path / "s", odd, TARGET)[0]
    case = load_case(case_file)
    assert case.repo_path == odd.resolve() and case.target == TARGET


def test_a_target_run_tests_would_refuse_is_refused_as_a_case_file_would_be(tmp_path: Path, repo: Path) -> None:
    target = 'tests/test_ops.py::test_total[a"b\\c]'
    with pytest.raises(LooplabError, match="not a test target") as err:
        write_suite(tmp_path / "s", repo, target)
    assert "\n" not in str(err.value) and not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("tests/test_invoice.py::test_invoice_total", "invoice-total"),
        ("tests/test_x.py::TestCart::test_empty_cart", "empty-cart"),
        ("tests/test_x.py::test_rate[0.5-vip]", "rate"),
        ("test/cart.test.js", "cart"),
        ("tests/test_orders.py", "orders"),
        ("tests/test_x.py::test", "test"),
    ],
)
def test_the_case_id_comes_from_the_tests_name(target: str, expected: str) -> None:
    assert case_id_of(target) == expected


def test_a_folder_that_holds_a_suite_is_refused_and_left_as_it_was(tmp_path: Path, repo: Path) -> None:
    folder = tmp_path / "s"
    case_file = write_suite(folder, repo, TARGET)[0]
    case_file.write_text(case_file.read_text() + "# edited\n")
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    with pytest.raises(LooplabError, match="already holds a suite") as err:
        write_suite(folder, repo, TARGET, case_id="another")
    assert "\n" not in str(err.value)
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before


def test_a_folder_with_a_suite_file_but_no_cases_is_refused(tmp_path: Path, repo: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "tools.py").write_text('"""mine"""\n')
    with pytest.raises(LooplabError, match="already holds a suite"):
        write_suite(tmp_path / "s", repo, TARGET)
    assert (tmp_path / "s" / "tools.py").read_text() == '"""mine"""\n'


def test_an_empty_existing_folder_is_used(tmp_path: Path, repo: Path) -> None:
    (tmp_path / "s").mkdir()
    assert load_case(write_suite(tmp_path / "s", repo, TARGET)[0]).id == "total"


@pytest.mark.parametrize(
    ("make_repo", "target", "message"),
    [
        (lambda repo: repo / "missing", TARGET, "not a folder"),
        (lambda repo: repo / "pyproject.toml", TARGET, "not a folder"),
        (lambda repo: repo, "tests/test_gone.py::test_total", "no file tests/test_gone.py in"),
        (lambda repo: repo, "tests", "no file tests in"),
        (lambda repo: repo, "../ops/tests/test_ops.py::test_total", "inside it"),
        (lambda repo: repo, "::test_total", "name a test file"),
    ],
)
def test_a_repo_that_is_not_a_folder_and_a_target_not_in_it_are_refused(
    tmp_path: Path, repo: Path, make_repo, target: str, message: str
) -> None:
    with pytest.raises(LooplabError, match=message) as err:
        write_suite(tmp_path / "s", make_repo(repo), target)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("case_id", ["", "../up", "a b", "-x"])
def test_a_case_id_that_cannot_name_a_file_is_refused(tmp_path: Path, repo: Path, case_id: str) -> None:
    with pytest.raises(LooplabError, match="case id"):
        write_suite(tmp_path / "s", repo, TARGET, case_id=case_id)


def test_the_command_writes_the_suite_and_says_how_to_run_it(tmp_path: Path, repo: Path, capsys) -> None:
    folder = tmp_path / "s"
    assert main(["new-suite", str(folder), "--repo", str(repo), "--target", TARGET, "--id", "mine"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {folder / 'cases' / 'mine.toml'}" in out
    assert f"looplab run --cases {folder}" in out


def test_looplab_new_suite_refuses_in_one_line(tmp_path: Path, repo: Path, capsys) -> None:
    code = main(["new-suite", str(tmp_path / "s"), "--repo", str(repo), "--target", "tests/nope.py"])
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1 and "no file tests/nope.py" in err
