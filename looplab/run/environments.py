"""Runner environments: each runner in a virtual environment of its own, for frameworks that cannot share one.

CrewAI pins `openai<3` and `pydantic<2.13`; looplab's OpenAI runners use `openai` 3.x. So a runner's
environment holds looplab's own dependencies plus that runner's extra and nothing else, created on
first use with `uv` (or `venv` and `pip` where `uv` is missing) under a cache folder keyed by the
Python, the platform and the requirements, and reused afterwards. `--versions RUNNER=SPEC` pins the
runner's framework (`langgraph=1.0.0`), which is another key and so another environment.

The environment does not install looplab itself: its processes import looplab from this one's
(`PYTHONPATH`, see `source_root`), so every environment runs exactly the code of the process that started it.

Only the runners that need an environment get one (`needs_own`): a pinned version, a framework that cannot share
this environment, or every runner when `--isolate` asks for that; the others' cells run in lanes of this
interpreter (`RunnerEnv.this_one`). Creating one says first what it creates and why (`creating_line`). An
environment is complete once its marker file is written; a failed or interrupted creation leaves no
marker and is redone. Creation holds a file lock, so two evals never build the same one at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import looplab
from looplab.adapters import registry
from looplab.adapters.contract import files
from looplab.adapters.contract.errors import EnvironmentFailed, LooplabError

__all__ = [
    "EnvSpec",
    "RunnerEnv",
    "creating_line",
    "ensure",
    "labels",
    "parse_pins",
    "prepare",
    "source_root",
    "spec_for",
]

CACHE_ENV = "LOOPLAB_ENV_CACHE"
#: Written last: an environment without it is incomplete.
MARKER = "looplab-env.json"
#: The repository folders a source tree places under the `looplab` package, as the build does.
PLACED_UNDER_LOOPLAB = ("adapters", "scenarios", "shared_tools")
#: How an environment is built; part of its key, so a change in how rebuilds every environment.
LAYOUT = "2: bytecode compiled"
#: The extra that installs uv, which every runner extra names: a runner environment creates none, so it is left out.
INSTALLER_EXTRA = "isolate"
#: Seconds any one creation step (the venv, the install, the listing) may take.
STEP_TIMEOUT_S = 900.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class EnvSpec:
    """What one runner environment holds: looplab's requirements, the runner's extra, and any pins."""

    runner: str
    requirements: tuple[str, ...]
    pins: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The cache key: the interpreter, the platform and the requirements."""
        text = "\n".join([LAYOUT, sys.version, platform.platform(), *self.requirements])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        """The runner, with its pins when it has any: how the eval names this environment's runs."""
        return self.runner if not self.pins else f"{self.runner} ({', '.join(self.pins)})"


@dataclass(frozen=True)
class RunnerEnv:
    """A created runner environment: where its interpreter is, and what it installed."""

    spec: EnvSpec
    path: Path
    packages: dict[str, str] = field(default_factory=dict)
    #: Seconds spent creating it in this process; None when it was reused from the cache.
    created_s: float | None = None
    #: Whether it is this process's own environment (a runner that needs none of its own runs here).
    here: bool = False

    @classmethod
    def this_one(cls, runner: str) -> RunnerEnv:
        """This process's environment, for a runner that needs none of its own: its lanes run this interpreter."""
        return cls(EnvSpec(runner, ()), Path(sys.prefix), here=True)

    @property
    def python(self) -> Path:
        if self.here:
            return Path(sys.executable)
        return self.path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")

    def child_env(self) -> dict[str, str]:
        """The environment for a process of this interpreter: looplab's source first on its path."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["PYTHONPATH"] = str(source_root())
        # Not the working folder first: a source tree's own `looplab/` there lacks what the build places under it.
        env["PYTHONSAFEPATH"] = "1"
        env["VIRTUAL_ENV"] = str(self.path)
        return env


def cache_root() -> Path:
    """Where runner environments live: `$LOOPLAB_ENV_CACHE`, else `~/.cache/looplab/envs`."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "looplab" / "envs")


def _make_cache(folder: Path) -> Path:
    """`folder` (the cache, or a folder in it) created if missing; one line naming it and `LOOPLAB_ENV_CACHE` if not."""
    return files.make_folder(
        folder, what="runner environment cache", hint=f"point {CACHE_ENV} at a folder looplab may write"
    )


def parse_pins(texts: Sequence[str]) -> dict[str, list[str]]:
    """`--versions` values (`RUNNER=SPEC`) by runner; a runner may be given several versions, each its own."""
    pins: dict[str, list[str]] = {}
    for text in texts:
        runner, sep, spec = text.partition("=")
        runner, spec = runner.strip(), spec.strip()
        if not sep or not spec or runner not in registry.RUNNERS:
            known = ", ".join(registry.RUNNERS)
            raise LooplabError(
                f"--versions takes RUNNER=SPEC with a known runner ({known}), e.g. langgraph=1.0.0; got {text!r}"
            )
        pins.setdefault(runner, []).append(spec)
    return pins


def labels(runners: Sequence[str], pins: dict[str, list[str]]) -> list[str]:
    """The runners as the eval names them: `langgraph@1.0.0` for each pinned version, the plain name otherwise.

    A pinned runner that was not asked for is added: naming its version asks for it.
    """
    named = [*runners, *(r for r in pins if r not in runners)]
    return [label for r in named for label in ([f"{r}@{pin}" for pin in pins[r]] if r in pins else [r])]


def runner_of(label: str) -> tuple[str, str | None]:
    """`langgraph@1.0.0` -> (`langgraph`, `1.0.0`); a plain runner name has no pin."""
    runner, sep, pin = label.partition("@")
    return runner, (pin if sep else None)


def needs_own(label: str, everyone: bool = False) -> bool:
    """Whether the runner label runs in an environment of its own: `everyone` (`--isolate` asked for it), a pinned
    version (`langgraph@1.0.0`), or a framework that cannot share this environment and is not installed in it."""
    runner, pin = runner_of(label)
    return everyone or pin is not None or registry.RUNNERS[runner].elsewhere()


def prepare(
    names: Sequence[str],
    on_created: Callable[[RunnerEnv], None] | None = None,
    *,
    everyone: bool = True,
    on_creating: Callable[[EnvSpec, Path], None] | None = None,
) -> Callable[[str], RunnerEnv]:
    """Each runner label's environment, created where the cache lacks it (`on_creating` hears of each before,
    `on_created` after).

    With `everyone` false, only the labels `needs_own` names get an environment of their own; the others get
    this one (`RunnerEnv.this_one`). Returns the lookup; for a label whose environment could not be created it
    raises that `EnvironmentFailed`, so that runner's cells fail with it and the other runners still run.
    """
    envs: dict[str, RunnerEnv | EnvironmentFailed] = {}
    for name in names:
        if not needs_own(name, everyone):
            envs[name] = RunnerEnv.this_one(runner_of(name)[0])
            continue
        try:
            env = ensure(spec_for(*runner_of(name)), on_creating=on_creating)
        except EnvironmentFailed as exc:
            envs[name] = exc
            continue
        if env.created_s is not None and on_created is not None:
            on_created(env)
        envs[name] = env

    def env_of(name: str) -> RunnerEnv:
        found = envs[name]
        if isinstance(found, EnvironmentFailed):
            raise found
        return found

    return env_of


def spec_for(runner: str, pin: str | None = None) -> EnvSpec:
    """The environment for `runner`; `pin` a version (`1.0.0`) or specifier (`>=1.1,<1.2`) of its framework,
    or `DIST==VERSION` for another distribution. Several, separated by `;`, go into the one environment: an older
    release with the companion it needs (`1.0.10;langgraph-prebuilt==1.0.5`, where the newest companion needs a
    newer framework)."""
    info = registry.RUNNERS[runner]
    requirements = _requirements({info.extra})
    if pin is None:
        return EnvSpec(runner, tuple(sorted(requirements)))
    framework = _name(_extra_requirements(info.extra)[0])
    constraints = []
    for one in filter(None, (p.strip() for p in pin.split(";"))):
        named = _NAME.match(one)
        dist, rest = (named.group(0), one[named.end() :]) if named and not one[0].isdigit() else (framework, one)
        constraint = f"{dist}{rest if rest[:1] in '=<>!~' else '==' + rest}"
        # The extra's own requirement may carry extras of its own (`openai-agents[litellm]`): keep them.
        extras = next(
            (m.group(0) for r in requirements if _name(r) == _normal(dist) and (m := re.search(r"\[.*?\]", r))), ""
        )
        requirements = [r for r in requirements if _name(r) != _normal(dist)] + [
            constraint.replace(dist, dist + extras, 1)
        ]
        constraints.append(constraint)
    return EnvSpec(runner, tuple(sorted(requirements)), tuple(constraints))


def ensure(
    spec: EnvSpec, cache: Path | None = None, on_creating: Callable[[EnvSpec, Path], None] | None = None
) -> RunnerEnv:
    """The environment for `spec`, created now if the cache does not hold it complete (`on_creating` hears first)."""
    path = (cache or cache_root()) / f"{spec.runner}-{spec.key}"
    if (found := _ready(spec, path)) is not None:
        return found
    _make_cache(path.parent)
    with files.locked(path.parent / f"{path.name}.lock"):
        if (found := _ready(spec, path)) is not None:  # another process built it while this one waited
            return found
        if on_creating is not None:
            on_creating(spec, path)
        started = time.monotonic()
        shutil.rmtree(path, ignore_errors=True)
        _create(spec, path)
        packages = _installed(path)
        files.write_text(path / MARKER, json.dumps({"requirements": spec.requirements, "packages": packages}, indent=1))
        return RunnerEnv(spec, path, packages, created_s=round(time.monotonic() - started, 2))


def installer() -> str:
    """What creates environments here: `uv` (seconds), or `pip` where uv is missing (minutes for a large framework)."""
    return "uv" if _uv() is not None else "pip"


def creating_line(spec: EnvSpec, path: Path) -> str:
    """The line said before an environment is created: which runner, why it needs one, what it costs, where."""
    runner, pins = spec.runner, ", ".join(spec.pins)
    if pins:
        why = f"--versions asks for {pins}"
    elif registry.RUNNERS[runner].elsewhere():
        why = "its framework cannot be installed beside the others (it is not in looplab[all])"
    else:
        why = "--isolate runs every runner in an environment of its own"
    how = "with uv" if installer() == "uv" else "with pip, which takes minutes (`pip install uv` makes it seconds)"
    return f"creating the {spec.label} runner environment {how}: {why}; once, then reused from {path.parent}"


def source_root() -> Path:
    """A folder whose `looplab` package is this process's looplab: what an environment's `PYTHONPATH` names.

    In a source tree the repository's top-level folders are placed under `looplab` by the build, so the
    folder is a view of the tree made of links (always current, nothing copied). An installed looplab's
    folder is site-packages, which holds every other package of this environment too, so its package is
    copied once (per content) to a folder of its own.
    """
    package = Path(looplab.__file__).resolve().parent
    if (package.parent / "pyproject.toml").exists():
        return _tree_view(package.parent)
    digest = hashlib.sha256()
    for file in sorted(package.rglob("*")):
        if file.is_file() and "__pycache__" not in file.parts:
            digest.update(str(file.relative_to(package)).encode() + b"\0" + file.read_bytes())
    target = cache_root() / f"source-{digest.hexdigest()[:16]}"
    if not (target / MARKER).exists():
        with files.locked(_make_cache(cache_root()) / f"{target.name}.lock"):
            if not (target / MARKER).exists():
                shutil.copytree(package, target / "looplab", dirs_exist_ok=True)
                files.write_text(target / MARKER, "{}")
    return target


def _tree_view(repo: Path) -> Path:
    """`looplab/` as the build lays it out, made of links into the source tree at `repo`."""
    target = cache_root() / f"tree-{hashlib.sha256(str(repo).encode()).hexdigest()[:16]}"
    with files.locked(_make_cache(cache_root()) / f"{target.name}.lock"):
        view = target / "looplab"
        view.mkdir(parents=True, exist_ok=True)
        wanted = {e.name: e for e in (repo / "looplab").iterdir() if e.name != "__pycache__"}
        wanted |= {name: repo / name for name in PLACED_UNDER_LOOPLAB}
        for link in view.iterdir():
            if link.name not in wanted or not link.is_symlink() or link.resolve() != wanted[link.name].resolve():
                link.unlink() if link.is_symlink() or link.is_file() else shutil.rmtree(link)
        for name, source in wanted.items():
            if not (view / name).is_symlink():
                (view / name).symlink_to(source, target_is_directory=source.is_dir())
    return target


def _ready(spec: EnvSpec, path: Path) -> RunnerEnv | None:
    try:
        data = json.loads(files.read_text(path / MARKER))
    except (files.FileRefused, ValueError):
        return None
    return (
        RunnerEnv(spec, path, dict(data.get("packages") or {})) if (path / "bin").exists() or os.name == "nt" else None
    )


def _create(spec: EnvSpec, path: Path) -> None:
    uv = _uv()
    python = str(path / "bin" / "python")
    if uv is not None:
        steps = [[uv, "venv", "--quiet", "--python", sys.executable, str(path)]]
        # Compiled now, as pip does: where PYTHONDONTWRITEBYTECODE is set, nothing would ever be compiled, and
        # every lane would compile its framework's sources again on import (seconds for LangChain).
        steps.append([uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", python, *spec.requirements])
    else:
        steps = [[sys.executable, "-m", "venv", str(path)]]
        steps.append([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *spec.requirements])
    for step in steps:
        try:
            proc = subprocess.run(step, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise EnvironmentFailed(f"the {spec.label} environment: {step[1]} took over {STEP_TIMEOUT_S:g} s") from None
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise EnvironmentFailed(f"the {spec.label} environment could not be created: {last}")


def _installed(path: Path) -> dict[str, str]:
    """Every distribution the environment holds, with its version."""
    code = "import importlib.metadata as m, json; print(json.dumps({d.name: d.version for d in m.distributions()}))"
    proc = subprocess.run([str(path / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=60)
    try:
        return {_normal(k): v for k, v in sorted(json.loads(proc.stdout).items())}
    except ValueError:
        raise EnvironmentFailed(f"cannot list the packages of {path}: {proc.stderr.strip()[-200:]}") from None


def _uv() -> str | None:
    """The `uv` binary: the one the `uv` package ships, else one on PATH."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def _requirements(extras: set[str]) -> list[str]:
    """looplab's core requirements plus those of `extras` (and the extras they name)."""
    core, by_extra = _own_requirements()
    found, seen, todo = list(core), set(), set(extras)
    while todo:
        extra = todo.pop()
        seen.add(extra)
        for req in by_extra.get(extra, []):
            if _name(req) == "looplab":  # `looplab[a,b]`: more extras
                named = re.search(r"\[(.*)\]", req)
                todo |= {e.strip() for e in (named.group(1) if named else "").split(",") if e.strip()} - seen
                todo.discard(INSTALLER_EXTRA)
            else:
                found.append(req)
    return sorted(set(found))


def _extra_requirements(extra: str) -> list[str]:
    return _own_requirements()[1].get(extra, [])


def _own_requirements() -> tuple[list[str], dict[str, list[str]]]:
    """looplab's requirements, core and by extra: from the source tree's pyproject.toml, the code that runs.

    (An installed copy's metadata can lag its source: an editable install keeps the metadata of the day
    it was installed.)
    """
    # The tree itself, not `source_root()`: in a source tree that is a view holding only the `looplab` package.
    pyproject = Path(looplab.__file__).resolve().parent.parent / "pyproject.toml"
    if pyproject.exists():
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        return list(project.get("dependencies", [])), dict(project.get("optional-dependencies", {}))
    try:
        listed = metadata.requires("looplab") or []
    except metadata.PackageNotFoundError:
        raise LooplabError("runner environments need looplab's requirements: install looplab") from None
    core, by_extra = [], {}
    for req in listed:
        requirement, _, marker = req.partition(";")
        if match := re.search(r"extra == ['\"]([^'\"]+)['\"]", marker):
            by_extra.setdefault(match.group(1), []).append(requirement.strip())
        else:
            core.append(requirement.strip())
    return core, by_extra


def _name(requirement: str) -> str:
    match = _NAME.match(requirement.strip())
    return _normal(match.group(0)) if match else ""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
