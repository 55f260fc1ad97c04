"""looplab installs under one import name, ships everything it reads, and runs once installed.

Two tiers. The fast tests check the package as imported here: `import looplab` is light (its public
names load on first use), every public name resolves, and `--version` prints the version.

The `full` tests build the wheel the way a user would (`pip wheel` on the checkout, no network), with the
build and egg-info folders sent to a temporary directory, so the build leaves nothing in the checkout and
a stale `build/` there cannot leak old files into the wheel. They check what it holds (one top-level name,
every file the cases read, the licence and metadata), then install it into a fresh venv beside another
package that owns the generic top-level names `adapters` and `scenarios`, and run a case, and a team's suite
named with `--cases`, from outside the checkout with the installed package.
"""

from __future__ import annotations

import email.parser
import importlib
import importlib.metadata
import importlib.util
import itertools
import json
import os
import re
import shlex
import site
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import pytest

import looplab
from looplab import cli
from looplab.measure import release_check
from tests.paths import REPO
from tests.team_suite import CASES as TEAM_CASES
from tests.team_suite import write_team_suite

REPO = REPO
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
#: Files the installed package reads at run time, by wheel path: a sample the expected contents must cover.
RUNTIME_DATA = (
    "looplab/py.typed",
    "looplab/views/templates/report.html.j2",
    "looplab/adapters/contract/prices.json",
    "looplab/adapters/runners/ts/package.json",
    "looplab/adapters/runners/ts/package-lock.json",
    "looplab/scenarios/system_prompt.txt",
    "looplab/scenarios/invoice_discount/cases/vip-compound.toml",
    "looplab/scenarios/invoice_discount/variants/snoop/.env",
)
#: Path parts that mark a cache: never shipped, never expected.
CACHE_PARTS = frozenset({"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".hypothesis"})
CACHE_SUFFIXES = (".pyc", ".pyo")
#: The overlay whose files include a dotfile (`.env`), the kind a package-data glob skips.
SNOOP_OVERLAY = "../variants/snoop"
#: The generic top-level names another package installs beside looplab in the install test.
FOREIGN_MODULES = ("adapters", "scenarios")
#: The case the README runs first.
DEFAULT_CASE = "vip-compound"
#: pip with `--python` and `--config-settings` passed to the backend.
MIN_PIP = (23, 1)
#: setuptools with bdist_wheel built in; the build system's own floor (read from pyproject.toml) may be higher.
MIN_SETUPTOOLS_FOR_BDIST_WHEEL = (70, 1)

BUILD_TIMEOUT = 300
VENV_TIMEOUT = 120
INSTALL_TIMEOUT = 180
RUN_TIMEOUT = 180
PROBE_TIMEOUT = 60


def _version(dist: str) -> tuple[int, int] | None:
    """The installed `dist`'s (major, minor) in this environment, or None when it is not installed."""
    try:
        match = re.match(r"(\d+)\.(\d+)", importlib.metadata.version(dist))
    except importlib.metadata.PackageNotFoundError:
        return None
    return (int(match[1]), int(match[2])) if match else (0, 0)


def _min_setuptools() -> tuple[int, int]:
    """The setuptools the build needs: the build system's `setuptools>=X.Y`, and bdist_wheel built in."""
    floor = MIN_SETUPTOOLS_FOR_BDIST_WHEEL
    for requirement in PYPROJECT["build-system"]["requires"]:
        match = re.fullmatch(r"\s*setuptools\s*>=\s*(\d+)(?:\.(\d+))?.*", requirement)
        if match:
            floor = max(floor, (int(match[1]), int(match[2] or 0)))
    return floor


def _build_unavailable() -> str | None:
    """Why the wheel cannot be built here the way the tests build it, or None.

    The build uses this environment (no build isolation, no network): it needs the setuptools the build
    system asks for (with bdist_wheel built in) and a pip that passes `--config-settings` to the backend
    and has `--python`.
    """
    for dist, minimum, fix in (
        ("setuptools", _min_setuptools(), "pip install -e '.[dev]'"),
        ("pip", MIN_PIP, "pip install --upgrade pip"),
    ):
        found = _version(dist)
        if found is None or found < minimum:
            have = "not installed" if found is None else f"{found[0]}.{found[1]} installed"
            need = ".".join(map(str, minimum))
            return f"cannot build the wheel: needs {dist}>={need} in {sys.prefix} ({have}); {fix}"
    return None


UNAVAILABLE = _build_unavailable()
F = TypeVar("F", bound=Callable[..., Any])


def wheel_test(func: F) -> F:
    """A test that builds the wheel: the `full` tier, skipped (saying why) where the build cannot run."""
    skip = pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")
    return pytest.mark.full(skip(func))  # type: ignore[no-any-return]


def _env() -> dict[str, str]:
    """This environment, minus what could put the checkout on another interpreter's path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def _run(cmd: list[str | Path], *, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run `cmd`, bounded by `timeout`; a non-zero exit fails the test with the command's output."""
    argv = [str(c) for c in cmd]
    try:
        proc = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"timed out after {timeout}s: {shlex.join(argv)}\n{exc.stdout}\n{exc.stderr}")
    assert proc.returncode == 0, (
        f"exit {proc.returncode}: {shlex.join(argv)}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )
    return proc


# --- the package as imported here ------------------------------------------------------------------------------

#: Prints, as JSON, the modules that importing looplab the way `argv[1]` says added beyond the interpreter's own.
IMPORT_PROBE = """
import json, sys
before = set(sys.modules)
exec(sys.argv[1])
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def _added_modules(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running `code` that it did not hold at start."""
    proc = _run([sys.executable, "-c", IMPORT_PROBE, code], cwd=REPO, timeout=PROBE_TIMEOUT)
    return json.loads(proc.stdout.splitlines()[-1])


def _not_stdlib(modules: list[str]) -> list[str]:
    """`modules` less the standard library's (sysconfig's per-platform data module among them)."""
    return [
        m for m in modules if m.partition(".")[0] not in sys.stdlib_module_names and not m.startswith("_sysconfigdata")
    ]


def test_import_looplab_loads_only_its_own_init() -> None:
    added = _added_modules("import looplab")
    assert _not_stdlib(added) == ["looplab"], "import looplab loads more than its own __init__"
    # Not even the metadata reader: the version is read when it is asked for.
    assert "importlib.metadata" not in added


def test_a_runner_process_import_loads_no_harness() -> None:
    added = _added_modules("import looplab.adapters.contract.limits")
    above = [m for m in added if m.startswith(("looplab.run", "looplab.records", "looplab.views", "looplab.cli"))]
    assert not above, f"importing the contract loads {above}"
    assert "looplab.run.harness" not in added
    from looplab.adapters.registry import RUNNERS

    frameworks = {module.partition(".")[0] for info in RUNNERS.values() for module in info.requires}
    assert frameworks, "the registry names no framework module"
    loaded = sorted({m.partition(".")[0] for m in added} & frameworks)
    assert not loaded, f"importing the contract loads frameworks: {loaded}"


def test_every_public_name_resolves_to_its_home() -> None:
    homes = {
        "Case": "looplab.scenarios.cases:Case",
        "Endpoint": "looplab.run.harness:Endpoint",
        "Limits": "looplab.adapters.contract.limits:Limits",
        "LooplabError": "looplab.adapters.contract.errors:LooplabError",
        "MissingExtra": "looplab.adapters.contract.errors:MissingExtra",
        "ModelChoice": "looplab.run.harness:ModelChoice",
        "ModelSpec": "looplab.adapters.contract.model:ModelSpec",
        "RunHandle": "looplab.run.handle:RunHandle",
        "RunOutcome": "looplab.records.outcome:RunOutcome",
        "RunResult": "looplab.adapters.contract.result:RunResult",
        "RunOptions": "looplab.run.options:RunOptions",
        "LooplabException": "looplab.adapters.contract.errors:LooplabException",
        "StopReason": "looplab.adapters.contract.limits:StopReason",
        "endpoint": "looplab.run.harness:endpoint",
        "load_cases": "looplab.scenarios.cases:load_cases",
        "load_runner": "looplab.adapters.registry:load",
        "run_one": "looplab.run.harness:run_one",
        "start": "looplab.run.handle:start",
    }
    assert sorted(looplab.__all__) == sorted([*homes, "__version__"])
    for name, home in homes.items():
        module, _, attribute = home.partition(":")
        assert getattr(looplab, name) is getattr(importlib.import_module(module), attribute), name
    assert set(looplab.__all__) <= set(dir(looplab))
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        looplab.nothing_here  # noqa: B018 - the attribute access is what is tested


@pytest.mark.full  # a whole run, the framework's import included: seconds
def test_the_docstring_example_runs_one_case() -> None:
    """The usage example in looplab's docstring, run as written: one case, one runner, the scripted model."""
    after = (looplab.__doc__ or "").split("::\n", 1)[1].splitlines()
    block = itertools.takewhile(lambda line: not line or line.startswith("    "), after)
    code = textwrap.dedent("\n".join(block))
    assert "looplab.run_one(" in code, code
    if importlib.util.find_spec("anthropic") is None:
        pytest.skip("the example's runner, handrolled, needs the [anthropic] extra")
    proc = _run([sys.executable, "-c", code], cwd=REPO, timeout=RUN_TIMEOUT)
    assert proc.stdout.strip() == "final_answer", proc.stdout


def test_version_is_the_distributions_or_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    assert looplab._version() == importlib.metadata.version("looplab")

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert looplab._version() == looplab.UNKNOWN_VERSION


def test_version_option_prints_the_version_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"looplab {importlib.metadata.version('looplab')}\n"


def test_version_option_loads_no_more_of_looplab_than_help() -> None:
    run_main = "from looplab.cli import main\ntry:\n    main([{!r}])\nexcept SystemExit:\n    pass"
    for option in ("--help", "--version"):
        added = _added_modules(run_main.format(option))
        # The CLI's own modules build its parser (one per command group); nothing else of looplab is loaded.
        beyond_cli = [m for m in added if m.startswith("looplab") and not m.startswith("looplab.cli.")]
        assert sorted(beyond_cli) == ["looplab", "looplab.cli"], option
        assert not [m for m in _not_stdlib(added) if not m.startswith("looplab")], option


# --- the wheel -------------------------------------------------------------------------------------------------


def _is_cache(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return any(p in CACHE_PARTS for p in parts) or path.endswith(CACHE_SUFFIXES)


@dataclass(frozen=True)
class Build:
    wheel: Path
    names: frozenset[str]
    dist_info: str
    metadata: Message

    def read(self, name: str) -> bytes:
        with zipfile.ZipFile(self.wheel) as zf:
            return zf.read(name)


def _pip_wheel(source: Path, out: Path, cwd: Path, *options: str) -> None:
    """`pip wheel` of `source` into `out`, offline, with this interpreter's setuptools and nothing cached."""
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--no-cache-dir"]
    _run([*pip, *options, "-w", out, source], cwd=cwd, timeout=BUILD_TIMEOUT)


def _build_option(build_base: Path, egg_base: Path) -> str:
    """The `--build-option` that sends the build folder and the egg-info folder to `build_base` and `egg_base`."""
    return shlex.join(["build", "--build-base", str(build_base), "egg_info", "--egg-base", str(egg_base)])


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """The wheel, built from the checkout with this interpreter, its build folders outside the checkout."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel_dir, build_base, egg_base = tmp / "dist", tmp / "build", tmp / "egg-base"
    egg_base.mkdir()
    # setuptools appends `--build-option` to `bdist_wheel`: the extra commands set the build folder
    # (`build/` by default, whose leftovers would end up in the wheel) and the egg-info folder (the
    # checkout's root by default) before bdist_wheel runs them.
    _pip_wheel(REPO, wheel_dir, tmp, "--config-settings", f"--build-option={_build_option(build_base, egg_base)}")
    # The redirection took effect: the build and the egg-info happened here, not in the checkout.
    assert (build_base / "lib").is_dir(), f"the build did not use {build_base}"
    assert list(egg_base.glob("*.egg-info")), f"egg_info did not write to {egg_base}"
    wheels = list(wheel_dir.glob("looplab-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {wheel_dir}, found {wheels}"
    with zipfile.ZipFile(wheels[0]) as zf:
        names = frozenset(n for n in zf.namelist() if not n.endswith("/"))
        (dist_info,) = {PurePosixPath(n).parts[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
        metadata = email.parser.BytesParser().parsebytes(zf.read(f"{dist_info}/METADATA"))
    return Build(wheels[0], names, dist_info, metadata)


@wheel_test
def test_wheel_installs_one_top_level_name(build: Build) -> None:
    tops = {PurePosixPath(n).parts[0] for n in build.names}
    assert tops == {"looplab", build.dist_info}, f"{build.wheel.name} installs more than looplab: {sorted(tops)}"
    assert build.read(f"{build.dist_info}/top_level.txt").decode().split() == ["looplab"]
    # The tests stay in the checkout, at any depth of the package (the fixture repos' own tests are data).
    assert not [n for n in build.names if n.startswith(("tests/", "looplab/tests/"))]
    assert "looplab/py.typed" in build.names


@wheel_test
def test_wheel_ships_every_file_of_the_package(build: Build) -> None:
    # What the wheel must hold, read from pyproject's layout as the release check reads it (`nox -s release`).
    expected, stale = release_check.wheel_expected(REPO)
    assert not stale, f"package-data globs that match nothing: {stale}"
    assert "looplab/scenarios/invoice_discount/variants/snoop/.env" in expected, "the snoop overlay's .env is untracked"
    assert set(RUNTIME_DATA) <= expected, f"not expected in the wheel: {sorted(set(RUNTIME_DATA) - expected)}"
    missing = sorted(expected - build.names)
    assert not missing, f"{build.wheel.name} misses files of the package:\n" + "\n".join(missing)
    caches = sorted(n for n in build.names if _is_cache(n))
    assert not caches, f"{build.wheel.name} ships caches:\n" + "\n".join(caches)


#: What setuptools notes on every editable install of this layout, whatever the configuration: the package-dir
#: mapping (`adapters/` installed as `looplab.adapters`) takes its meta path finder, whose caveat it prints.
EDITABLE_NOTICE = "Editable installation."


def _backend_warnings(hook: str, out: Path, config_settings: dict[str, str] | None = None) -> list[str]:
    """The warnings the build backend emits running `hook` on the checkout, as pip relays them to the user.

    pyproject_hooks is what pip calls the backend through: it runs the hook in a child process (here this
    interpreter, bounded) and re-emits each warning the backend raised as a `BuildBackendWarning`.
    """
    hooks = pytest.importorskip("pyproject_hooks", reason="the [dev] extra's `build` brings pyproject_hooks")

    def runner(cmd: list[str], cwd: str | None = None, extra_environ: dict[str, str] | None = None) -> None:
        env = {**_env(), **(extra_environ or {})}
        subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=True, timeout=BUILD_TIMEOUT)

    caller = hooks.BuildBackendHookCaller(str(REPO), PYPROJECT["build-system"]["build-backend"], runner=runner)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        getattr(caller, hook)(str(out), config_settings)
    return [str(w.message) for w in caught if issubclass(w.category, hooks.BuildBackendWarning)]


@wheel_test
@pytest.mark.parametrize("hook", ["build_wheel", "build_editable"])
def test_building_and_installing_print_no_setuptools_warning(hook: str, tmp_path: Path) -> None:
    """`pip install .`, `pip wheel .` and `pip install -e .` print no setuptools warning: in particular none of
    the "Package ... is absent from the `packages` configuration" kind, which a data folder with an importable
    name (a suite's fixture repo or variant) draws unless pyproject.toml keeps setuptools from reading it as one."""
    build_base, egg_base, out = tmp_path / "build", tmp_path / "egg-base", tmp_path / "out"
    egg_base.mkdir()
    out.mkdir()
    settings = {"--build-option": _build_option(build_base, egg_base)} if hook == "build_wheel" else None
    said = _backend_warnings(hook, out, settings)
    assert list(out.glob("looplab-*.whl")), f"{hook} built no wheel in {out}"
    unexpected = [w for w in said if not (hook == "build_editable" and w.startswith(EDITABLE_NOTICE))]
    assert not unexpected, f"setuptools warns on {hook}:\n" + "\n\n".join(unexpected)


@wheel_test
def test_wheel_metadata_and_licence(build: Build) -> None:
    project, meta = PYPROJECT["project"], build.metadata
    # The version is the git tag's (setuptools-scm), so the metadata, the dist-info and the wheel's name agree on it.
    assert meta["Name"] == "looplab" and "version" in project["dynamic"]
    assert build.dist_info == f"looplab-{meta['Version']}.dist-info"
    assert build.wheel.name.startswith(f"looplab-{meta['Version']}-")
    assert meta["Summary"] == project["description"]
    assert meta["License-Expression"] == "MIT"
    classifiers = meta.get_all("Classifier") or []
    assert classifiers == project["classifiers"]
    for wanted in ("Intended Audience :: Developers", "Typing :: Typed", "Programming Language :: Python :: 3.11"):
        assert wanted in classifiers
    # PEP 639: the licence is the expression and its file; a licence classifier beside them is refused.
    assert not [c for c in classifiers if c.startswith("License ::")]
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert sorted(urls) == ["Documentation", "Homepage", "Issues", "Source"]
    assert all(u.startswith("https://github.com/looplab-dev/looplab") for u in urls.values()), urls
    assert meta["Keywords"]
    assert meta.get_all("License-File") == ["LICENSE"]
    shipped = build.read(f"{build.dist_info}/licenses/LICENSE").decode()
    assert shipped == (REPO / "LICENSE").read_text(encoding="utf-8")
    assert shipped.startswith("MIT License\n")


def _snoop_cases() -> list[str]:
    """Ids of the cases whose overlay is the snoop variant (the one with a `.env`)."""
    ids = []
    for path in sorted((REPO / "scenarios").glob("*/cases/*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        if data.get("overlay") == SNOOP_OVERLAY:
            ids.append(data["id"])
    return ids


def _foreign_wheel(tmp: Path) -> Path:
    """A wheel of another package whose top-level packages are `adapters` and `scenarios`."""
    src = tmp / "foreign-src"
    for module in FOREIGN_MODULES:
        (src / module).mkdir(parents=True)
        (src / module / "__init__.py").write_text(f'OWNER = "foreign"\nNAME = "{module}"\n', encoding="utf-8")
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "foreign-generic-names"\nversion = "1.0"\n\n'
        f"[tool.setuptools]\npackages = {json.dumps(list(FOREIGN_MODULES))}\n",
        encoding="utf-8",
    )
    out = tmp / "foreign-dist"
    _pip_wheel(src, out, tmp)
    (wheel,) = out.glob("foreign_generic_names-*.whl")
    return wheel


@wheel_test
def test_installed_wheel_runs_beside_a_package_with_generic_names(build: Build, tmp_path: Path) -> None:
    cases = _snoop_cases()
    assert cases, f"no case in scenarios/*/cases uses overlay = {SNOOP_OVERLAY!r}"

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp_path, timeout=VENV_TIMEOUT)
    python, looplab_command = venv / "bin" / "python", venv / "bin" / "looplab"
    # This environment's pip installs into the new venv: the two wheels alone, from files, no index.
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "install",
            "--no-deps",
            "--no-index",
            build.wheel,
            _foreign_wheel(tmp_path),
        ],
        cwd=tmp_path,
        timeout=INSTALL_TIMEOUT,
    )

    # The dependencies come from this environment: its site-packages go on the new venv's path through a
    # .pth file. Those folders are not site dirs of the new venv, so their own .pth files (among them the
    # editable install of the checkout) are not processed. Written after the install, so pip above did
    # not see this environment's looplab as installed.
    purelib = Path(
        _run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=tmp_path, timeout=RUN_TIMEOUT
        ).stdout.strip()
    )
    ours = [*site.getsitepackages(), sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    if site.ENABLE_USER_SITE:
        ours.append(site.getusersitepackages())
    dirs = list(dict.fromkeys(str(Path(d).resolve()) for d in ours if Path(d).is_dir()))
    (purelib / "_looplab_test_deps.pth").write_text("".join(f"{d}\n" for d in dirs), encoding="utf-8")

    # Another directory than the checkout and the venv: nothing there is on the path by accident.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    installed = ("looplab", "looplab.adapters", "looplab.scenarios", "looplab.shared_tools", *FOREIGN_MODULES)
    probe = (
        "import json, importlib\n"
        "mods = {m: importlib.import_module(m) for m in %r}\n"
        "print(json.dumps({m: [mod.__file__, getattr(mod, 'OWNER', None)] for m, mod in mods.items()}))"
    )
    found = json.loads(_run([python, "-c", probe % (installed,)], cwd=elsewhere, timeout=RUN_TIMEOUT).stdout)
    for module, (file, owner) in found.items():
        where = Path(file).resolve()
        assert where.is_relative_to(purelib.resolve()), f"{module} imported from {where}, not from {purelib}"
        assert not where.is_relative_to(REPO), f"{module} imported from the checkout: {where}"
        assert (owner == "foreign") is (module in FOREIGN_MODULES), f"{module} is not its owner's: {where}"

    version = f"looplab {build.metadata['Version']}\n"
    for command in ([looplab_command, "--version"], [python, "-m", "looplab", "--version"]):
        assert _run(command, cwd=elsewhere, timeout=RUN_TIMEOUT).stdout == version

    # The README's first run, and a case whose overlay holds a dotfile, through the installed command.
    out = tmp_path / "out"
    run = [looplab_command, "run", "--case", DEFAULT_CASE, "--case", cases[0], "--runner", "handrolled"]
    _run([*run, "--quiet", "--out", out], cwd=elsewhere, timeout=RUN_TIMEOUT)
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))["results"]
    assert sorted((r["case"], r["runner"]) for r in results) == sorted(
        [(DEFAULT_CASE, "handrolled"), (cases[0], "handrolled")]
    )
    for r in results:
        assert r["stop_reason"] == "final_answer", (r["case"], r["stop_detail"])

    # A team's suite, outside the checkout and the venv, named with --cases.
    team = write_team_suite(tmp_path)
    team_out = tmp_path / "team-out"
    own = [looplab_command, "run", "--cases", team, "--runner", "handrolled", "--quiet", "--out", team_out]
    _run(own, cwd=elsewhere, timeout=RUN_TIMEOUT)
    cells = json.loads((team_out / "results.json").read_text(encoding="utf-8"))["cells"]
    assert sorted((c["case"], c["passed"]) for c in cells) == sorted((case, True) for case in TEAM_CASES)


#: How the description and the package's docstring write a count of runners.
NUMBER_WORDS = dict(
    enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty twenty-one twenty-two".split()
    )
)


def test_the_description_and_the_docstring_count_the_runners_the_registry_ships() -> None:
    from looplab.adapters.registry import RUNNERS

    shipped = sum(1 for info in RUNNERS.values() if info.by_default)  # the external runner is "your own agent"
    said = NUMBER_WORDS[shipped]
    assert f" {said} agent runners " in PYPROJECT["project"]["description"]
    assert f"{said.capitalize()} runners " in (looplab.__doc__ or "")
