"""Every runner installs by its own name: the extras as the build writes them, read from the wheel's metadata.

The metadata comes from setuptools (`prepare_metadata_for_build_wheel`), offline. setuptools writes extra names
normalized (PEP 685: `pydantic_ai` becomes `pydantic-ai`); pip 23.3 and newer normalizes the name a user types
the same way, so each runner's name, normalized, must be an extra that brings its framework's requirements.
"""

from __future__ import annotations

import re
import subprocess
import sys
from email.parser import Parser
from importlib import metadata

import pytest

from looplab.adapters import registry
from tests.paths import REPO

ROOT = REPO


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[set[str], dict[str, list[str]]]:
    """(the extras the metadata provides, each extra's requirements as written)."""
    out = tmp_path_factory.mktemp("metadata")
    code = f"from setuptools import build_meta; print(build_meta.prepare_metadata_for_build_wheel({str(out)!r}))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    folder = proc.stdout.strip().splitlines()[-1]
    message = Parser().parsestr((out / folder / "METADATA").read_text(encoding="utf-8"))
    provided = set(message.get_all("Provides-Extra") or [])
    by_extra: dict[str, list[str]] = {}
    for line in message.get_all("Requires-Dist") or []:
        requirement, _, marker = line.partition(";")
        if found := re.search(r"extra == ['\"]([^'\"]+)['\"]", marker):
            by_extra.setdefault(found[1], []).append(requirement.strip())
    return provided, by_extra


def _resolved(extra: str, by_extra: dict[str, list[str]], seen: frozenset[str] = frozenset()) -> set[str]:
    """The distributions `extra` installs, following its references to looplab's own extras."""
    names: set[str] = set()
    for requirement in by_extra.get(extra, []):
        name = _normal(re.match(r"[\w.-]+", requirement)[0])  # type: ignore[index]
        if name != "looplab":
            names.add(name)
            continue
        inner = re.search(r"\[(.*?)\]", requirement)
        for more in (e.strip() for e in (inner[1] if inner else "").split(",")):
            if more and more not in seen:
                names |= _resolved(_normal(more), by_extra, seen | {extra})
    return names


@pytest.mark.parametrize("runner", list(registry.RUNNERS))
def test_each_runner_name_is_an_extra_that_installs_its_framework_and_uv(
    runner: str, built: tuple[set[str], dict[str, list[str]]]
) -> None:
    provided, by_extra = built
    name = _normal(runner)
    assert name in provided, f"no extra {name!r} (the runner's own name)"
    info = registry.RUNNERS[runner]
    wanted = set().union(*(_resolved(_normal(e), by_extra) for e in info.all_extras))
    assert wanted and wanted <= _resolved(name, by_extra)
    assert "uv" in _resolved(name, by_extra)  # runner environments are made with uv, not minutes of pip


def test_a_runner_name_without_an_underscore_is_provided_as_typed(built: tuple[set[str], dict[str, list[str]]]) -> None:
    # pip before 23.3 (the one `python3 -m venv` bundles with Python 3.11 is 23.2.1) compares the name as typed.
    plain = [r for r in registry.RUNNERS if "_" not in r]
    assert plain and all(r in built[0] for r in plain)


def test_uv_requires_nothing_so_it_installs_beside_every_frameworks_pins() -> None:
    assert not metadata.requires("uv")
