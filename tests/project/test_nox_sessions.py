"""The noxfile's install steps, read as data and run against a recording session: no install, no download.

`local-llm` installs the chat runners that share one environment into its own and leaves the others to runner
environments of their own (LlamaIndex's `anthropic<1` cannot co-install with the rest). Whether one environment's
requirements are consistent is shown offline by an environment that satisfies all of them: this one, which holds
looplab[all].
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from looplab.adapters import registry
from looplab.measure import local_llm
from looplab.run import environments
from tests.paths import REPO

ROOT = REPO


def load_noxfile() -> Any:
    """noxfile.py as a module, its sessions the only ones nox's registry holds (a second load in one process would
    register each again, which nox is to refuse)."""
    import nox.registry

    spec = importlib.util.spec_from_file_location("looplab_noxfile", ROOT / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    nox.registry.reset()
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def noxfile() -> Any:
    return load_noxfile()


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
    assert session.runs[-1][:4] == ("python", "-m", "looplab.measure", "local-llm")
    runners = local_llm.chat_runners()
    programs = {d.name for d in noxfile.LOCAL_LLM_RUNNERS if registry.RUNNERS[d.name].programs_found()}
    assert {d.name for d in noxfile.LOCAL_LLM_RUNNERS if d.by_default} & programs <= set(runners)


def test_adapter_sessions_install_no_reference_to_looplabs_own_extras(noxfile: Any) -> None:
    # Runner extras name `looplab[isolate]` (uv); an adapter session installs `-e .` and the framework only.
    for declared in noxfile.RUNNERS:
        requirements = noxfile.framework_requirements(declared.all_extras)
        assert requirements and all(Requirement(r).name != "looplab" for r in requirements)
        [noxfile.oldest(r) for r in requirements]  # every one has a lower bound to pin


def _newest_within_bounds(declared: Any, measured: dict[str, str]) -> Version:
    """The release of a runner's framework that its `latest` session installs, known offline: the one installed
    here for a runner in [all] (this environment holds looplab[all]); for one in an environment of its own, the one
    docs/iteration-caps.json names (`looplab caps` measures it there on the newest releases)."""
    try:
        return Version(metadata.version(declared.distribution))
    except metadata.PackageNotFoundError:
        assert not declared.in_all, f"{declared.distribution} ({declared.name}) is not installed here"
        # "1.15.30", or with the SDK the runner reaches its provider through: "anthropic 2.15.0"
        return next(Version(word) for word in measured[declared.name].split() if word[0].isdigit())


def test_every_runner_extras_lower_bound_is_older_than_what_its_latest_session_installs(noxfile: Any) -> None:
    # A lower bound at the newest release makes the `oldest` session a second `latest`: the range goes untested.
    caps = json.loads((ROOT / "docs" / "iteration-caps.json").read_text())
    measured = {entry["runner"]: entry["version"] for entry in caps["runners"]}
    not_older = []
    for declared in noxfile.RUNNERS:
        if declared.npm_packages:
            continue  # a node runner's oldest releases are its npm pins
        [requirement] = [
            r
            for r in noxfile.framework_requirements(declared.all_extras)
            if canonicalize_name(Requirement(r).name) == canonicalize_name(declared.distribution)
        ]
        lower = Version(noxfile.oldest(requirement).split("==")[1])
        newest = _newest_within_bounds(declared, measured)
        if not lower < newest:
            not_older.append(f"{declared.name}: {requirement}, newest {newest}")
    assert not_older == []


class Skipped(Exception):
    """What `session.skip` raises on nox (`nox.sessions._SessionSkip`), here with its message."""


class NodeRecorder(Recorder):
    """A recorder that also keeps each run's environment and stops at a skip, as nox does."""

    def __init__(self) -> None:
        super().__init__()
        self.envs: list[dict[str, str]] = []

    def run(self, *args: str, **kwargs: Any) -> None:
        super().run(*args)
        self.envs.append(kwargs.get("env") or {})

    def skip(self, reason: str) -> None:
        raise Skipped(reason)


def _sessions() -> dict[str, Any]:
    import nox.registry

    return dict(nox.registry.get())


def _session(name: str) -> Any:
    return _sessions()[name]


def _node_runners(noxfile: Any) -> list[Any]:
    return [d for d in noxfile.RUNNERS if d.npm_packages]


def test_each_npm_line_is_a_session_tagged_with_the_node_it_needs(
    noxfile: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(noxfile, "node_here", lambda: (99, "node is v99.0.0"))
    assert {d.name for d in _node_runners(noxfile)} >= {"ts_ai_sdk", "ts_openai_agents", "ts_langgraph"}
    for declared in _node_runners(noxfile):
        assert declared.npm_lines, f"{declared.name} declares no npm lines"
        for line, (node, specs) in declared.npm_lines.items():
            session = _session(f"adapter-{declared.name}-latest-{line}")
            assert session.tags == [f"node{node}"]
            recorder = NodeRecorder()
            session(recorder)
            # the line's newest releases go over the lockfile's pins, for this runner's tests only
            [env] = [e for args, e in zip(recorder.runs, recorder.envs, strict=True) if args[0] == "pytest"]
            assert env["LOOPLAB_NPM_VERSIONS"].split() == [f"{pkg}@{spec}" for pkg, spec in specs.items()]
            assert env["LOOPLAB_RUNNERS"] == declared.name
        # `oldest` runs on the Node of its oldest line; a node runner has no plain `latest` (@latest of every package)
        assert _session(f"adapter-{declared.name}-oldest").tags == [
            f"node{min(n for n, _ in declared.npm_lines.values())}"
        ]
        assert f"adapter-{declared.name}-latest" not in _sessions()
    [ai_sdk] = [d for d in noxfile.RUNNERS if d.name == "ts_ai_sdk"]
    assert {line: node for line, (node, _) in ai_sdk.npm_lines.items()} == {"ai6": 20, "ai7": 22}


@pytest.mark.parametrize(
    ("here", "named"),
    [((20, "/usr/bin/node is v20.20.2"), "/usr/bin/node is v20.20.2"), ((None, "there is no node on PATH"), "no node")],
)
def test_a_line_whose_node_is_not_here_skips_in_one_line_naming_both(
    noxfile: Any, monkeypatch: pytest.MonkeyPatch, here: tuple[int | None, str], named: str
) -> None:
    monkeypatch.setattr(noxfile, "node_here", lambda: here)
    recorder = NodeRecorder()
    with pytest.raises(Skipped) as skipped:
        _session("adapter-ts_ai_sdk-latest-ai7")(recorder)
    message = str(skipped.value)
    assert message.startswith("adapter-ts_ai_sdk-latest-ai7 needs Node.js 22 or newer; ") and named in message
    assert "\n" not in message
    assert recorder.installs == [] and recorder.runs == []  # skipped before installing anything


def test_node_here_reads_the_major_of_the_node_on_path(
    noxfile: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "node"
    fake.write_text("#!/bin/sh\necho v22.23.5\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert noxfile.node_here() == (22, f"{fake} is v22.23.5")
    fake.unlink()
    assert noxfile.node_here() == (None, "there is no node on PATH")


def test_every_adapter_session_checks_the_caps_measurement_of_its_runner(
    noxfile: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The contract tests pass even where a knob is ignored (the model boundary refuses the call past the cap): only
    # measuring the knob shows it, so each version session measures its runner against the committed caps doc.
    monkeypatch.setattr(noxfile, "node_here", lambda: (99, "node is v99.0.0"))
    adapters = {name: s for name, s in _sessions().items() if name.startswith("adapter-")}
    assert len(adapters) >= 2 * len(noxfile.RUNNERS)
    for name, session in adapters.items():
        recorder = NodeRecorder()
        session(recorder)
        runner = next(d.name for d in noxfile.RUNNERS if name.startswith(f"adapter-{d.name}-"))
        assert recorder.runs[-1] == ("looplab", "caps", "--check", "--runner", runner), name
