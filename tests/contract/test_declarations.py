"""A runner is declared once, on its class: what looplab reads from the source is what the class holds, and a runner
that another package ships is found through the entry point and passes the conformance checks."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

from looplab.adapters import registry
from looplab.adapters.contract.declaration import DECLARED, Declaration, DeclarationError, read, read_folder
from looplab.adapters.contract.errors import MissingExtra
from looplab.adapters.contract.runner import RunnerDeclaration
from tests.paths import REPO

ROOT = REPO
RUNNERS_FOLDER = ROOT / "adapters" / "runners"
EXAMPLE = ROOT / "examples" / "runner-package"
INSTALLED = [name for name, info in registry.RUNNERS.items() if info.installed()]


@pytest.mark.parametrize("runner", INSTALLED)
def test_what_the_source_declares_is_what_the_class_holds(runner: str) -> None:
    declared = registry.RUNNERS[runner]
    adapter = registry.load(runner)
    for name in DECLARED:
        expected = getattr(adapter, name)
        assert getattr(declared, name) == (tuple(expected) if isinstance(expected, list) else expected), name
    assert type(adapter).__module__ == declared.module


def test_every_runner_module_is_a_registered_runner_listed_in_its_declared_order() -> None:
    modules = {p.stem for p in RUNNERS_FOLDER.glob("*.py") if not p.name.startswith("_")}
    assert {info.module.rpartition(".")[2] for info in registry.RUNNERS.values()} >= modules
    listed = [info.listed for info in registry.RUNNERS.values()]
    assert listed == sorted(listed) and next(iter(registry.RUNNERS)) == "handrolled"


def test_a_missing_framework_names_the_declared_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    ghost = Declaration(
        name="ghost", module="ghost_runner", extra="ghost-extra", distribution="ghost", requires=("no_such_framework",)
    )
    monkeypatch.setitem(registry.RUNNERS, "ghost", ghost)
    with pytest.raises(MissingExtra, match=r"pip install 'looplab\[ghost-extra\]'"):
        registry.load("ghost")


def _module(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(body), encoding="utf-8")


def test_the_reader_follows_bases_and_needs_no_framework(tmp_path: Path) -> None:
    """Attributes come from the class, then its bases; the framework the module imports is never imported."""
    _module(
        tmp_path,
        "base_runner",
        """
        class Shared:
            extra = "shared-extra"
            commands = ("node",)
            apis = ("messages",)
        """,
    )
    _module(
        tmp_path,
        "mine",
        """
        import framework_that_is_not_installed
        from pkg.base_runner import Shared

        class Mine(Shared):
            name = "mine"
            distribution = "mine-dist"
            apis = ["chat", "responses"]
            knobs = (SOME_CONSTANT,)  # not part of what is read before import

        RUNNER = Mine()
        """,
    )
    declared = read("pkg.mine", lambda module: tmp_path / f"{module.rpartition('.')[2]}.py")
    assert declared is not None
    assert (declared.name, declared.extra, declared.distribution) == ("mine", "shared-extra", "mine-dist")
    assert declared.commands == ("node",) and declared.apis == ("chat", "responses")


def test_a_declaration_that_is_not_a_literal_is_one_line_naming_the_field(tmp_path: Path) -> None:
    _module(
        tmp_path,
        "odd",
        """
        EXTRA = "odd"

        class Odd:
            name = "odd"
            extra = EXTRA
            distribution = "odd"

        RUNNER = Odd()
        """,
    )
    with pytest.raises(DeclarationError) as info:
        read("pkg.odd", lambda module: tmp_path / "odd.py")
    assert "\n" not in str(info.value) and "Odd.extra is not a literal" in str(info.value)


def test_a_module_that_still_exports_adapter_is_read_and_loaded_with_a_deprecation_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _module(
        tmp_path,
        "old_named_runner",
        """
        class Old:
            name = "old"
            extra = "old-extra"
            distribution = "old"

        ADAPTER = Old()
        """,
    )
    with pytest.warns(DeprecationWarning, match="name it RUNNER"):
        declared = read("old_named_runner", lambda module: tmp_path / f"{module}.py")
    assert declared is not None and (declared.name, declared.extra) == ("old", "old-extra")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.RUNNERS, "old", declared)
    assert type(registry.load("old")).__name__ == "Old"


def test_the_defaults_read_are_the_ones_the_contract_class_sets() -> None:
    """One place states a default: `RunnerDeclaration`; `Declaration` (what the source says) takes its values."""
    assert set(DECLARED) <= set(inspect.get_annotations(RunnerDeclaration))
    for declared in fields(Declaration):
        if hasattr(RunnerDeclaration, declared.name):  # `name`, `extra` and `distribution` have no default
            default = declared.default_factory() if declared.default is MISSING else declared.default  # type: ignore[misc]
            assert default == getattr(RunnerDeclaration, declared.name), declared.name


def test_a_helper_module_declares_no_runner(tmp_path: Path) -> None:
    _module(tmp_path, "_helper", "def helper():\n    return 1\n")
    _module(tmp_path, "plain", "X = 1\n")
    assert list(read_folder(tmp_path, "pkg")) == []


@pytest.mark.full
def test_a_runner_package_outside_looplab_is_found_and_passes_the_conformance_plugin(tmp_path: Path) -> None:
    """examples/runner-package, installed: `looplab runners` lists it, and its own tests run the plugin on it."""
    target = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run([*install, "--target", str(target), str(EXAMPLE)], check=True, timeout=300, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LOOPLAB_RUNNERS")}
    env["PYTHONPATH"] = str(target)
    listed = subprocess.run(
        [sys.executable, "-m", "looplab", "runners"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0, listed.stderr
    assert "responses_loop" in listed.stdout
    checks = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--rootdir", str(EXAMPLE), str(EXAMPLE)],
        env=env,
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert checks.returncode == 0, checks.stdout[-3000:] + checks.stderr[-2000:]
    summary = checks.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
    # The plugin checked the package's own runner, each contract check on its one wire API among them.
    checked = [line for line in checks.stdout.splitlines() if "responses_loop" in line and "PASSED" in line]
    assert any("test_max_steps_n_means_n_model_calls[" in line for line in checked), checks.stdout[-3000:]
    assert any("test_the_last_allowed_calls_tools_do_not_run" in line for line in checked), checks.stdout[-3000:]
