"""Runner environments: created once per requirement set, reused, pinned on request; cells run in them as here."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looplab.adapters import registry
from looplab.adapters.contract.errors import EnvironmentFailed, LooplabError
from looplab.cli import main
from looplab.records import results
from looplab.records.document import Document
from looplab.records.outcome import RunOutcome
from looplab.run import environments, isolation, schedule
from looplab.run.environments import EnvSpec, RunnerEnv
from looplab.run.harness import Endpoint, ModelChoice
from looplab.run.options import RunOptions
from looplab.scenarios.cases import load_cases
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.views import report
from tests.runs import tool_steps

VERSIONS = st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,3}", fullmatch=True)


@settings(deadline=None)
@given(runner=st.sampled_from(sorted(registry.RUNNERS)), version=VERSIONS)
def test_a_pin_replaces_the_frameworks_requirement_and_makes_another_environment(runner: str, version: str) -> None:
    plain, pinned = environments.spec_for(runner), environments.spec_for(runner, version)
    framework = environments._name(environments._extra_requirements(registry.RUNNERS[runner].extra)[0])
    mentions = [r for r in pinned.requirements if environments._name(r) == framework]
    assert len(mentions) == 1 and mentions[0].endswith(f"=={version}")
    assert pinned.key != plain.key and pinned.key == environments.spec_for(runner, version).key
    assert set(pinned.requirements) - set(mentions) == {
        r for r in plain.requirements if environments._name(r) != framework
    }
    assert pinned.pins == (f"{framework}=={version}",) or pinned.pins[0].endswith(f"=={version}")


COMPANIONS = st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True), min_size=1, max_size=3, unique=True)


@settings(deadline=None)
@given(runner=st.sampled_from(sorted(registry.RUNNERS)), version=VERSIONS, companions=COMPANIONS, data=st.data())
def test_pins_joined_by_semicolons_go_into_one_environment_each_once(
    runner: str, version: str, companions: list[str], data: st.DataObject
) -> None:
    framework = environments._name(environments._extra_requirements(registry.RUNNERS[runner].extra)[0])
    others = [c for c in companions if c != framework]
    pins = [version, *(f"{c}=={data.draw(VERSIONS)}" for c in others)]
    spec = environments.spec_for(runner, " ; ".join(pins))
    assert spec.pins == (f"{framework}=={version}", *pins[1:])
    for pin in spec.pins:  # each named distribution once, held at its pin
        name, _, held = pin.partition("==")
        [kept] = [r for r in spec.requirements if environments._name(r) == environments._name(name)]
        assert kept.endswith(f"=={held}")


def test_a_runners_environment_holds_its_extra_and_looplabs_core_only() -> None:
    spec = environments.spec_for("pydantic_ai")
    names = {environments._name(r) for r in spec.requirements}
    assert "pydantic-ai-slim" in names and {"pydantic", "regex", "httpx"} <= names
    assert not names & {"anthropic", "openai", "langgraph", "langchain", "openai-agents", "mcp", "looplab"}


@pytest.mark.parametrize("text", ["langgraph", "nosuch=1.0", "=1.0", "langgraph="])
def test_a_bad_versions_value_is_one_line(text: str) -> None:
    with pytest.raises(LooplabError) as info:
        environments.parse_pins([text])
    assert "\n" not in str(info.value) and "RUNNER=SPEC" in str(info.value)


def test_several_versions_of_one_runner_are_kept_apart() -> None:
    assert environments.parse_pins(["langgraph=1.0.0", "langgraph=1.2.24", "handrolled=2.0.0"]) == {
        "langgraph": ["1.0.0", "1.2.24"],
        "handrolled": ["2.0.0"],
    }


# --- creation and reuse (uv from PyPI, or its cache) ---------------------------------------------------


@pytest.mark.full  # builds runner environments
def test_an_environment_is_created_once_then_reused_and_an_unfinished_one_redone(tmp_path: Path) -> None:
    spec = environments.spec_for("pydantic_ai")
    first = environments.ensure(spec, tmp_path)
    assert first.created_s is not None and first.python.exists()
    assert first.packages["pydantic-ai-slim"] and "anthropic" in first.packages  # its extra's own [anthropic]
    again = environments.ensure(spec, tmp_path)
    assert again.created_s is None and again.path == first.path and again.packages == first.packages
    (first.path / environments.MARKER).unlink()  # as if creation had been interrupted before its end
    redone = environments.ensure(spec, tmp_path)
    assert redone.created_s is not None and (redone.path / environments.MARKER).exists()


@pytest.mark.full  # builds runner environments
def test_an_environment_that_cannot_be_created_is_one_line_naming_the_runner(tmp_path: Path) -> None:
    spec = EnvSpec("pydantic_ai", ("pydantic-ai-slim==0.0.0.0.0.1",), ("pydantic-ai-slim==0.0.0.0.0.1",))
    with pytest.raises(EnvironmentFailed) as info:
        environments.ensure(spec, tmp_path)
    assert "\n" not in str(info.value) and "pydantic_ai" in str(info.value)
    assert not (tmp_path / f"pydantic_ai-{spec.key}" / environments.MARKER).exists()


# --- cells in environments -----------------------------------------------------------------------------


def _outcomes(run, plan) -> list[RunOutcome]:  # type: ignore[no-untyped-def]
    got: dict[int, RunOutcome] = {}
    run(lambda i, o: got.__setitem__(i, o))
    return [got[i] for i in range(len(plan))]


def _shape(o: RunOutcome) -> tuple:
    r = o.result
    assert r is not None, o.error
    return (o.case, r.stop_reason, r.totals.model_calls, tool_steps(r), [c.passed for c in o.checks])


@pytest.mark.full  # builds runner environments
def test_cells_in_runner_environments_match_the_same_cells_here() -> None:
    cases = load_cases()
    runners = ["handrolled", "pydantic_ai"]
    plan = [(r, cases[c]) for r in runners for c in ("vip-compound", "sloppy-calls", "tight-budget")]
    envs = {r: environments.ensure(environments.spec_for(r)) for r in runners}
    with ScriptedModelServer() as server:
        where = Endpoint(ModelChoice(), {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url})
        here = _outcomes(lambda done: schedule.Here(1).run(plan, where, RunOptions(), done), plan)
        isolated = _outcomes(
            lambda done: isolation.run_isolated(plan, where, envs.__getitem__, 2, 2, done, RunOptions()), plan
        )
    assert [_shape(o) for o in isolated] == [_shape(o) for o in here]
    assert [o.runner for o in isolated] == [r for r, _ in plan]


def _fake_env(tmp_path: Path, script: str) -> RunnerEnv:
    python = tmp_path / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n" + script)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return RunnerEnv(EnvSpec("handrolled", ()), tmp_path)


def test_a_lane_that_dies_makes_errors_of_its_cells_naming_its_stderr(tmp_path: Path) -> None:
    env = _fake_env(tmp_path, "echo 'ImportError: no module named regex' >&2\nexit 3\n")
    plan = [("handrolled", load_cases()["vip-compound"]), ("handrolled", load_cases()["wrong-path"])]
    where = Endpoint(ModelChoice(), {"openai": "http://127.0.0.1:9/v1", "anthropic": "http://127.0.0.1:9"})
    outcomes = _outcomes(
        lambda done: isolation.run_isolated(plan, where, lambda _: env, 1, 1, done, RunOptions()), plan
    )
    assert [o.case for o in outcomes] == ["vip-compound", "wrong-path"]
    for o in outcomes:
        assert o.result is None and "exit code 3" in (o.error or "") and "no module named regex" in (o.error or "")


def test_a_silent_lane_is_killed_at_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A sleep no other process runs (other tests run in parallel): the check below finds this lane's only.
    sleep = ["sleep", f"301.{os.getpid()}"]
    env = _fake_env(tmp_path, " ".join(sleep) + "\n")
    monkeypatch.setattr(isolation, "LANE_START_S", 1.0)
    case = load_cases()["vip-compound"]
    case = case.model_copy(update={"limits": case.limits.model_copy(update={"max_seconds": 1.0})})
    where = Endpoint(ModelChoice(), {"openai": "http://127.0.0.1:9/v1", "anthropic": "http://127.0.0.1:9"})
    started = time.monotonic()
    (outcome,) = _outcomes(
        lambda done: isolation.run_isolated(
            [("handrolled", case)], where, lambda _: env, 1, 1, done, RunOptions(grace_s=0.0)
        ),
        [case],
    )
    assert "silent" in (outcome.error or "") and time.monotonic() - started < 30
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _runs(int(p), sleep)]  # the group went too


def test_runners_that_need_no_environment_share_this_ones_workers_beside_lanes_of_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lane per runner would start an interpreter and import a framework for each: the runners that run here share
    # the matrix's worker processes; only the others get lanes, and a lane that dies fails its own cells alone.
    from looplab.run import matrix

    lanes_given: list[str] = []
    real = isolation.run_isolated

    def watched(plan, *args, **kwargs):  # type: ignore[no-untyped-def]
        lanes_given.extend(label for label, _ in plan)
        return real(plan, *args, **kwargs)

    monkeypatch.setattr(isolation, "run_isolated", watched)
    dead = _fake_env(tmp_path, "echo 'ImportError: no module named regex' >&2\nexit 3\n")
    envs = {"handrolled": RunnerEnv.this_one("handrolled"), "langgraph": dead}
    cases = [load_cases()["vip-compound"], load_cases()["tight-budget"]]
    with ScriptedModelServer() as server:
        where = Endpoint(ModelChoice(), {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url})
        outcomes = matrix.run_matrix(["handrolled", "langgraph"], cases, where, jobs=2, isolated=envs.__getitem__)
    assert set(lanes_given) == {"langgraph"}
    assert [(o.runner, o.case) for o in outcomes] == [(r, c.id) for c in cases for r in ("handrolled", "langgraph")]
    for o in outcomes:
        if o.runner == "handrolled":
            assert o.result is not None and o.passed, o.error
        else:
            assert o.result is None and "exit code 3" in (o.error or "")


def _runs(pid: int, command: list[str]) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes() == "".join(f"{word}\0" for word in command).encode()
    except OSError:
        return False


# --- the commands ------------------------------------------------------------------------------------------

#: Cases that between them stop every way the suite stops, kept few: the isolated eval repeats the in-process one.
SOME_CASES = ["vip-compound", "sloppy-calls", "tight-budget", "already-green", "path-escape"]


def _eval(tmp_path: Path, name: str, *extra: str) -> Document:
    path = tmp_path / f"{name}.json"
    argv = ["eval", "--jobs", "2", "--json", str(path), *extra]
    for case in SOME_CASES:
        argv += ["--case", case]
    assert main(argv) in (0, 1)  # 1: a check failed, which the comparison below shows either way
    return results.read(path)


def _cells(doc: Document) -> list[tuple]:
    out = []
    for cell in doc.cells:
        r = doc.result_of(cell)
        calls = None if r is None else (r.totals.model_calls, tool_steps(r))
        out.append((cell.runner, cell.case, cell.stop_reason, cell.passed, cell.failed_checks, calls))
    return sorted(out, key=lambda c: (c[0], c[1]))


@pytest.mark.full  # builds runner environments
def test_an_isolated_eval_of_every_runner_equals_the_in_process_eval_cell_for_cell(tmp_path: Path) -> None:
    here = _eval(tmp_path, "here")
    isolated = _eval(tmp_path, "isolated", "--isolate")
    # --isolate adds the runners that live only in their own environment; every other cell is the same.
    own = {name for name, info in registry.RUNNERS.items() if info.by_default and not info.in_all}
    assert [c for c in _cells(isolated) if c[0] not in own] == _cells(here) and len(here.cells) >= 6 * len(SOME_CASES)
    assert {c[0] for c in _cells(isolated)} - {c[0] for c in _cells(here)} == own
    assert all(c[3] for c in _cells(isolated) if c[0] in own)  # and pass their checks there
    # Each runner ran in an environment of its own extra: its framework there, another runner's not.
    mine = {c.runner: isolated.environments[c.environment or ""] for c in isolated.cells}
    assert len({c.environment for c in isolated.cells}) >= 5
    assert "pydantic-ai-slim" in mine["pydantic_ai"].packages and "langgraph" not in mine["pydantic_ai"].packages
    assert "langgraph" in mine["langgraph"].packages and "pydantic-ai-slim" not in mine["langgraph"].packages
    html = report.render_html(isolated)
    for env_id in {c.environment for c in isolated.cells}:
        assert env_id and env_id in html


@pytest.mark.full  # builds runner environments
def test_two_versions_of_one_framework_run_side_by_side_in_one_report(tmp_path: Path) -> None:
    path, html = tmp_path / "versions.json", tmp_path / "versions.html"
    argv = ["eval", "--runner", "pydantic_ai", "--case", "vip-compound", "--json", str(path), "--html", str(html)]
    assert main([*argv, "--versions", "pydantic_ai=2.60.0", "--versions", "pydantic_ai=2.68.0"]) == 0
    doc = results.read(path)
    assert [(c.runner, c.runner_version) for c in doc.cells] == [
        ("pydantic_ai@2.60.0", "2.60.0"),
        ("pydantic_ai@2.68.0", "2.68.0"),
    ]
    first, second = (doc.environments[c.environment or ""] for c in doc.cells)
    assert (first.packages["pydantic-ai-slim"], second.packages["pydantic-ai-slim"]) == ("2.60.0", "2.68.0")
    page = html.read_text()
    assert page.count("<th>pydantic_ai@2.60.0</th>") >= 1 and page.count("<th>pydantic_ai@2.68.0</th>") >= 1


@pytest.mark.full  # builds runner environments
def test_a_runner_whose_environment_cannot_be_made_fails_its_cells_and_the_others_run(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    argv = ["eval", "--runner", "handrolled", "--case", "vip-compound", "--json", str(path)]
    assert main([*argv, "--versions", "pydantic_ai=0.0.0.0.0.1"]) == 1
    by_runner = {c.runner: c for c in results.read(path).cells}
    broken = by_runner["pydantic_ai@0.0.0.0.0.1"]
    assert broken.result is None and "could not be created" in (broken.error or "")
    assert by_runner["handrolled"].passed and by_runner["handrolled"].stop_reason == "final_answer"


@pytest.mark.parametrize("what", ["file", "under-a-file"])
def test_a_cache_that_is_a_file_is_one_line_before_any_environment_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    cache = tmp_path / "cache"
    cache.write_text("not a folder", encoding="utf-8")
    if what == "under-a-file":
        cache = cache / "envs"
    monkeypatch.setenv(environments.CACHE_ENV, str(cache))

    def built(*args: object) -> None:
        raise AssertionError("an environment was built")

    monkeypatch.setattr(environments, "_create", built)
    assert main(["eval", "--isolate", "--runner", "handrolled", "--case", "vip-compound"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"looplab: runner environment cache {cache}")
    assert environments.CACHE_ENV in err
    assert (tmp_path / "cache").read_text(encoding="utf-8") == "not a folder"


def test_a_teams_case_runs_in_a_lane_as_it_runs_here(tmp_path: Path) -> None:
    import shlex
    import sys

    from looplab.adapters.contract.limits import Limits
    from tests.team_suite import write_team_suite

    # A runner environment whose interpreter is this one: the lane's wire is what is under test.
    env = _fake_env(tmp_path / "env", f'exec {shlex.quote(sys.executable)} "$@"\n')
    team = load_cases([write_team_suite(tmp_path)])
    capped = team["shelf-restock"].model_copy(update={"limits": Limits(max_steps=1)})  # a change the lane must keep
    plan = [("handrolled", team["ledger-balance"]), ("handrolled", capped)]
    with ScriptedModelServer() as server:
        where = Endpoint(ModelChoice(), {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url})
        here = _outcomes(lambda done: schedule.Here(1).run(plan, where, RunOptions(), done), plan)
        isolated = _outcomes(
            lambda done: isolation.run_isolated(plan, where, lambda _: env, 1, 1, done, RunOptions()), plan
        )
    assert [_shape(o) for o in isolated] == [_shape(o) for o in here]
    assert isolated[0].passed and isolated[1].result.stop_reason == "max_steps"


# --- which runners get an environment, and what is said first ------------------------------------------------

#: A runner that can run only in an environment of its own here (its framework is not in [all]); None if all are here.
OWN = next((name for name, info in registry.RUNNERS.items() if info.by_default and info.elsewhere()), None)
needs_own_runner = pytest.mark.skipif(OWN is None, reason="every runner's framework is installed here")


@needs_own_runner
def test_only_the_runners_that_need_an_environment_get_one(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    monkeypatch.setattr(environments, "ensure", lambda spec, **_: built.append(spec.label) or RunnerEnv(spec, Path()))
    env_of = environments.prepare([OWN, "langgraph", "langgraph@1.0.0"], everyone=False)
    assert built == [OWN, "langgraph (langgraph==1.0.0)"]  # its own framework, and a pinned version: not langgraph
    here = env_of("langgraph")
    assert here.here and here.python == Path(sys.executable) and not env_of(OWN).here
    built.clear()
    environments.prepare([OWN, "langgraph"])  # --isolate asked for every runner's
    assert built == [OWN, "langgraph"]


def _fake_create(events: list[str]):  # type: ignore[no-untyped-def]
    def create(spec: EnvSpec, path: Path) -> None:
        events.append(f"create {spec.label}")
        (path / "bin").mkdir(parents=True)

    return create


def test_creating_an_environment_says_which_runner_why_and_that_it_is_once_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    monkeypatch.setattr(environments, "_create", _fake_create(events))
    monkeypatch.setattr(environments, "_installed", lambda path: {})
    spec = environments.spec_for("langgraph", "1.0.0")
    on_creating = lambda s, path: events.append(environments.creating_line(s, path))  # noqa: E731
    environments.ensure(spec, tmp_path, on_creating=on_creating)
    assert len(events) == 2 and events[1] == f"create {spec.label}"
    line = events[0]
    assert line.startswith(f"creating the {spec.label} runner environment with {environments.installer()}")
    assert "--versions asks for langgraph==1.0.0" in line and "once" in line and str(tmp_path) in line
    events.clear()
    environments.ensure(spec, tmp_path, on_creating=on_creating)  # reused: nothing said, nothing built
    assert events == []


@needs_own_runner
def test_the_line_for_a_framework_outside_all_says_so() -> None:
    line = environments.creating_line(environments.spec_for(OWN), Path("/cache/x"))
    assert f"the {OWN} runner environment" in line and "not in looplab[all]" in line


def test_runner_environments_leave_out_uv_which_every_runner_extra_installs() -> None:
    _, by_extra = environments._own_requirements()
    assert all(
        any(r.startswith(f"looplab[{environments.INSTALLER_EXTRA}]") for r in by_extra[info.extra])
        for info in registry.RUNNERS.values()
    )
    assert not any(environments._name(r) == "uv" for r in environments.spec_for("pydantic_ai").requirements)


def test_a_cell_of_a_runner_that_needs_no_environment_runs_in_a_lane_of_this_interpreter() -> None:
    plan = [("handrolled", load_cases()["vip-compound"])]
    with ScriptedModelServer() as server:
        where = Endpoint(ModelChoice(), {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url})
        here = _outcomes(lambda done: schedule.Here(1).run(plan, where, RunOptions(), done), plan)
        env = RunnerEnv.this_one("handrolled")
        lane = _outcomes(
            lambda done: isolation.run_isolated(plan, where, lambda _: env, 1, 1, done, RunOptions()), plan
        )
    assert [_shape(o) for o in lane] == [_shape(o) for o in here]


# These two go through the CLI: they pass once `looplab/cli/__init__.py` checks the run's inputs before
# `_environments` and passes `everyone=` (whether --isolate was given) and `on_creating=` to `prepare`.


@needs_own_runner
def test_a_missing_key_is_refused_before_any_environment_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(environments.CACHE_ENV, str(tmp_path / "envs"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    events: list[str] = []
    monkeypatch.setattr(environments, "_create", _fake_create(events))
    assert main(["run", "--model", "openai:gpt-4.1-mini", "--runner", OWN]) == 2
    assert "OPENAI_API_KEY is not set" in capsys.readouterr().err and events == []


@needs_own_runner
def test_naming_a_runner_beside_one_that_needs_an_environment_builds_only_that_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(environments.CACHE_ENV, str(tmp_path / "envs"))

    def refused(spec: EnvSpec, path: Path) -> None:
        events.append(spec.label)
        raise EnvironmentFailed(f"the {spec.label} environment could not be created: offline")

    events: list[str] = []
    monkeypatch.setattr(environments, "_create", refused)
    main(["run", "--runner", OWN, "--runner", "handrolled", "--case", "vip-compound", "--quiet"])
    out = capsys.readouterr().out
    assert events == [OWN]
    assert f"creating the {OWN} runner environment" in out
