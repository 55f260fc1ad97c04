"""The noxfile's install steps, read as data and run against a recording session: no install, no download.

`local-llm` installs the chat runners that share one environment into its own and leaves the others to runner
environments of their own (LlamaIndex's `anthropic<1` cannot co-install with the rest). Whether one environment's
requirements are consistent is shown offline by an environment that satisfies all of them: this one, which holds
looplab[all].
"""

from __future__ import annotations

import importlib.util
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from looplab.adapters import registry
from looplab.measure import local_llm
from looplab.run import environments

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def noxfile() -> Any:
    spec = importlib.util.spec_from_file_location("looplab_noxfile", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


class Recorder:
    """A nox session that records what it is told to install and run, and does neither."""

    posargs: list[str] = []  # noqa: RUF012 - read, never changed

    def __init__(self) -> None:
        self.installs: list[tuple[str, ...]] = []
        self.runs: list[tuple[str, ...]] = []

    def install(self, *args: str, **_: Any) -> None:
        self.installs.append(args)

    def run(self, *args: str, **_: Any) -> None:
        self.runs.append(args)

    def log(self, *_: Any) -> None:
        pass


def _extras_of(install: tuple[str, ...]) -> list[str]:
    """`("-e", ".[a,b]")` -> `["a", "b"]`."""
    found = re.fullmatch(r"\.\[(.*)\]", install[-1])
    assert install[0] == "-e" and found, install
    return found[1].split(",")


def _requirements(noxfile: Any, extras: list[str]) -> list[str]:
    """The requirements `extras` bring, following looplab's references to its own extras."""
    out, todo, seen = [], list(extras), set()
    while todo:
        extra = todo.pop()
        seen.add(extra)
        for requirement in noxfile.EXTRAS[extra]:
            parsed = Requirement(requirement)
            if parsed.name == "looplab":
                todo += [e for e in parsed.extras if e not in seen]
            else:
                out.append(requirement)
    return out


def _run_local_llm(noxfile: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Recorder:
    monkeypatch.setattr(noxfile, "WHEEL_CACHE", tmp_path)
    (tmp_path / f"llama_cpp_python-{noxfile.LLAMA_CPP_VERSION}-py3-none-linux_x86_64.whl").touch()  # no compile
    session = Recorder()
    noxfile.local_llm(session)
    return session


def test_local_llm_installs_no_runner_that_cannot_share_its_environment(
    noxfile: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    session = _run_local_llm(noxfile, monkeypatch, tmp_path)
    extras = _extras_of(session.installs[0])
    chat = [d for d in noxfile.RUNNERS if "chat" in d.apis]
    own = {d.name for d in chat if not d.in_all}
    assert own and own == set(noxfile.LOCAL_LLM_OWN_ENVIRONMENTS)
    assert not {e for d in chat if d.name in own for e in d.all_extras} & set(extras)
    # Every other chat runner's framework is installed here.
    assert all(set(d.all_extras) <= set(extras) for d in chat if d.name not in own)
    # ... and uv with it, which creates the others' environments.
    assert "uv" in {Requirement(r).name for r in _requirements(noxfile, extras)}


def test_local_llm_requirements_are_satisfied_together_by_one_environment(
    noxfile: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # This environment holds looplab[all]: if it satisfies every requirement of the session's install at once,
    # a resolver can too. (`anthropic<1` beside `anthropic>=2` is the conflict this finds.)
    session = _run_local_llm(noxfile, monkeypatch, tmp_path)
    unmet = []
    for requirement in _requirements(noxfile, _extras_of(session.installs[0])):
        parsed = Requirement(requirement)
        try:
            version = metadata.version(parsed.name)
        except metadata.PackageNotFoundError:
            version = "not installed"
        if version == "not installed" or not parsed.specifier.contains(version, prereleases=True):
            unmet.append(f"{requirement} ({version})")
    assert unmet == []


def test_each_own_environment_holds_only_its_runners_framework(noxfile: Any) -> None:
    own = set(noxfile.LOCAL_LLM_OWN_ENVIRONMENTS)
    for name in own:
        names = {environments._name(r) for r in environments.spec_for(name).requirements}
        for other in own - {name}:
            theirs = {environments._name(r) for r in environments._extra_requirements(registry.RUNNERS[other].extra)}
            mine = {environments._name(r) for r in environments._extra_requirements(registry.RUNNERS[name].extra)}
            assert not (theirs - mine) & names, (name, other)


def test_local_llm_runs_every_chat_runner_including_those_in_their_own_environments(
    noxfile: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    session = _run_local_llm(noxfile, monkeypatch, tmp_path)
    assert session.runs[-1][:3] == ("python", "-m", "looplab.measure.local_llm")
    runners = local_llm.chat_runners()
    programs = {d.name for d in noxfile.LOCAL_LLM_RUNNERS if registry.RUNNERS[d.name].programs_found()}
    assert {d.name for d in noxfile.LOCAL_LLM_RUNNERS if d.by_default} & programs <= set(runners)


def test_adapter_sessions_install_no_reference_to_looplabs_own_extras(noxfile: Any) -> None:
    # Runner extras name `looplab[isolate]` (uv); an adapter session installs `-e .` and the framework only.
    for declared in noxfile.RUNNERS:
        requirements = noxfile.framework_requirements(declared.all_extras)
        assert requirements and all(Requirement(r).name != "looplab" for r in requirements)
        [noxfile.oldest(r) for r in requirements]  # every one has a lower bound to pin
