"""The release check: the sdist and wheel built and checked as a release, `-- --tag vX.Y.Z` checking the tag too.

    python -m looplab.measure release-check [--tag vX.Y.Z [--notes FILE]] [--dist DIR]

Run in the checkout to release (`nox -s release` runs it there; the release workflow runs that session). It builds
with `python -m build`, runs `twine check --strict` on both, checks the wheel's contents against the source tree
(`wheel_expected`) and the sdist's, installs the wheel with the `handrolled` extra into a fresh venv and, from a
temporary folder outside the checkout, runs `looplab --version` and `looplab run --runner handrolled --case
vip-compound`. With `--tag vX.Y.Z` it fails unless the built version, CHANGELOG.md's sections and CITATION.cff's
`version` are the tag's; `--notes FILE` writes that CHANGELOG section (the GitHub release's text); `--dist DIR`
builds elsewhere. Publishing is the release workflow's alone.

The build tools are installed into this interpreter's environment; the module needs only the standard library and
`packaging`, so the session installs looplab without its other dependencies.
"""

from __future__ import annotations

import argparse
import email.parser
import fnmatch
import glob
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import NoReturn

from packaging.version import InvalidVersion, Version

#: Seconds each kind of step of the release check may take; past that the step is ended and the check fails.
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
    """CITATION.cff's top-level `version`, quoted or not (None without one): read as text, since the check runs
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


def release_options(argv: Sequence[str]) -> argparse.Namespace:
    """The release check's arguments (`nox -s release` hands it those after `--`)."""
    parser = argparse.ArgumentParser(
        prog="python -m looplab.measure release-check", description="Build and check the release artifacts."
    )
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


class _Refused(Exception):
    """A step of the release check failed; its message says which and why."""


def _fail(message: str) -> NoReturn:
    raise _Refused(message)


def _log(message: str) -> None:
    print(message, flush=True)


def _call(what: str, argv: list[str | Path], step: str, **popen: object) -> str:
    """Runs `argv` in a process group of its own for at most `RELEASE_TIMEOUTS[step]` seconds and returns its
    output; a failure or a timeout (the whole group ended) fails the check with the output's end."""
    command, timeout = [str(arg) for arg in argv], RELEASE_TIMEOUTS[step]
    _log(shlex.join(command))
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, **popen
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        _fail(f"{what} took over {timeout:g} s:\n{output[-3000:]}")
    if process.returncode != 0:
        _fail(f"{what} exited {process.returncode}:\n{output[-3000:]}")
    return output


def _clean_env(bin_dir: Path) -> dict[str, str]:
    """This environment with `bin_dir` first on PATH, less what could put the checkout on a path or steer a run."""
    unwanted = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in unwanted and not k.startswith("LOOPLAB_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _requirement(root: Path, extra: str, name: str) -> str:
    """`name`'s requirement in pyproject.toml's `extra`, so its bounds are written once."""
    extras = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    (found,) = [r for r in extras[extra] if re.match(r"[\w.-]+", r)[0].lower() == name]
    return found


def _fail_unless_releasable(root: Path, tag: str, built: str | None = None) -> None:
    changelog = (root / "CHANGELOG.md").read_text(encoding="utf-8")
    citation = (root / "CITATION.cff").read_text(encoding="utf-8")
    if problems := tag_problems(tag, changelog, citation, built):
        _fail(f"not releasable as {tag}:\n- " + "\n- ".join(problems))


def _build(root: Path, python: Path, env: dict[str, str], dist: Path) -> tuple[Path, Path]:
    """The sdist and wheel, built into `dist` (cleared of earlier ones first: the workflow publishes all of it)."""
    dist.mkdir(parents=True, exist_ok=True)
    for old in [*dist.glob("looplab-*.whl"), *dist.glob("looplab-*.tar.gz")]:
        old.unlink()
    _call("python -m build", [python, "-m", "build", "--outdir", dist, root], "build", cwd=root, env=env)
    wheels, sdists = list(dist.glob("looplab-*.whl")), list(dist.glob("looplab-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        _fail(f"the build left {[p.name for p in wheels + sdists]} in {dist}, not one wheel and one sdist")
    return wheels[0], sdists[0]


def _check_contents(root: Path, wheel: Path, sdist: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = zf.namelist()
    with tarfile.open(sdist) as tf:
        in_sdist = tf.getnames()
    expected, stale = wheel_expected(root)
    if problems := wheel_problems(in_wheel, expected, stale) + sdist_problems(in_sdist):
        _fail(f"{wheel.name}, {sdist.name}:\n- " + "\n- ".join(problems))
    _log(f"{wheel.name} holds the package's {len(expected)} files and nothing it must not; so does the sdist")


def _run_installed(root: Path, wheel: Path, version: str, python: Path, env: dict[str, str]) -> None:
    """The wheel with the RELEASE_RUNNER extra in a fresh venv, run from a folder outside the checkout."""
    with tempfile.TemporaryDirectory(prefix="looplab-release-") as scratch:
        tmp = Path(scratch).resolve()
        if tmp.is_relative_to(root):
            _fail(f"the temporary folder {tmp} is inside the checkout: point TMPDIR elsewhere")
        venv, elsewhere, out = tmp / "venv", tmp / "elsewhere", tmp / "out"
        elsewhere.mkdir()
        uv = python.parent / "uv"
        _call("uv venv", [uv, "venv", "--quiet", "--python", python, venv], "venv", env=env)
        wanted = f"looplab[{RELEASE_RUNNER}] @ {wheel.resolve().as_uri()}"
        install = [uv, "pip", "install", "--quiet", "--python", venv / "bin" / "python", wanted]
        _call("installing the wheel", install, "install", env=env)

        # Nothing of the checkout on a path, and not its folder: only the installed wheel can answer.
        here = {"cwd": elsewhere, "env": _clean_env(venv / "bin")}
        said = _call("looplab --version", [venv / "bin" / "looplab", "--version"], "run", **here).strip()
        if said != f"looplab {version}":
            _fail(f"`looplab --version` printed {said!r}, not 'looplab {version}'")
        probe = [venv / "bin" / "python", "-c", "import looplab; print(looplab.__file__)"]
        where = Path(_call("importing looplab", probe, "run", **here).strip())
        if not where.resolve().is_relative_to(venv):
            _fail(f"looplab was imported from {where}, not from the fresh venv {venv}")
        command = [venv / "bin" / "looplab", "run", "--runner", RELEASE_RUNNER, "--case", RELEASE_CASE, "--out", out]
        output = _call("looplab run", command, "run", **here)
        results = json.loads((out / "results.json").read_text(encoding="utf-8"))
        if problems := run_problems(output, results, version):
            _fail("the installed wheel's run:\n- " + "\n- ".join(problems) + f"\n{output[-3000:]}")
        _log(f"the installed wheel ran {RELEASE_CASE} on {RELEASE_RUNNER} from {elsewhere}: passed")


def run(options: argparse.Namespace, root: Path) -> None:
    """The release check of the checkout at `root`, as `options` (from `release_options`) say; raises on the first
    step that fails, saying why."""
    if options.tag:
        _fail_unless_releasable(root, options.tag)  # before a build: CHANGELOG.md and CITATION.cff

    # This interpreter as it was started (a venv's, not the one it links to): the tools go into its environment.
    python = Path(sys.executable)
    env = _clean_env(python.parent)
    tools = [_requirement(root, extra, name) for extra, name in (("dev", "build"), ("dev", "twine"), ("isolate", "uv"))]
    _call("installing the tools", [python, "-m", "pip", "install", "--quiet", *tools], "install", env=env)
    dist = root / options.dist
    wheel, sdist = _build(root, python, env, dist)
    version = wheel_version(wheel)
    _call("twine check", [python, "-m", "twine", "check", "--strict", wheel, sdist], "check", env=env)
    _check_contents(root, wheel, sdist)
    if options.tag:
        _fail_unless_releasable(root, options.tag, built=version)
    _run_installed(root, wheel, version, python, env)

    if options.notes:
        changelog = (root / "CHANGELOG.md").read_text(encoding="utf-8")
        notes = root / options.notes
        notes.write_text(f"{changelog_section(changelog, tag_version(options.tag))}\n", encoding="utf-8")
        _log(f"the release notes, CHANGELOG.md's section for {options.tag}: {notes}")
    tagged = f" as {options.tag}" if options.tag else ""
    _log(f"looplab {version} is releasable{tagged}: {wheel.name} and {sdist.name} in {dist}")


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m looplab.measure release-check [--tag vX.Y.Z] [--notes FILE] [--dist DIR]`, in the checkout: exit 1
    with the failed step's reason on stderr."""
    options = release_options(sys.argv[1:] if argv is None else argv)
    try:
        run(options, Path.cwd().resolve())
    except _Refused as refused:
        print(f"release check failed: {refused}", file=sys.stderr, flush=True)
        return 1
    return 0
