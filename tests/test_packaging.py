"""The wheel built from this checkout ships everything the cases need, and runs once installed.

The wheel is built the way a user would build it (`pip wheel` on the checkout, no network), with the
build and egg-info folders sent to a temporary directory, so the build leaves nothing in the checkout and
a stale `build/` there cannot leak old files into the wheel. It is then installed into a fresh venv,
and a case runs from outside the checkout with the installed package.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import shutil
import site
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).resolve().parent.parent
#: Folders (and files) whose every file (caches aside) the installed package reads at run time.
DATA_ROOTS = ("scenarios", "looplab/templates", "adapters/prices.json", "adapters/ts")
#: Path parts that mark a cache: never shipped, never expected.
CACHE_PARTS = frozenset({"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".hypothesis"})
CACHE_SUFFIXES = (".pyc", ".pyo")
#: The overlay whose files include a dotfile (`.env`), the kind a package-data glob skips.
SNOOP_OVERLAY = "variants/snoop"
#: The top-level packages the wheel installs and the case run imports.
PACKAGES = ("looplab", "scenarios", "adapters", "shared_tools")
MIN_SETUPTOOLS = (70, 1)
MIN_PIP = (23, 1)

BUILD_TIMEOUT = 300
VENV_TIMEOUT = 120
INSTALL_TIMEOUT = 180
RUN_TIMEOUT = 180


def _version(dist: str) -> tuple[int, int] | None:
    """The installed `dist`'s (major, minor) in this environment, or None when it is not installed."""
    try:
        match = re.match(r"(\d+)\.(\d+)", importlib.metadata.version(dist))
    except importlib.metadata.PackageNotFoundError:
        return None
    return (int(match[1]), int(match[2])) if match else (0, 0)


def _build_unavailable() -> str | None:
    """Why the wheel cannot be built here the way the tests build it, or None.

    The build uses this environment (no build isolation, no network): it needs setuptools>=70.1 (which
    has bdist_wheel built in) and a pip that passes `--config-settings` to the backend and has `--python`.
    """
    for dist, minimum, fix in (
        ("setuptools", MIN_SETUPTOOLS, "pip install -e '.[dev]'"),
        ("pip", MIN_PIP, "pip install --upgrade pip"),
    ):
        found = _version(dist)
        if found is None or found < minimum:
            have = "not installed" if found is None else f"{found[0]}.{found[1]} installed"
            need = ".".join(map(str, minimum))
            return f"cannot build the wheel: needs {dist}>={need} in {sys.prefix} ({have}); {fix}"
    return None


UNAVAILABLE = _build_unavailable()
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")


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


def _is_cache(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return any(p in CACHE_PARTS for p in parts) or path.endswith(CACHE_SUFFIXES)


def _expected_files() -> set[str]:
    """Every file under DATA_ROOTS that git tracks (and that exists), caches aside, as wheel paths."""
    if shutil.which("git") is not None:
        proc = subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--", *DATA_ROOTS],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode == 0 and proc.stdout:
            return {p for p in proc.stdout.split("\0") if p and not _is_cache(p) and (REPO / p).is_file()}
    # Not a git checkout (or no git): every file on disk under the roots, caches aside.
    found = set()
    for root in DATA_ROOTS:
        top = REPO / root
        for path in [top] if top.is_file() else top.rglob("*"):
            rel = path.relative_to(REPO).as_posix()
            if path.is_file() and not _is_cache(rel):
                found.add(rel)
    return found


@dataclass(frozen=True)
class Build:
    wheel: Path
    names: frozenset[str]


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """The wheel, built from the checkout with this interpreter, its build folders outside the checkout."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel_dir, build_base, egg_base = tmp / "dist", tmp / "build", tmp / "egg-base"
    egg_base.mkdir()
    # setuptools appends `--build-option` to `bdist_wheel`: the extra commands set the build folder
    # (`build/` by default, whose leftovers would end up in the wheel) and the egg-info folder (the
    # checkout's root by default) before bdist_wheel runs them.
    build_option = shlex.join(["build", "--build-base", str(build_base), "egg_info", "--egg-base", str(egg_base)])
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--no-cache-dir",
            "--config-settings",
            f"--build-option={build_option}",
            "-w",
            wheel_dir,
            REPO,
        ],
        cwd=tmp,
        timeout=BUILD_TIMEOUT,
    )
    # The redirection took effect: the build and the egg-info happened here, not in the checkout.
    assert (build_base / "lib").is_dir(), f"the build did not use {build_base}"
    assert list(egg_base.glob("*.egg-info")), f"egg_info did not write to {egg_base}"
    wheels = list(wheel_dir.glob("looplab-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {wheel_dir}, found {wheels}"
    with zipfile.ZipFile(wheels[0]) as zf:
        names = frozenset(n for n in zf.namelist() if not n.endswith("/"))
    return Build(wheels[0], names)


def _snoop_cases() -> list[str]:
    """Ids of the cases whose overlay is the snoop variant (the one with a `.env`)."""
    ids = []
    for path in sorted((REPO / "scenarios").glob("*/cases/*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        if data.get("overlay") == SNOOP_OVERLAY:
            ids.append(data["id"])
    return ids


def test_wheel_ships_every_scenario_file(build: Build) -> None:
    expected = _expected_files()
    assert "scenarios/invoice_discount/variants/snoop/.env" in expected, "the snoop overlay's .env is not tracked"
    missing = sorted(expected - build.names)
    assert not missing, f"{build.wheel.name} misses files the cases read:\n" + "\n".join(missing)
    caches = sorted(n for n in build.names if _is_cache(n))
    assert not caches, f"{build.wheel.name} ships caches:\n" + "\n".join(caches)


def test_installed_wheel_runs_a_case_outside_the_checkout(build: Build, tmp_path: Path) -> None:
    cases = _snoop_cases()
    assert cases, f"no case in scenarios/*/cases uses overlay = {SNOOP_OVERLAY!r}"
    case = cases[0]

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp_path, timeout=VENV_TIMEOUT)
    python = venv / "bin" / "python"
    # This environment's pip installs into the new venv; the wheel alone, from the file, no index.
    _run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", build.wheel],
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

    probe = "import json, importlib; print(json.dumps({m: importlib.import_module(m).__file__ for m in %r}))"
    files = json.loads(_run([python, "-c", probe % (PACKAGES,)], cwd=tmp_path, timeout=RUN_TIMEOUT).stdout)
    for module, file in files.items():
        where = Path(file).resolve()
        assert where.is_relative_to(purelib.resolve()), f"{module} imported from {where}, not from {purelib}"
        assert not where.is_relative_to(REPO), f"{module} imported from the checkout: {where}"

    out = tmp_path / "out"
    _run(
        [python, "-m", "looplab.cli", "run", "--case", case, "--runner", "handrolled", "--quiet", "--out", out],
        cwd=tmp_path,
        timeout=RUN_TIMEOUT,
    )
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))["results"]
    assert [(r["case"], r["runner"]) for r in results] == [(case, "handrolled")]
    assert results[0]["stop_reason"] == "final_answer", results[0]["stop_detail"]
